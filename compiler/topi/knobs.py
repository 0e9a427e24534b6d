"""Tunable knobs of the packed conv2d/dense schedules and the analytic default chooser.

The chooser enumerates tile sizes that fit the scratchpads (per virtual thread) and picks
the one with the lowest estimated cycle count from the timing contract: compute cycles
(GEMM, overwrite split or reset, ALU), DMA port cycles (latency per copy + beats + pads, operands
resident while their region is unchanged, strided loads), the unhidden first
load and last store, and per-instruction overheads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isa import HwConfig
from isa.timing import ceil_div

if TYPE_CHECKING:
    from compiler.topi.conv2d import ConvShape


class NoTilingError(ValueError):
    """No output tile of the conv fits the config's scratchpads (the width is never split)."""


@dataclass(frozen=True)
class ConvKnobs:
    """Output tile = ``oc_tile`` channel blocks x ``h_tile`` rows x full width; ``ic_tile`` input blocks per chunk.

    ``order``: which output-tile loop is outer ("oc": channel tiles outside row tiles, or "h").
    ``epilogue``: placement of the ALU epilogue among virtual threads: "fused" (in the same segment as
    the tile's last GEMM) or "deferred" (its own segment: the other thread's GEMM may run first).
    """

    oc_tile: int
    h_tile: int
    ic_tile: int
    vthreads: int = 2
    vthread_axis: str = "oc"  # "oc" or "h"
    order: str = "oc"         # outer output-tile loop: "oc" or "h"
    epilogue: str = "fused"   # "fused" or "deferred"

    def check(self, cs: "ConvShape") -> None:
        for name, v, top in (("oc_tile", self.oc_tile, cs.ocb), ("h_tile", self.h_tile, cs.oh),
                             ("ic_tile", self.ic_tile, cs.icb)):
            if not isinstance(v, int) or not 1 <= v <= top:
                raise ValueError(f"ConvKnobs.{name}={v!r} must be an int in 1..{top}")
        if self.vthreads not in (1, 2, 3, 4):
            raise ValueError(f"ConvKnobs.vthreads={self.vthreads!r} must be 1..4")
        if self.vthread_axis not in ("oc", "h"):
            raise ValueError(f"ConvKnobs.vthread_axis={self.vthread_axis!r} must be 'oc' or 'h'")
        if self.order not in ("oc", "h"):
            raise ValueError(f"ConvKnobs.order={self.order!r} must be 'oc' or 'h'")
        if self.epilogue not in ("fused", "deferred"):
            raise ValueError(f"ConvKnobs.epilogue={self.epilogue!r} must be 'fused' or 'deferred'")


def strided_view(cs: "ConvShape") -> bool:
    """A strided 1x1 conv without padding: its DMA loads only the pixels it reads (strided rows)."""
    return cs.kh == cs.kw == 1 and cs.stride != (1, 1) and cs.padding == (0, 0, 0, 0)


def consts_loaded_per_tile(cs: "ConvShape", k: ConvKnobs) -> bool:
    """Whether the schedule loads the per-channel constants with each output channel tile (channel tiles
    outermost and at least one tile per thread; see ``schedule_conv2d``) rather than all before the first GEMM."""
    return k.order == "oc" and k.vthreads * k.oc_tile <= cs.groups * cs.ocb


def conv_footprint(cfg: HwConfig, cs: "ConvShape", k: ConvKnobs, n_consts: int,
                   residual: bool = False, consts_per_tile: bool = False) -> dict[str, int]:
    """Scratchpad elements the schedule needs with knobs ``k``. Each of the ``n_consts`` per-channel constants
    takes one element per channel block in acc (int32 constants) or in wgt (the fused REQUANT's records): the
    whole layer's are reserved, or with ``consts_per_tile`` (where :func:`consts_loaded_per_tile`) only each
    thread's channel tile. A fused ``residual`` Add adds one output tile in inp (its operand) and one in acc."""
    rows = (k.h_tile - 1) * cs.stride[0] + cs.kh
    cols = (cs.ow - 1) * cs.stride[1] + cs.kw
    v = k.vthreads
    tile = v * k.oc_tile * k.h_tile * cs.ow if residual else 0
    blocks = v * k.oc_tile if consts_per_tile and consts_loaded_per_tile(cs, k) else cs.groups * cs.ocb
    return {"inp": v * k.ic_tile * rows * cols + tile,
            "wgt": v * k.oc_tile * k.ic_tile * cs.kh * cs.kw + n_consts * blocks,
            "acc": v * k.oc_tile * k.h_tile * cs.ow + n_consts * blocks + tile}


