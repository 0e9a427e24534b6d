"""Tunable knobs of the packed conv2d/dense schedules and the analytic default chooser.

The chooser enumerates tile sizes that fit the scratchpads (per virtual thread) and picks
the one with the lowest estimated cycle count from the timing contract: compute cycles
(GEMM + reset + ALU), DMA port cycles (latency per copy + beats + pads), the unhidden first
load and last store, and per-instruction overheads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isa import HwConfig

if TYPE_CHECKING:
    from compiler.topi.conv2d import ConvShape


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class ConvKnobs:
    """Output tile = ``oc_tile`` channel blocks x ``h_tile`` rows x full width; ``ic_tile`` input blocks per chunk."""

    oc_tile: int
    h_tile: int
    ic_tile: int
    vthreads: int = 2
    vthread_axis: str = "oc"  # "oc" or "h"

    def check(self, cs: "ConvShape") -> None:
        for name, v, top in (("oc_tile", self.oc_tile, cs.ocb), ("h_tile", self.h_tile, cs.oh),
                             ("ic_tile", self.ic_tile, cs.icb)):
            if not isinstance(v, int) or not 1 <= v <= top:
                raise ValueError(f"ConvKnobs.{name}={v!r} must be an int in 1..{top}")
        if self.vthreads not in (1, 2, 3, 4):
            raise ValueError(f"ConvKnobs.vthreads={self.vthreads!r} must be 1..4")
        if self.vthread_axis not in ("oc", "h"):
            raise ValueError(f"ConvKnobs.vthread_axis={self.vthread_axis!r} must be 'oc' or 'h'")


def conv_footprint(cfg: HwConfig, cs: "ConvShape", k: ConvKnobs, n_consts: int) -> dict[str, int]:
    """Scratchpad elements the schedule needs with knobs ``k``."""
    rows = (k.h_tile - 1) * cs.stride[0] + cs.kh
    cols = (cs.ow - 1) * cs.stride[1] + cs.kw
    v = k.vthreads
    return {"inp": v * k.ic_tile * rows * cols,
            "wgt": v * k.oc_tile * k.ic_tile * cs.kh * cs.kw,
            "acc": v * k.oc_tile * k.h_tile * cs.ow + n_consts * cs.groups * cs.ocb}


def fits(cfg: HwConfig, cs: "ConvShape", k: ConvKnobs, n_consts: int) -> bool:
    fp = conv_footprint(cfg, cs, k, n_consts)
    if any(fp[m] > cfg.depth(m) for m in fp):
        return False
    loops = sorted([k.oc_tile, k.h_tile, cs.ow, k.ic_tile, cs.kh, cs.kw], reverse=True)
    uops = 1
    for e in loops[2:]:
        uops *= e
    return uops <= min(2048, cfg.uop_depth // 4) and loops[0] < (1 << 14)


def estimate_conv(cfg: HwConfig, cs: "ConvShape", k: ConvKnobs, n_alu: int) -> float:
    """Estimated cycles of the conv with knobs ``k`` (see module docstring)."""
    L, bus = cfg.dram_latency, cfg.bus_bytes
    beats = {m: max(1, cfg.elem_bytes(m) // bus) for m in ("inp", "wgt", "out")}
    oct_n = _cdiv(cs.ocb, k.oc_tile)
    ht_n = _cdiv(cs.oh, k.h_tile)
    chunks = _cdiv(cs.icb, k.ic_tile)
    tiles = cs.nb * cs.groups * oct_n * ht_n
    out_elems = k.oc_tile * k.h_tile * cs.ow
    gemm = out_elems * k.ic_tile * cs.kh * cs.kw + cfg.gemm_pipeline
    tile_compute = chunks * gemm + (1 + n_alu) * (out_elems + cfg.alu_pipeline)
    rows = (k.h_tile - 1) * cs.stride[0] + cs.kh
    cols = (cs.ow - 1) * cs.stride[1] + cs.kw
    pads = k.ic_tile * (rows * cols - min(rows, cs.h) * min(cols, cs.w))
    inp_load = k.ic_tile * (L + min(rows, cs.h) * min(cols, cs.w) * beats["inp"]) + max(0, pads)
    if cs.padding == (0, 0, 0, 0) and cs.kw == 1 and cs.stride[1] == 1:
        inp_load = L + k.ic_tile * rows * cols * beats["inp"]
    wgt_load = L + k.oc_tile * k.ic_tile * cs.kh * cs.kw * beats["wgt"]
    wgt_per_tile = chunks * wgt_load if chunks > 1 else (wgt_load if k.vthread_axis == "oc" or k.vthreads == 1 else 0)
    if chunks == 1 and k.vthread_axis == "h":
        wgt_per_tile = wgt_load * k.vthreads / max(1, ht_n)
    store = L * k.oc_tile + out_elems * beats["out"]
    port = tiles * (chunks * inp_load + wgt_per_tile + store)
    compute = tiles * tile_compute
    insns = tiles * (chunks * (k.ic_tile + 3) + n_alu + 3)
    fetch = insns * (16 / bus + L / cfg.fetch_burst)
    if k.vthreads > 1:
        first = inp_load + wgt_load
        return max(compute, port + fetch) + first + store + 0.15 * min(compute, port)
    return compute + port + fetch * 0.5


def choose_conv_knobs(cfg: HwConfig, cs: "ConvShape", n_consts: int = 0, n_alu: int = 3,
                      vthreads: int | None = None) -> ConvKnobs:
    """The feasible knobs with the lowest estimate (``vthreads`` pins the thread count)."""
    best, best_cost = None, None
    vts = (vthreads,) if vthreads is not None else (2, 1)
    for v in vts:
        for axis in (("oc", "h") if v > 1 else ("oc",)):
            for oc_t in _divisor_like(cs.ocb):
                for ic_t in _divisor_like(cs.icb):
                    for h_t in range(1, cs.oh + 1):
                        k = ConvKnobs(oc_t, h_t, ic_t, v, axis)
                        if v > 1 and axis == "oc" and _cdiv(cs.ocb, oc_t) < v:
                            continue
                        if v > 1 and axis == "h" and _cdiv(cs.oh, h_t) < v:
                            continue
                        if not fits(cfg, cs, k, n_consts):
                            continue
                        c = estimate_conv(cfg, cs, k, n_alu)
                        if best_cost is None or c < best_cost:
                            best, best_cost = k, c
    if best is None:
        raise ValueError(f"conv2d {cs}: no tiling fits the scratchpads of {cfg.name} (even one row, one block)")
    return best


def _divisor_like(n: int) -> list[int]:
    """Candidate tile sizes: divisors of n (ragged tiles are legal but rarely better)."""
    return [d for d in range(1, n + 1) if n % d == 0]
