"""Packed (grouped) conv2d: the tensor expression, its requant epilogue and the default schedule.

Layouts carry an explicit group axis so grouped convolutions stay affine:
activation ``(N/B, G, Cg/BI, H, W, B, BI)``, weight ``(G, Og/BO, Cg/BI, KH, KW, BO, BI)``,
output ``(N/B, G, Og/BO, OH, OW, B, BO)``. ``G = 1`` is the ordinary conv; a plain packed
NCHWnc array is the same memory viewed with ``G = 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from compiler import te
from jit_runtime.host_ops.requant import Requant
from compiler.schedule import Schedule, create_schedule
from compiler.topi.knobs import ConvKnobs, choose_conv_knobs, strided_view
from compiler.topi.pad import OutputPlane, pad_spatial
from compiler.topi.requant import Epilogue, requant_stages

if TYPE_CHECKING:
    from compiler.topi.residual import Residual
from isa import HwConfig
from isa.intrinsics import gemm_intrinsic


@dataclass(frozen=True)
class ConvShape(OutputPlane):
    """Packed conv2d geometry (block counts, spatial sizes, stride, padding, groups)."""

    nb: int
    groups: int
    icb: int   # input channel blocks per group
    ocb: int   # output channel blocks per group
    h: int
    w: int
    kh: int
    kw: int
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    pad_value: int = 0  # what the padding holds (the activation zero point: padding is real zero)

    def macs(self, cfg: HwConfig) -> int:
        return (self.nb * self.groups * self.ocb * self.oh * self.ow * self.icb * self.kh * self.kw
                * cfg.macs_per_cycle)

    def check(self) -> None:
        if min(self.stride) < 1:
            raise ValueError(f"conv2d: stride {self.stride} must be >= 1")
        if min(self.padding) < 0:
            raise ValueError(f"conv2d: padding {self.padding} must be >= 0")
        if not -128 <= self.pad_value <= 127:
            raise ValueError(f"conv2d: pad_value {self.pad_value} must be an int8 (-128..127)")
        if self.oh < 1 or self.ow < 1:
            raise ValueError(f"conv2d: kernel {self.kh}x{self.kw} does not fit the padded {self.h}x{self.w} input")


@dataclass
class ConvKernel:
    """Everything needed to build and run one conv2d: tensors, epilogue constants, schedule."""

    shape: ConvShape
    data: te.Tensor
    weight: te.Tensor
    conv: te.Tensor
    epilogue: Epilogue
    out: te.Tensor
    schedule: Schedule
    knobs: ConvKnobs
    residual: te.Tensor | None = None  # the fused residual Add's other operand (packed like ``out``)


def conv2d_compute(cfg: HwConfig, cs: ConvShape) -> tuple[te.Tensor, te.Tensor, te.Tensor, te.Tensor]:
    """``(data, weight, padded, conv)``: int32 ``conv = sum(pad * weight)`` over ic, kh, kw, i."""
    cs.check()
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    data = te.placeholder((cs.nb, cs.groups, cs.icb, cs.h, cs.w, B, BI), "int8", "data")
    weight = te.placeholder((cs.groups, cs.ocb, cs.icb, cs.kh, cs.kw, BO, BI), "int8", "weight")
    sy, sx = cs.stride
    if strided_view(cs):
        # a strided 1x1 conv reads every sy-th row and sx-th pixel: subsample in the DMA, then stride 1
        padded = te.compute((cs.nb, cs.groups, cs.icb, cs.oh, cs.ow, B, BI),
                            lambda n, g, c, y, x, b, i: data[n, g, c, y * sy, x * sx, b, i],
                            name="data_sub", dtype="int8")
        sy = sx = 1
    else:
        padded = pad_spatial(data, 3, cs.padding, name="data_pad", value=cs.pad_value)
    ic = te.reduce_axis(cs.icb, "ic")
    ky = te.reduce_axis(cs.kh, "ky")
    kx = te.reduce_axis(cs.kw, "kx")
    ii = te.reduce_axis(BI, "ii")
    conv = te.compute(
        (cs.nb, cs.groups, cs.ocb, cs.oh, cs.ow, B, BO),
        lambda n, g, oc, y, x, b, o: te.sum(
            padded[n, g, ic, y * sy + ky, x * sx + kx, b, ii].astype("int32")
            * weight[g, oc, ic, ky, kx, o, ii].astype("int32"), [ic, ky, kx, ii]),
        name="conv", dtype="int32")
    return data, weight, padded, conv


def conv2d_epilogue(cfg: HwConfig, cs: ConvShape, conv: te.Tensor, bias: np.ndarray | None,
                    requant: Requant | None) -> Epilogue:
    """The requant epilogue stages (and their per-channel constants) on the packed ``conv`` accumulator."""
    if requant is None:
        return Epilogue(out=conv)
    return requant_stages(conv, bias, requant, cs.groups * cs.ocb * cfg.block_out,
                          lambda n, g, oc, y, x, b, o: (g, oc, b, o), (cs.groups, cs.ocb), cfg.block_out, cfg.batch,
                          cfg=cfg)


def add_residual(cfg: HwConfig, cs: ConvShape, ep: Epilogue, residual: "Residual") -> tuple[te.Tensor, te.Tensor]:
    """Append the fused residual Add's stages to ``ep`` (see :mod:`compiler.topi.residual`); returns the
    residual operand placeholder and its identity-GEMM stage."""
    from compiler.topi.residual import residual_stages

    other, _eye, other_acc, stages, consts, out = residual_stages(
        cfg, ep.out, residual, cs.groups * cs.ocb * cfg.block_out,
        lambda n, g, oc, y, x, b, o: (g, oc, b, o), (cs.groups, cs.ocb))
    ep.stages += stages
    ep.consts += consts
    ep.out = out
    return other, other_acc


def conv2d_kernel(cfg: HwConfig, cs: ConvShape, bias: np.ndarray | None, requant: Requant | None,
                  knobs: ConvKnobs | None = None, residual: "Residual | None" = None) -> ConvKernel:
    """Build the conv2d (+ requant epilogue, + fused residual Add, cast to int8) and schedule it with ``knobs``
    (default: chosen)."""
    data, weight, padded, conv = conv2d_compute(cfg, cs)
    ep = conv2d_epilogue(cfg, cs, conv, bias, requant)
    other = other_acc = None
    if residual is not None:
        if requant is None:
            raise ValueError("conv2d: a fused residual Add needs the conv's requant (its int8 result is an operand)")
        other, other_acc = add_residual(cfg, cs, ep, residual)
    out = te.compute(conv.shape, lambda *i: ep.out[i].astype("int8"), name="out", dtype="int8")
    knobs = knobs or choose_conv_knobs(cfg, cs, len(ep.consts), residual=residual is not None)
    s = schedule_conv2d(cfg, cs, data, weight, padded, conv, ep, out, knobs, other, other_acc)
    return ConvKernel(cs, data, weight, conv, ep, out, s, knobs, other)


def split_vthreads(so, target, attach, vthreads: int):
    """Split loop ``target`` of output stage ``so`` into ``vthreads`` virtual threads; returns the loop the
    tile's stages attach at (the remainder of ``target`` when ``target`` was ``attach``)."""
    vt, rest = so.split(target, nparts=vthreads)
    so.bind_vthread(vt)
    return rest if target is attach else attach