def violation(cfg: HwConfig, cs: "ConvShape", k: ConvKnobs, n_consts: int, residual: bool = False,
              consts_per_tile: bool = False) -> str | None:
    """Why the schedule with knobs ``k`` cannot work (a short reason), or None when it fits (``residual``: a fused
    residual Add's operand tiles are reserved too; ``consts_per_tile``: see :func:`conv_footprint`)."""
    fp = conv_footprint(cfg, cs, k, n_consts, residual, consts_per_tile)
    for m in fp:
        if fp[m] > cfg.depth(m):
            return f"{m} scratchpad overflow"
    loops = sorted([k.oc_tile, k.h_tile, cs.ow, k.ic_tile, cs.kh, cs.kw], reverse=True)
    uops = 1
    for e in loops[2:]:
        uops *= e
    if uops > min(2048, cfg.uop_depth // 4):
        return "uop kernel too large"
    if loops[0] >= (1 << 14):
        return "loop extent field too narrow"
    return None


def fits(cfg: HwConfig, cs: "ConvShape", k: ConvKnobs, n_consts: int, residual: bool = False,
         consts_per_tile: bool = False) -> bool:
    return violation(cfg, cs, k, n_consts, residual, consts_per_tile) is None


def estimate_conv(cfg: HwConfig, cs: "ConvShape", k: ConvKnobs, n_alu: int, overwrite: bool = True) -> float:
    """Estimated cycles of the conv with knobs ``k`` (see module docstring)."""
    L, bus = cfg.dram_latency, cfg.bus_bytes
    beats = {m: max(1, cfg.elem_bytes(m) // bus) for m in ("inp", "wgt", "out")}
    v = k.vthreads
    oct_n = ceil_div(cs.ocb, k.oc_tile)
    ht_n = ceil_div(cs.oh, k.h_tile)
    chunks = ceil_div(cs.icb, k.ic_tile)
    tiles = cs.nb * cs.groups * oct_n * ht_n
    out_elems = k.oc_tile * k.h_tile * cs.ow
    n_red = sum(e > 1 for e in (k.ic_tile, cs.kh, cs.kw))
    gemm = out_elems * k.ic_tile * cs.kh * cs.kw + cfg.gemm_pipeline
    reset = cfg.gemm_pipeline * n_red if overwrite else out_elems + cfg.gemm_pipeline
    tile_compute = chunks * gemm + reset + n_alu * (out_elems + cfg.alu_pipeline)
    if strided_view(cs):  # one strided load per row and input block
        inp_load = k.ic_tile * k.h_tile * (L + cs.ow * beats["inp"])
    else:
        rows = (k.h_tile - 1) * cs.stride[0] + cs.kh
        cols = (cs.ow - 1) * cs.stride[1] + cs.kw
        pads = k.ic_tile * (rows * cols - min(rows, cs.h) * min(cols, cs.w))
        inp_load = k.ic_tile * (L + min(rows, cs.h) * min(cols, cs.w) * beats["inp"]) + max(0, pads)
        if cs.padding == (0, 0, 0, 0) and cs.kw == 1 and cs.stride[1] == 1:
            inp_load = L + k.ic_tile * rows * cols * beats["inp"]
    wgt_load = L + k.oc_tile * k.ic_tile * cs.kh * cs.kw * beats["wgt"]
    per_thread_oc = oct_n * (v if k.vthread_axis == "h" else 1)
    if chunks == 1:  # operands stay resident while their region does not change in a thread
        wgt_total = cs.nb * cs.groups * per_thread_oc * wgt_load
        inp_total = (cs.nb * cs.groups * v * inp_load if ht_n == 1 and k.vthread_axis == "oc"
                     else tiles * inp_load)
    else:
        wgt_total = tiles * chunks * wgt_load
        inp_total = tiles * chunks * inp_load
    n_store = 1 if k.h_tile == cs.oh else k.oc_tile
    store = L * n_store + out_elems * beats["out"]
    insns = conv_insns(cs, k, n_alu)
    fetch = insns * (16 / bus + L / cfg.fetch_burst)
    port = inp_total + wgt_total + tiles * store + fetch
    compute = tiles * tile_compute
    if v > 1:
        first = inp_load + wgt_load
        return max(compute, port) + first + store + 0.1 * min(compute, port) + tile_compute / max(1, chunks) * 0.5
    return compute + port


def conv_insns(cs: "ConvShape", k: ConvKnobs, n_alu: int) -> int:
    """Instructions of the conv's program with knobs ``k`` (per output tile and input chunk: the input loads, a
    weight load, the GEMM and the reduction resets; per tile: ``n_alu`` ALU passes, the stores and two
    synchronizing instructions): what lowering and encoding cost grows with, a fixed count per batch block."""
    tiles = cs.nb * cs.groups * ceil_div(cs.ocb, k.oc_tile) * ceil_div(cs.oh, k.h_tile)
    chunks = ceil_div(cs.icb, k.ic_tile)
    n_red = sum(e > 1 for e in (k.ic_tile, cs.kh, cs.kw))
    if strided_view(cs):
        n_inp = k.ic_tile * k.h_tile
    elif cs.padding == (0, 0, 0, 0) and cs.kw == 1 and cs.stride[1] == 1:
        n_inp = 1
    else:
        n_inp = k.ic_tile
    n_store = 1 if k.h_tile == cs.oh else k.oc_tile
    return tiles * (chunks * (n_inp + 2 + n_red) + n_alu + n_store + 2)


def rank_conv_knobs(cfg: HwConfig, cs: "ConvShape", n_consts: int = 0, n_alu: int = 3,
                    vthreads: int | None = None, residual: bool = False,
                    thread_counts: tuple[int, ...] = (2, 1)) -> list[tuple[float, ConvKnobs]]:
    """Every feasible knob setting with its estimate, cheapest first (``vthreads`` pins the thread count; else the
    ``thread_counts`` are tried, ties keeping that order)."""
    out = _rank(cfg, cs, n_consts, n_alu, vthreads, residual, thread_counts, consts_per_tile=False)
    if not out:  # small scratchpads: the whole layer's constants do not fit beside a tile; load them per tile
        out = _rank(cfg, cs, n_consts, n_alu, vthreads, residual, thread_counts, consts_per_tile=True)
    if not out:
        raise NoTilingError(f"conv2d {cs}: no tiling fits the scratchpads of {cfg.name} (even one row, one block)")
    out.sort(key=lambda ck: ck[0])
    return out


def _rank(cfg: HwConfig, cs: "ConvShape", n_consts: int, n_alu: int, vthreads: int | None, residual: bool,
          thread_counts: tuple[int, ...], consts_per_tile: bool) -> list[tuple[float, ConvKnobs]]:
    out = []
    vts = (vthreads,) if vthreads is not None else tuple(thread_counts)
    for v in vts:
        for axis in (("oc", "h") if v > 1 else ("oc",)):
            for oc_t in _divisor_like(cs.ocb):
                for ic_t in _divisor_like(cs.icb):
                    for h_t in range(1, cs.oh + 1):
                        k = ConvKnobs(oc_t, h_t, ic_t, v, axis)
                        if v > 1 and axis == "oc" and ceil_div(cs.ocb, oc_t) < v:
                            continue
                        if v > 1 and axis == "h" and ceil_div(cs.oh, h_t) < v:
                            continue
                        if not fits(cfg, cs, k, n_consts, residual, consts_per_tile):
                            continue
                        # the residual's identity GEMM costs about one more ALU-like pass
                        out.append((estimate_conv(cfg, cs, k, n_alu + (1 if residual else 0)), k))
    return out


def choose_conv_knobs(cfg: HwConfig, cs: "ConvShape", n_consts: int = 0, n_alu: int = 3,
                      vthreads: int | None = None, residual: bool = False) -> ConvKnobs:
    """The feasible knobs with the lowest estimate (``vthreads`` pins the thread count; ``residual``: a fused
    residual Add's operand tile is reserved too)."""
    return rank_conv_knobs(cfg, cs, n_consts, n_alu, vthreads, residual)[0][1]


def _divisor_like(n: int) -> list[int]:
    """Candidate tile sizes: divisors of n (ragged tiles are legal but rarely better)."""
    return [d for d in range(1, n + 1) if n % d == 0]
