"""Helpers shared by the units: instruction field slicing and small arithmetic helpers."""
from __future__ import annotations

import math

from amaranth.hdl import Value

from isa.config import HwConfig
from isa.encoding import layouts


def field(word: Value, cfg: HwConfig, fmt: str, name: str) -> Value:
    """Field ``name`` of format ``fmt`` (MEM, GEMM, ALU, FINISH, UOP) sliced out of ``word``."""
    f = layouts(cfg)[fmt].field(name)
    v = word[f.lo:f.lo + f.width]
    return v.as_signed() if f.signed else v


def log2(n: int) -> int:
    """log2 of a power of two."""
    assert n > 0 and n & (n - 1) == 0, n
    return n.bit_length() - 1


def clog2(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))


def epb(cfg: HwConfig, elem_bytes: int) -> int:
    """Elements per bus beat (1 when an element spans one or more beats)."""
    return max(1, cfg.bus_bytes // elem_bytes)


def bpe(cfg: HwConfig, elem_bytes: int) -> int:
    """Beats per element (1 when several elements share a beat)."""
    return max(1, elem_bytes // cfg.bus_bytes)
