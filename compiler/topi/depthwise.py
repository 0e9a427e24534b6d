"""Depthwise conv2d on the ``dwmac`` tensor intrinsic (``acc[b, c] += inp[b, c] * wgt[c]``, ``isa.intrinsics``).

Layouts: data ``(nb, cb, h, w, B, BI)`` as for conv2d (one inp row = one pixel's channel block);
weights ``(cb, BO, BI)``: one WGT row per channel block holding its ``kh * kw`` taps as vectors
(row ``t`` = tap ``ky * kw + kx``, one weight per channel; rows past the taps are zero), so a
3x3 layer of ``C`` channels takes ``C / BO`` WGT rows instead of the block-diagonal GEMM's
``9 * C / BO``, and the micro-op's wgt index (vectors) is ``row * BO + tap``. When the taps do not
fit one row (``kh * kw > BO``, e.g. 3x3 on tiny) each kernel row gets its own WGT row:
``(cb, kh, BO, BI)``, index ``(cb * kh + ky) * BO + kx``. Each output pixel
vector is ``kh * kw`` DWMAC micro-ops, at BLOCK_OUT MACs per cycle (the intrinsic's peak).

Schedule: output tiles of ``cb_tile`` channel blocks x ``h_tile`` rows x full width; the tile's input
rows (with the halo and padding) and its weight rows are loaded per tile, the DWMAC reduction over
the kernel window runs as the instruction's loops, the requant epilogue as ALU, one store per tile;
two virtual threads overlap one tile's loads and stores with the other's compute.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import te
from jit_runtime.host_ops.requant import Requant
from compiler.schedule import Schedule, create_schedule
from compiler.topi.conv2d import split_vthreads
from compiler.topi.pad import OutputPlane, pad_spatial
from compiler.topi.requant import Epilogue, requant_stages
from isa.config import HwConfig
from isa.intrinsics import intrinsics


@dataclass(frozen=True)
class DwShape(OutputPlane):
    """Packed depthwise geometry: ``cb`` channel blocks, spatial sizes, kernel, stride, padding."""

    nb: int
    cb: int
    h: int
    w: int
    kh: int
    kw: int
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    pad_value: int = 0

    def macs(self, cfg: HwConfig) -> int:
        """Multiply-accumulates (each DWMAC micro-op does ``batch * block_out``)."""
        return self.nb * self.cb * self.oh * self.ow * self.kh * self.kw * cfg.batch * cfg.block_out

    def rows_per_block(self, cfg: HwConfig) -> int:
        """WGT rows per channel block: 1 when the ``kh * kw`` taps fit one row, else one per kernel row."""
        return 1 if taps_packed(cfg, self.kh, self.kw) else self.kh


def taps_packed(cfg: HwConfig, kh: int, kw: int) -> bool:
    """Whether all ``kh * kw`` taps of a channel block share one WGT row (else one row per kernel row)."""
    return kh * kw <= cfg.block_out


def dwmac_supported(cfg: HwConfig, kh: int, kw: int) -> bool:
    """Whether a ``kh x kw`` depthwise conv runs on DWMAC on ``cfg`` (declared there; a kernel row fits a WGT row)."""
    return "dwmac" in intrinsics(cfg) and kw <= cfg.block_out


def pack_dw_weight(cfg: HwConfig, w: np.ndarray) -> np.ndarray:
    """Packed depthwise weights ``(C//BO, 1, KH, KW, BO, BI)`` (input column 0 used, as conv2d packs them) as
    DWMAC rows: ``(C//BO, BO, BI)`` with ``out[cb, ky*KW + kx, c] = w[cb, 0, ky, kx, c, 0]`` when the taps fit
    one row, else ``(C//BO, KH, BO, BI)`` with ``out[cb, ky, kx, c]``; unused vectors are zero."""
    cbn, _, kh, kw, bo, bi = w.shape
    taps = np.ascontiguousarray(w[:, 0, :, :, :, 0])  # (cb, kh, kw, c)
    if taps_packed(cfg, kh, kw):
        out = np.zeros((cbn, cfg.block_out, bi), dtype=w.dtype)
        out[:, :kh * kw, :bo] = taps.reshape(cbn, kh * kw, bo)
    else:
        out = np.zeros((cbn, kh, cfg.block_out, bi), dtype=w.dtype)
        out[:, :, :kw, :bo] = taps
    return out


@dataclass(frozen=True)
class DwKnobs:
    """Output tile: ``cb_tile`` channel blocks x ``h_tile`` rows x full width; ``vthreads`` virtual threads over
    the row tiles (``vthread_axis="h"``) or the channel tiles (``"cb"``)."""

    cb_tile: int
    h_tile: int
    vthreads: int = 2
    vthread_axis: str = "h"


def dw_footprint(cfg: HwConfig, ds: DwShape, k: DwKnobs, n_consts: int,
                 consts_per_tile: bool = False) -> dict[str, int]:
    """Scratchpad elements of the schedule with knobs ``k``: the per-channel constants of the whole layer are
    reserved, or with ``consts_per_tile`` (where :func:`const_per_tile`) only each thread's channel tile."""
    rows = (k.h_tile - 1) * ds.stride[0] + ds.kh
    cols = (ds.ow - 1) * ds.stride[1] + ds.kw
    v = k.vthreads
    wrows = v * k.cb_tile * ds.rows_per_block(cfg)
    blocks = v * k.cb_tile if consts_per_tile and const_per_tile(ds, k) else ds.cb
    return {"inp": v * k.cb_tile * rows * cols, "acc": v * k.cb_tile * k.h_tile * ds.ow + n_consts * blocks,
            "wgt": wrows + n_consts * blocks, "vectors": wrows * cfg.block_out}


def _candidates(cfg: HwConfig, ds: DwShape, n_consts: int) -> list[DwKnobs]:
    """Feasible knobs (see :func:`_fitting`); where the whole layer's constants leave no room beside a tile
    (small scratchpads), knobs that load them per channel tile."""
    return _fitting(cfg, ds, n_consts, False) or _fitting(cfg, ds, n_consts, True)


def _fitting(cfg: HwConfig, ds: DwShape, n_consts: int, consts_per_tile: bool) -> list[DwKnobs]:
    """Per thread count and axis, every row tile that divides the output rows (and the largest that fits), each
    with the largest channel tile that fits and the largest one dividing the channel blocks."""
    out = []
    vec_cap = 1 << cfg.uop_wgt_bits
    for v, axis in ((1, "h"), (2, "h"), (2, "cb")):
        def ok(cbt: int, ht: int) -> bool:
            if v > 1 and axis == "h" and -(-ds.oh // ht) < 2 or v > 1 and axis == "cb" and -(-ds.cb // cbt) < 2:
                return False
            f = dw_footprint(cfg, ds, DwKnobs(cbt, ht, v, axis), n_consts, consts_per_tile)
            return (f["inp"] <= cfg.inp_depth and f["acc"] <= cfg.acc_depth and f["wgt"] <= cfg.wgt_depth
                    and f["vectors"] <= vec_cap)
        heights = [h for h in range(1, ds.oh + 1) if ok(1, h)]
        if not heights:
            continue
        for ht in sorted({h for h in heights if ds.oh % h == 0} | {max(heights)}):
            fit = [c for c in range(1, ds.cb + 1) if ok(c, ht)]
            if fit:
                divs = [c for c in fit if ds.cb % c == 0]
                # every dividing channel tile: small tiles shorten the unhidden first load and last
                # compute + store, large ones cut per-instruction latency; the estimate weighs them
                for cbt in sorted({max(fit)} | set(divs)):
                    out.append(DwKnobs(cbt, ht, v, axis))
    return out


def estimate_dw(cfg: HwConfig, ops: list, knobs: DwKnobs, ds: DwShape) -> float:
    """Cycles of a generated depthwise program by the timing contract from each unit's busy time (DMA latency +
    beats + pad elements; micro-op iterations x ii + pipeline per instruction): with one thread the units take
    turns (their sum); with virtual threads the busiest unit bounds it, plus one tile's worth of the others
    (the first load and the last store are not hidden)."""
    from isa.intrinsics import ALU_TIMING, declaration
    from isa.timing import ceil_div

    busy = {"load": 0, "compute": 0, "store": 0}
    for op in ops:
        a = op.args
        if op.kind in ("load", "store"):
            d = a["desc"]
            eb = cfg.elem_bytes(a.get("mem", "out"))
            rows, cols = d.y_pad0 + d.y + d.y_pad1, d.x_pad0 + d.x + d.x_pad1
            busy[op.unit] += cfg.dram_latency + d.y * ceil_div(d.x * eb, cfg.bus_bytes) + rows * cols - d.y * d.x
        else:
            n = int(np.prod([e for e, _ in a["loops"]], dtype=np.int64)) * a["uops"].shape[0]
            t = ALU_TIMING if op.kind == "alu" else declaration(a.get("intrinsic", "gemm")).timing
            busy["compute"] += n * t.ii + t.depth(cfg) + 1
    total, top = sum(busy.values()), max(busy.values())
    if knobs.vthreads == 1:
        return float(total)
    tiles = -(-ds.cb // knobs.cb_tile) * -(-ds.oh // knobs.h_tile)
    return float(top + (total - top) / tiles)


def const_per_tile(ds: DwShape, knobs: DwKnobs) -> bool:
    """Whether the per-channel constants load with each channel tile (their per-thread copies fit the reservation
    for the whole layer) rather than all at the start."""
    return knobs.vthreads * knobs.cb_tile <= ds.cb


def sketch_dw(cfg: HwConfig, ds: DwShape, knobs: DwKnobs, n_alu: int = 1, n_consts: int = 0) -> float:
    """Cycles of the depthwise schedule with ``knobs`` by the timing contract, from the tile geometry alone (no
    lowering): per tile one LOAD.INP per channel block (latency + beats of its real pixels + pad elements), one
    LOAD.WGT of its vector rows, the DWMAC and ``n_alu`` ALU passes (micro-op iterations + pipeline; the reduction
    runs as about ``kh`` instructions) and one 2-D STORE; a channel tile's vectors stay resident over its row
    tiles; ``n_consts`` per-channel constant rows load with them (:func:`const_per_tile`) or once. Combined like
    :func:`estimate_dw` (which reads the generated program instead); ranks the candidates without lowering any."""
    from isa.intrinsics import ALU_TIMING, declaration
    from isa.timing import ceil_div

    L = cfg.dram_latency
    beats = {m: ceil_div(cfg.elem_bytes(m), cfg.bus_bytes) for m in ("inp", "wgt", "out")}
    sy, sx = ds.stride
    top_pad = ds.padding[0]
    cols = (ds.ow - 1) * sx + ds.kw
    real_cols = max(0, min(cols - ds.padding[1], ds.w))  # input columns [-left, cols - left) inside the plane
    gemm_t, alu_t = declaration("dwmac").timing, ALU_TIMING
    inp = comp = store = wgt = 0.0
    tiles = 0
    n_ht = ceil_div(ds.oh, knobs.h_tile)
    reload_rows = knobs.h_tile * (min(knobs.vthreads, n_ht) if knobs.vthread_axis == "h" else 1)
    per_tile_consts = const_per_tile(ds, knobs)
    for y0 in range(0, ds.oh, knobs.h_tile):
        ht = min(knobs.h_tile, ds.oh - y0)
        rows = (ht - 1) * sy + ds.kh
        r0 = y0 * sy - top_pad
        real_rows = max(0, min(r0 + rows, ds.h) - max(r0, 0))
        per_block = L + real_rows * real_cols * beats["inp"] + rows * cols - real_rows * real_cols
        inp += ds.nb * ds.cb * per_block
        for c0 in range(0, ds.cb, knobs.cb_tile):
            cbt = min(knobs.cb_tile, ds.cb - c0)
            tiles += ds.nb
            px = cbt * ht * ds.ow
            if y0 < reload_rows:  # a channel tile's vectors (and constants) stay resident over its row tiles
                wgt += ds.nb * (L + cbt * ds.rows_per_block(cfg) * beats["wgt"])
                if per_tile_consts:
                    wgt += ds.nb * n_consts * (L + cbt * beats["wgt"])
            comp += ds.nb * (px * ds.kh * ds.kw * gemm_t.ii + ds.kh * (gemm_t.depth(cfg) + 1)
                             + n_alu * (px * alu_t.ii + alu_t.depth(cfg) + 1))
            store += ds.nb * (L + px * beats["out"])  # full-width rows: one 2-D store per tile
    consts = 0 if per_tile_consts else n_consts * (L + ds.cb * beats["wgt"])  # per-channel records, once
    busy = {"load": inp + wgt + consts, "compute": comp, "store": store}
    total, top = sum(busy.values()), max(busy.values())
    if knobs.vthreads == 1:
        return float(total)
    return float(top + (total - top) / tiles)


def dw_insns(ds: DwShape, knobs: DwKnobs, n_alu: int = 1) -> int:
    """About how many instructions the depthwise program with ``knobs`` has (per tile: a LOAD.INP per channel
    block, a LOAD.WGT, ``kh`` DWMACs, ``n_alu`` ALU passes, a STORE and two synchronizing ones): what lowering and
    encoding cost grows with, a fixed count per batch block."""
    tiles = ds.nb * -(-ds.cb // knobs.cb_tile) * -(-ds.oh // knobs.h_tile)
    return tiles * (knobs.cb_tile + 1 + ds.kh + n_alu + 3)


def _uneven(ds: DwShape, k: DwKnobs) -> bool:
    """A partial last tile, or virtual threads with unequal tile counts: the estimates miss the stalls they cause."""
    n_ht, n_ct = -(-ds.oh // k.h_tile), -(-ds.cb // k.cb_tile)
    split = n_ht if k.vthread_axis == "h" else n_ct
    return ds.oh % k.h_tile != 0 or ds.cb % k.cb_tile != 0 or (k.vthreads > 1 and split % k.vthreads != 0)


def rank_dw_knobs(cfg: HwConfig, ds: DwShape, n_consts: int = 0, n_alu: int = 0, measure: int | None = None
                  ) -> list[DwKnobs]:
    """The feasible knobs ranked by :func:`sketch_dw` (even tilings first: see :func:`_uneven`), the best ``measure``
    of them (default: 4 for layers estimated under 150k cycles, else 2, where the tiles matter less next to the
    layer's floor), for the measured choice (:func:`compiler.backend.accel.measure.choose_dw_knobs`)."""
    ranked = [(_uneven(ds, k), sketch_dw(cfg, ds, k, n_alu, n_consts), n, k)
              for n, k in enumerate(_candidates(cfg, ds, n_consts))]
    if not ranked:
        raise ValueError(f"depthwise: no tile of {ds} fits the scratchpads of {cfg.name}")
    ranked.sort(key=lambda t: t[:3])
    if measure is None:
        measure = 4 if ranked[0][1] < 150_000 else 2
    return [k for *_, k in ranked[:max(1, measure)]]


def dw_consts(cfg: HwConfig, ds: DwShape, bias, requant: Requant | None) -> int:
    """How many per-channel constant tensors the epilogue loads (bias, requant parameters)."""
    return len(dw_epilogue(cfg, ds, dw_compute(cfg, ds)[3], bias, requant).consts)


@dataclass
class DwKernel:
    """Everything needed to build and run one depthwise conv2d (the attribute names :class:`Replay` reads)."""

    shape: DwShape
    data: te.Tensor
    weight: te.Tensor
    conv: te.Tensor
    epilogue: Epilogue
    out: te.Tensor
    schedule: Schedule
    knobs: DwKnobs
    residual: None = None


def dw_compute(cfg: HwConfig, ds: DwShape) -> tuple[te.Tensor, te.Tensor, te.Tensor, te.Tensor]:
    """``(data, weight, padded, conv)``: ``conv[n, cb, y, x, b, c] = sum_{ky, kx} pad[.., y*sy+ky, x*sx+kx, b, c]
    * weight[cb, ky*kw+kx, c]``."""
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    if not dwmac_supported(cfg, ds.kh, ds.kw):
        raise ValueError(f"depthwise: a {ds.kh}x{ds.kw} kernel does not run on dwmac on {cfg.name} (needs the "
                         f"intrinsic and kw <= {BO} taps per WGT row)")
    if ds.oh < 1 or ds.ow < 1:
        raise ValueError(f"depthwise: kernel {ds.kh}x{ds.kw} does not fit the padded {ds.h}x{ds.w} input")
    data = te.placeholder((ds.nb, ds.cb, ds.h, ds.w, B, BI), "int8", "data")
    packed = ds.rows_per_block(cfg) == 1
    weight = te.placeholder((ds.cb, BO, BI) if packed else (ds.cb, ds.kh, BO, BI), "int8", "weight")
    padded = pad_spatial(data, 2, ds.padding, name="data_pad", value=ds.pad_value)
    sy, sx = ds.stride
    ky = te.reduce_axis(ds.kh, "ky")
    kx = te.reduce_axis(ds.kw, "kx")
    conv = te.compute(
        (ds.nb, ds.cb, ds.oh, ds.ow, B, BO),
        lambda n, c, y, x, b, o: te.sum(
            padded[n, c, y * sy + ky, x * sx + kx, b, o].astype("int32")
            * (weight[c, ky * ds.kw + kx, o] if packed else weight[c, ky, kx, o]).astype("int32"), [ky, kx]),
        name="dwconv", dtype="int32")
    return data, weight, padded, conv


def dw_epilogue(cfg: HwConfig, ds: DwShape, conv: te.Tensor, bias, requant: Requant | None) -> Epilogue:
    if requant is None:
        return Epilogue(out=conv)
    return requant_stages(conv, bias, requant, ds.cb * cfg.block_out, lambda n, c, y, x, b, o: (c, b, o),
                          (ds.cb,), cfg.block_out, cfg.batch, cfg=cfg)


def depthwise_kernel(cfg: HwConfig, ds: DwShape, bias, requant: Requant | None, knobs: DwKnobs) -> DwKernel:
    """Build the depthwise conv (+ requant epilogue, cast to int8) and schedule it on dwmac with ``knobs``
    (the measured choice: :func:`compiler.backend.accel.measure.choose_dw_knobs`)."""
    data, weight, padded, conv = dw_compute(cfg, ds)
    ep = dw_epilogue(cfg, ds, conv, bias, requant)
    out = te.compute(conv.shape, lambda *i: ep.out[i].astype("int8"), name="out", dtype="int8")
    s = create_schedule(out)
    s[padded].compute_inline()
    inp = s.cache_read(padded, "inp", [conv])
    wgt = s.cache_read(weight, "wgt", [conv])
    s[conv].set_scope("acc")
    for t in ep.stages:
        s[t].set_scope("acc")
    const_caches = [s.cache_read(t, "acc" if t.dtype == "int32" else "wgt",
                                 s.readers(t) and [r.tensor for r in s.readers(t)]) for t, _ in ep.consts]
    so = s[out]
    n, c, y, x, b, o = so.leaf_iter_vars
    c_o, c_i = so.split(c, knobs.cb_tile)
    y_o, y_i = so.split(y, knobs.h_tile)
    so.reorder(n, c_o, y_o, c_i, y_i, x, b, o)
    attach = y_o
    if knobs.vthreads > 1:
        attach = split_vthreads(so, y_o if knobs.vthread_axis == "h" else c_o, attach, knobs.vthreads)
    so.pragma(c_i, "dma_copy")
    if const_per_tile(ds, knobs):  # constants per channel tile (see conv2d's schedule): loaded once per thread and
        for cc in const_caches:     # channel tile, so the first DWMAC does not wait for the whole layer's
            s[cc].compute_at(so, attach)
    sc = s[conv]
    sc.compute_at(so, attach)
    s[inp].compute_at(so, attach)
    s[wgt].compute_at(so, attach)
    for t in ep.stages:
        s[t].compute_at(so, attach)
        s[t].pragma(s[t].leaf_iter_vars[0], "alu")
    n_, c_, y_, x_, b_, o_, ky, kx = sc.leaf_iter_vars
    sc.reorder(n_, c_, y_, x_, ky, kx, b_, o_)
    sc.tensorize(b_, intrinsics(cfg)["dwmac"])
    return DwKernel(ds, data, weight, conv, ep, out, s, knobs)
