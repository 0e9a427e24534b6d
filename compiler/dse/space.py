"""The design space: HwConfig fields given as lists or ranges over a base config, expanded and validated.

A space file is a JSON object::

    {"base": "pynq-z1",                          # preset name or config JSON file (default pynq-z1)
     "params": {"log_block_out": [3, 4, 5],      # a list of values
                "clock_mhz": {"from": 100, "to": 200, "step": 50},     # an arithmetic range (both ends included)
                "wgt_buff_size": {"from": 65536, "to": 262144, "times": 2}}}  # a geometric range

Every point of the cross product is made into a :class:`isa.config.HwConfig`; a point the config validator
rejects is pruned, with the validator's message as its reason, before anything is evaluated.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from isa.config import HwConfig, make_config, preset_names
from isa.errors import ConfigError

#: Fields a space may sweep (every HwConfig field but the name).
SWEEPABLE = tuple(f.name for f in fields(HwConfig) if f.name != "name")
#: Most points one space may hold (a typo such as a huge range should fail fast, not run for days).
MAX_POINTS = 100_000


class SpaceError(ValueError):
    """A design-space description that cannot be expanded (the message names the field and what is allowed)."""


@dataclass(frozen=True)
class Point:
    """One point of the space: its index, the swept values and the full config field dict."""

    index: int
    params: dict[str, Any]
    fields: dict[str, Any]

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())


@dataclass
class Space:
    """A parsed space: the base config and each swept field's values (in the file's order)."""

    base: HwConfig
    params: dict[str, list]
    valid: list[Point] = field(default_factory=list)
    pruned: list[dict] = field(default_factory=list)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.params.values())


def _range_values(name: str, spec: dict) -> list:
    keys = set(spec)
    allowed = {"from", "to", "step", "times"}
    if keys - allowed or not {"from", "to"} <= keys or len(keys & {"step", "times"}) != 1:
        raise SpaceError(f"space field {name!r}: a range is {{\"from\": A, \"to\": B, \"step\": S}} or "
                         f"{{\"from\": A, \"to\": B, \"times\": K}}; got keys {sorted(keys)}")
    lo, hi = spec["from"], spec["to"]
    for k in ("from", "to", "step", "times"):
        v = spec.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise SpaceError(f"space field {name!r}: range {k!r} must be a finite number, got {v!r}")
    is_int = all(isinstance(spec[k], int) for k in spec)
    out: list = []
    if "step" in spec:
        step = spec["step"]
        if step <= 0:
            raise SpaceError(f"space field {name!r}: range step must be > 0, got {step!r}")
        n = math.floor((hi - lo) / step + 1e-9) + 1 if hi >= lo else 0
        if n > MAX_POINTS:
            raise SpaceError(f"space field {name!r}: range has {n} values (at most {MAX_POINTS})")
        out = [lo + i * step if is_int else round(lo + i * step, 9) for i in range(max(n, 0))]
    else:
        k = spec["times"]
        if k <= 1 or lo <= 0:
            raise SpaceError(f"space field {name!r}: a geometric range needs times > 1 and from > 0, "
                             f"got from={lo!r} times={k!r}")
        v = lo
        while v <= hi * (1 + 1e-12):
            out.append(v if is_int else round(v, 9))
            v = v * k
    if not out:
        raise SpaceError(f"space field {name!r}: the range {spec} is empty (from {lo!r} to {hi!r})")
    return out


def _values(name: str, spec: Any) -> list:
    if name not in SWEEPABLE:
        raise SpaceError(f"space field {name!r} is not a HwConfig field; sweepable fields: {', '.join(SWEEPABLE)}")
    if isinstance(spec, list):
        if not spec:
            raise SpaceError(f"space field {name!r}: the list of values is empty")
        vals = spec
    elif isinstance(spec, dict):
        vals = _range_values(name, spec)
    else:
        vals = [spec]  # a single value: the field is fixed for the whole sweep
    seen: list = []
    for v in vals:
        if v not in seen:
            seen.append(v)
    return seen


def parse_space(source: str | Path | dict) -> Space:
    """A :class:`Space` from a JSON file path or a dict (see the module docstring), expanded and validated."""
    if isinstance(source, dict):
        data, origin = source, "space"
    else:
        path = Path(source)
        if not path.is_file():
            raise SpaceError(f"space file {str(source)!r} does not exist")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SpaceError(f"space file {str(source)!r} is not valid JSON: {exc}") from None
        origin = f"space file {str(source)!r}"
    if not isinstance(data, dict):
        raise SpaceError(f"{origin} must hold a JSON object with \"params\" (and optionally \"base\")")
    unknown = sorted(set(data) - {"base", "params"})
    if unknown:
        raise SpaceError(f"{origin}: unknown key(s) {unknown}; allowed: \"base\" (preset or config file) and "
                         f"\"params\" (field -> list or range)")
    params = data.get("params")
    if not isinstance(params, dict) or not params:
        raise SpaceError(f"{origin}: \"params\" must be a non-empty object of HwConfig field -> list or range")
    base_src = data.get("base", "pynq-z1")
    try:
        base = make_config(base_src)
    except ConfigError as exc:
        raise SpaceError(f"{origin}: \"base\" {base_src!r}: {exc} (presets: {', '.join(preset_names())})") from None
    space = Space(base, {name: _values(name, spec) for name, spec in params.items()})
    if space.size > MAX_POINTS:
        raise SpaceError(f"{origin}: {space.size} points (at most {MAX_POINTS}); narrow the ranges")
    expand(space)
    return space


def expand(space: Space) -> Space:
    """Fill ``space.valid`` (the points the config validator accepts) and ``space.pruned`` (the others, each with
    the validator's reason). Raises :class:`SpaceError` when no point is valid, with the most common reasons."""
    names = list(space.params)
    base = space.base.to_dict()
    space.valid, space.pruned = [], []
    for n, combo in enumerate(itertools.product(*(space.params[k] for k in names))):
        params = dict(zip(names, combo))
        data = {**base, **params, "name": f"{space.base.name}-dse{n}"}
        try:
            cfg = make_config(data)
        except ConfigError as exc:
            space.pruned.append({"index": n, "params": params, "reason": str(exc).removeprefix("dict: ")})
            continue
        space.valid.append(Point(n, params, cfg.to_dict()))
    if not space.valid:
        reasons: dict[str, int] = {}
        for p in space.pruned:
            reasons[p["reason"]] = reasons.get(p["reason"], 0) + 1
        top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
        raise SpaceError(f"the space has no valid point: all {len(space.pruned)} are rejected by the config "
                         f"validator, e.g. " + "; ".join(f"{r} ({c} points)" for r, c in top))
    return space
