"""Scratchpad allocation: place every buffer (times its virtual-thread copies) in its scratchpad."""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.schedule.errors import LowerError

if TYPE_CHECKING:
    from compiler.tir.accel.ir import LoweredFunc
    from isa import HwConfig


class AllocationError(LowerError):
    """A scratchpad buffer does not fit (names the buffer, its size and the capacity)."""


def allocate(func: "LoweredFunc", cfg: "HwConfig") -> dict[str, int]:
    """Assign ``base`` to each non-alias buffer; returns elements used per scratchpad.

    Raises :class:`AllocationError` naming the buffers when a scratchpad overflows.
    """
    used: dict[str, int] = {"inp": 0, "wgt": 0, "acc": 0}
    owners: dict[str, list[str]] = {"inp": [], "wgt": [], "acc": []}
    # buffers read as vector operands first: their micro-op index is row * k + piece (isa.intrinsics)
    for buf in sorted(func.buffers, key=lambda b: not b.vector):
        if buf.alias_of is not None:
            continue
        if buf.scope not in used:
            raise AllocationError(f"buffer {buf.name}: unknown scratchpad {buf.scope!r}")
        buf.base = used[buf.scope]
        n = buf.elems * buf.copies
        used[buf.scope] += n
        owners[buf.scope].append(f"{buf.name} {list(buf.shape)} x{buf.copies} = {n}")
    for mem, n in used.items():
        depth = cfg.depth(mem)
        if n > depth:
            raise AllocationError(
                f"kernel {func.name}: the {mem} scratchpad needs {n} elements but holds {depth} "
                f"({cfg.elem_bytes(mem)} B each): {'; '.join(owners[mem])}. Use smaller tiles (split factors) "
                f"or fewer virtual threads")
    return used
