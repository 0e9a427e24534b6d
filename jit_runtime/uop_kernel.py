"""Micro-kernels: a list of micro-ops inside at most two loop levels, recorded once per signature.

A kernel is what one GEMM or ALU instruction executes. It is recorded by a *finit*
callback (VTA's ``VTAPushGEMMOp(uop_handle, finit, signature)`` pattern)::

    def finit(k: KernelBuilder) -> None:
        k.loop_begin(extent=rows, dst_factor=1, src_factor=1)
        k.push(dst=0, src=0)
        k.loop_end()

:class:`UopCache` tracks which kernels are resident in the uop scratchpad (LRU).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Hashable

import numpy as np

from isa import Uop, encode_uops
from isa.encoding import LOOP_BITS
from jit_runtime.errors import KernelError, UopLoopError

if TYPE_CHECKING:
    from isa import HwConfig
    from jit_runtime.buffers import DeviceBuffer

MAX_LOOP_LEVELS = 2
MAX_EXTENT = (1 << LOOP_BITS) - 1
MODES = ("gemm", "alu")


@dataclass(frozen=True)
class UopLoop:
    """One loop level: ``extent`` iterations, each adding the factors to the uop indices."""

    extent: int
    dst_factor: int = 0
    src_factor: int = 0
    wgt_factor: int = 0


class KernelBuilder:
    """Records the loops and micro-ops of one kernel (handed to a finit callback)."""

    def __init__(self, mode: str):
        if mode not in MODES:
            raise KernelError(f"kernel mode {mode!r} must be one of {MODES}")
        self.mode = mode
        self.loops: list[UopLoop] = []
        self.uops: list[Uop] = []
        self._open = 0
        self._closed = False

    def loop_begin(self, extent: int, dst_factor: int = 0, src_factor: int = 0, wgt_factor: int = 0) -> None:
        """Open a loop level (outer first). At most two levels; all of them before the first ``push``."""
        if self._open >= MAX_LOOP_LEVELS:
            raise UopLoopError(f"uop_loop_begin: a kernel has at most {MAX_LOOP_LEVELS} loop levels "
                               f"(a third loop_begin was called)")
        if self.uops or self._closed:
            raise UopLoopError("uop_loop_begin: loops must be opened before the first uop_push and cannot "
                               "follow a loop_end (the loop nest must be perfect)")
        if not isinstance(extent, (int, np.integer)) or not 1 <= extent <= MAX_EXTENT:
            raise UopLoopError(f"uop_loop_begin: extent={extent!r} must be an integer in 1..{MAX_EXTENT}")
        if self.mode == "alu" and wgt_factor:
            raise UopLoopError(f"uop_loop_begin: an ALU kernel has no weight index (wgt_factor={wgt_factor})")
        for name, v in (("dst_factor", dst_factor), ("src_factor", src_factor), ("wgt_factor", wgt_factor)):
            if v < 0:
                raise UopLoopError(f"uop_loop_begin: {name}={v} must be >= 0")
        self.loops.append(UopLoop(int(extent), int(dst_factor), int(src_factor), int(wgt_factor)))
        self._open += 1

    def loop_end(self) -> None:
        """Close the innermost open loop."""
        if self._open == 0:
            raise UopLoopError("uop_loop_end without a matching uop_loop_begin")
        self._open -= 1
        self._closed = True

    def push(self, dst: int, src: int, wgt: int = 0) -> None:
        """Append a micro-op: acc index ``dst``, inp (GEMM) or acc (ALU) index ``src``, wgt index ``wgt``."""
        if self._closed:
            raise UopLoopError("uop_push after uop_loop_end: micro-ops go inside the innermost loop")
        if min(dst, src, wgt) < 0:
            raise KernelError(f"uop_push: indices must be >= 0 (dst={dst}, src={src}, wgt={wgt})")
        if self.mode == "alu" and wgt:
            raise KernelError(f"uop_push: an ALU micro-op has no weight index (wgt={wgt})")
        self.uops.append(Uop(int(dst), int(src), int(wgt)))

    def finish(self) -> tuple[tuple[UopLoop, ...], tuple[Uop, ...]]:
        if self._open:
            raise UopLoopError(f"micro-kernel recorded with {self._open} uop loop(s) still open "
                               f"(uop_loop_begin without uop_loop_end)")
        if not self.uops:
            raise KernelError("micro-kernel has no micro-ops (call push at least once)")
        return tuple(self.loops), tuple(self.uops)


@dataclass(eq=False)
class UopKernel:
    """A recorded micro-kernel: its loops, micro-ops, encoded words and DRAM copy."""

    mode: str
    key: Hashable
    loops: tuple[UopLoop, ...]
    uops: tuple[Uop, ...]
    words: np.ndarray
    buffer: "DeviceBuffer | None" = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return len(self.uops)

    def loop_fields(self) -> dict[str, int]:
        """iter_out/iter_in and the factor fields of the GEMM/ALU instruction that runs this kernel."""
        outer = self.loops[0] if self.loops else UopLoop(1)
        inner = self.loops[1] if len(self.loops) > 1 else UopLoop(1)
        out = {"iter_out": outer.extent, "iter_in": inner.extent,
               "dst_factor_out": outer.dst_factor, "dst_factor_in": inner.dst_factor,
               "src_factor_out": outer.src_factor, "src_factor_in": inner.src_factor}
        if self.mode == "gemm":
            out.update(wgt_factor_out=outer.wgt_factor, wgt_factor_in=inner.wgt_factor)
        return out


def make_kernel(cfg: "HwConfig", builder: KernelBuilder, signature: Hashable | None) -> UopKernel:
    """The kernel recorded by ``builder`` (key = signature, or the content when ``signature`` is None)."""
    loops, uops = builder.finish()
    if len(uops) > cfg.uop_depth:
        raise KernelError(f"micro-kernel of {len(uops)} uops does not fit the uop scratchpad "
                          f"({cfg.uop_depth} entries)")
    mode = builder.mode
    key = (mode, "sig", signature) if signature is not None else (mode, "content", loops, uops)
    return UopKernel(mode, key, loops, uops, encode_uops(uops, cfg))


@dataclass
class UopCacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    uops_loaded: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                "uops_loaded": self.uops_loaded}


class UopCache:
    """Which kernels sit where in the uop scratchpad; least recently used kernels are evicted first."""

    def __init__(self, capacity: int, align: int = 1):
        self.capacity = capacity
        self.align = align  # kernels start on a bus-beat boundary of the scratchpad
        self._resident: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()  # key -> (base, size)
        self.stats = UopCacheStats()

    def lookup(self, kernel: UopKernel) -> tuple[int, bool]:
        """``(uop_bgn, hit)``: on a miss a range is reserved (evicting LRU kernels) and must be loaded."""
        entry = self._resident.get(kernel.key)
        if entry is not None:
            self._resident.move_to_end(kernel.key)
            self.stats.hits += 1
            return entry[0], True
        if kernel.size > self.capacity:
            raise KernelError(f"micro-kernel of {kernel.size} uops exceeds the uop scratchpad ({self.capacity})")
        size = -(-kernel.size // self.align) * self.align
        if size > self.capacity:
            raise KernelError(f"micro-kernel of {kernel.size} uops exceeds the uop scratchpad ({self.capacity})")
        base = self._find_gap(size)
        while base is None:
            self._resident.popitem(last=False)
            self.stats.evictions += 1
            base = self._find_gap(size)
        self._resident[kernel.key] = (base, size)
        self.stats.misses += 1
        self.stats.uops_loaded += kernel.size
        return base, False

    def is_resident(self, kernel: UopKernel) -> bool:
        """Whether ``kernel`` is in the scratchpad (no statistics or LRU change)."""
        return kernel.key in self._resident

    def _find_gap(self, size: int) -> int | None:
        pos = 0
        for base, n in sorted(self._resident.values()):
            if base - pos >= size:
                return pos
            pos = max(pos, base + n)
        return pos if self.capacity - pos >= size else None

    def resident(self) -> dict[Hashable, tuple[int, int]]:
        return dict(self._resident)

    def reset(self) -> None:
        """Forget residency and statistics (a new program starts with an empty scratchpad)."""
        self._resident.clear()
        self.stats = UopCacheStats()
