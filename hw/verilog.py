"""Verilog generation for an :class:`HwConfig` (top module ``vta_top``)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from amaranth.back import verilog

from isa.config import HwConfig

TOP = "vta_top"


def generate(cfg: HwConfig) -> str:
    """The top-level Verilog text of the accelerator for ``cfg``."""
    from hw.top import Accelerator

    return verilog.convert(Accelerator(cfg), name=TOP, emit_src=False)


def write(cfg: HwConfig, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{TOP}.v"
    path.write_text(generate(cfg))
    return path


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
