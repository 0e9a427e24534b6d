"""Resolve the ``config`` argument of ``build``: an isa.HwConfig-like object, a preset name, or None."""
from __future__ import annotations

import importlib

from compiler.graph.accel_interface import BlockConfig

REQUIRED_FIELDS = ("batch", "block_in", "block_out")


def _preset(name: str):
    try:
        isa = importlib.import_module("isa")
    except ImportError as exc:
        raise ValueError(f"config preset {name!r} needs the isa package ({exc}); pass a config object instead") from exc
    hw = getattr(isa, "HwConfig", None)
    for owner, attr in ((isa, "get_preset"), (isa, "load_preset"), (hw, "preset"), (hw, "from_preset")):
        fn = getattr(owner, attr, None) if owner is not None else None
        if callable(fn):
            return fn(name)
    raise ValueError(f"config preset {name!r}: isa exposes no preset loader (isa.get_preset / HwConfig.from_preset)")


def resolve_config(config) -> object:
    """Return a config object with batch/block_in/block_out (and clock_mhz, default 100)."""
    if config is None:
        return BlockConfig()
    if isinstance(config, str):
        config = _preset(config)
    missing = [f for f in REQUIRED_FIELDS if not isinstance(getattr(config, f, None), int)]
    if missing:
        raise ValueError(f"config {config!r} lacks integer fields {missing}; it needs {list(REQUIRED_FIELDS)}")
    for f in REQUIRED_FIELDS:
        if getattr(config, f) < 1:
            raise ValueError(f"config.{f} must be >= 1, got {getattr(config, f)}")
    return config