def schedule_conv2d(cfg: HwConfig, cs: ConvShape, data, weight, padded, conv, ep: Epilogue, out,
                    knobs: ConvKnobs, other=None, other_acc=None) -> Schedule:
    """The default packed conv2d schedule: output tiles (oc x rows x full width), input-channel
    chunks loaded per tile, a GEMM per chunk, ALU epilogue, one store per tile; optional virtual threads."""
    knobs.check(cs)
    s = create_schedule(out)
    s[padded].compute_inline()
    inp = s.cache_read(padded, "inp", [conv])
    wgt = s.cache_read(weight, "wgt", [conv])
    s[conv].set_scope("acc")
    other_inp = None
    if other_acc is not None:  # the fused residual: its operand is loaded into inp and GEMMed (identity) into acc
        other_inp = s.cache_read(other, "inp", [other_acc])
        s[other_acc].set_scope("acc")
    for t in ep.stages:
        s[t].set_scope("acc")
    const_caches = []
    for t, _ in ep.consts:  # int32 per-channel constants in acc; REQUANT records (int8 elements) in wgt
        scope = "acc" if t.dtype == "int32" else "wgt"
        const_caches.append(s.cache_read(t, scope, s.readers(t) and [r.tensor for r in s.readers(t)]))
    so = s[out]
    n, g, oc, y, x, b, o = so.leaf_iter_vars
    oc_o, oc_i = so.split(oc, knobs.oc_tile)
    y_o, y_i = so.split(y, knobs.h_tile)
    outer, inner = (oc_o, y_o) if knobs.order == "oc" else (y_o, oc_o)
    so.reorder(n, g, outer, inner, oc_i, y_i, x, b, o)
    attach = inner  # the epilogue and the conv compute one output tile per iteration of the inner tile loop
    if knobs.vthreads > 1:
        attach = split_vthreads(so, oc_o if knobs.vthread_axis == "oc" else y_o, attach, knobs.vthreads)
    if knobs.order == "oc" and knobs.vthreads * knobs.oc_tile <= cs.groups * cs.ocb:
        # per-channel constants loaded with each output tile; a load is skipped while its region is unchanged, so
        # with channel tiles outermost each thread loads a channel tile's constants once: the first GEMM waits for
        # its own channels' constants only, not the whole layer's (a WGT row per block for the REQUANT records)
        for c in const_caches:
            s[c].compute_at(so, attach)
    so.pragma(oc_i, "dma_copy")
    sc = s[conv]
    sc.compute_at(so, attach)
    for t in ep.stages:
        s[t].compute_at(so, attach)
        s[t].pragma(s[t].leaf_iter_vars[0], "alu_deferred" if knobs.epilogue == "deferred" else "alu")
    n_, g_, oc_, y_, x_, b_, o_, ic, ky, kx, ii = sc.leaf_iter_vars
    ic_o, ic_i = sc.split(ic, knobs.ic_tile)
    sc.reorder(ic_o, n_, g_, oc_, y_, x_, ic_i, ky, kx, b_, o_, ii)
    s[inp].compute_at(sc, ic_o)
    s[wgt].compute_at(sc, ic_o)
    sc.tensorize(b_, gemm_intrinsic(cfg))
    if other_acc is not None:
        sr = s[other_acc]
        sr.compute_at(so, attach)
        s[other_inp].compute_at(so, attach)
        sr.tensorize(sr.leaf_iter_vars[5], gemm_intrinsic(cfg))
    return s
