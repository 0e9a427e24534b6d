"""The requantization epilogue as elementwise TE stages on the accumulator.

Reproduces :func:`jit_runtime.host_ops.requant.apply_requant` bit for bit. Where the config has the fused
``REQUANT`` ALU op (:mod:`isa.requant`) and the Requant has no pre-shift and int16 bounds, the
whole epilogue is ONE stage (one ALU pass) reading a per-channel parameter record from a WGT
tensor. Otherwise it is one stage per ALU op: bias ADD, rounding shifts as ADD 2^(s-1) then SHR
s, MUL by the multiplier, ADD zero point, MAX for relu, MIN/MAX clip; per-channel values and
constants that do not fit the 16-bit immediate are read from acc tensors. ``Epilogue.consts``
lists the constant tensors with their values, indexed per output channel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from compiler import te
from jit_runtime.host_ops.requant import Requant
from isa.alu import alu_op, op_supported
from isa.requant import pack_records

if TYPE_CHECKING:
    from isa.config import HwConfig

IMM_MIN, IMM_MAX = -(1 << 15), (1 << 15) - 1


@dataclass
class Epilogue:
    """The epilogue stages (in order) and the per-channel constant tensors they read."""

    stages: list[te.Tensor] = field(default_factory=list)
    consts: list[tuple[te.Tensor, np.ndarray]] = field(default_factory=list)
    out: te.Tensor | None = None


def _fits(v) -> bool:
    v = np.asarray(v)
    return bool(np.all(v >= IMM_MIN) and np.all(v <= IMM_MAX))


I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


def fused_ok(cfg: "HwConfig | None", rq: Requant) -> bool:
    """Whether ``rq`` runs as the one-pass REQUANT op on ``cfg`` (no pre-shift, int16 zero point and bounds)."""
    return (cfg is not None and op_supported(alu_op("REQUANT"), cfg) and int(np.max(rq.pre_shift)) == 0
            and all(I16_MIN <= v <= I16_MAX for v in (int(rq.zero_point), rq.clip_low, int(rq.out_max))))


def requant_stages(acc: te.Tensor, bias: np.ndarray | None, rq: Requant, n_channels: int,
                   chan_index: Callable[..., tuple], chan_shape: tuple[int, ...], block: int,
                   batch: int, prefix: str = "rq", cfg: "HwConfig | None" = None) -> Epilogue:
    """Stages computing ``apply_requant(acc + bias)``; ``chan_index(*axes)`` indexes a (chan_shape, batch, block) tensor.

    ``n_channels`` = padded channel count = prod(chan_shape) * block. With ``cfg`` (and :func:`fused_ok`) the
    epilogue is one REQUANT stage whose records live in a (chan_shape, block_out, block_in) WGT tensor.
    """
    if fused_ok(cfg, rq):
        return _fused(acc, bias, rq, n_channels, chan_index, chan_shape, cfg, prefix)
    return _multi_pass(acc, bias, rq, n_channels, chan_index, chan_shape, block, batch, prefix)


def _fused(acc: te.Tensor, bias, rq: Requant, n_channels: int, chan_index, chan_shape, cfg: "HwConfig",
           prefix: str) -> Epilogue:
    ep = Epilogue()
    recs = pack_records(cfg, bias=0 if bias is None else bias, mult=rq.multiplier, shift=rq.shift,
                        zp=int(rq.zero_point), lo=rq.clip_low, hi=int(rq.out_max), n_channels=n_channels)
    recs = recs.reshape(chan_shape + (cfg.block_out, cfg.block_in))
    rec = te.placeholder(recs.shape, f"int{cfg.wgt_width}", f"{prefix}_rec")
    ep.consts.append((rec, recs))
    nc = len(chan_shape)

    def body(*i):
        ci = chan_index(*i)  # (chan..., b, o): the record of lane o is row o of the channel block's element
        return te.alu("REQUANT", acc[i], rec[tuple(ci[:nc]) + (ci[-1], 0)])

    ep.out = te.compute(acc.shape, body, name=f"{prefix}_requant", dtype="int32",
                        axis_names=tuple(f"requant{k}" for k in range(acc.ndim)))
    ep.stages.append(ep.out)
    return ep


def _multi_pass(acc: te.Tensor, bias, rq: Requant, n_channels: int, chan_index, chan_shape, block: int, batch: int,
                prefix: str) -> Epilogue:
    ep = Epilogue()
    cur = acc

    def per_channel(values, name: str) -> te.Tensor:
        v = np.broadcast_to(np.asarray(values, dtype=np.int64), (n_channels,)).astype(np.int32)
        arr = np.broadcast_to(v.reshape(chan_shape + (1, block)), chan_shape + (batch, block)).copy()
        t = te.placeholder(arr.shape, "int32", f"{prefix}_{name}")
        ep.consts.append((t, arr))
        return t

    def stage(name: str, fn) -> None:
        nonlocal cur
        src = cur
        cur = te.compute(src.shape, lambda *i: fn(src[i], i), name=f"{prefix}_{name}", dtype="int32",
                         axis_names=tuple(f"{name}{k}" for k in range(src.ndim)))
        ep.stages.append(cur)

    def tensor_op(name: str, op: str, values) -> None:
        t = per_channel(values, name)
        stage(name, lambda x, i: _apply(op, x, t[chan_index(*i)]))

    def imm_op(name: str, op: str, value: int) -> None:
        stage(name, lambda x, i: _apply(op, x, te.const(int(value))))

    def op_any(name: str, op: str, values) -> None:
        v = np.asarray(values)
        if v.ndim == 0 and _fits(v):
            imm_op(name, op, int(v))
        else:
            tensor_op(name, op, values)

    def round_shift(name: str, s) -> None:
        s = np.asarray(s, dtype=np.int64)
        if s.ndim == 0:
            if int(s) == 0:
                return
            op_any(f"{name}_round", "add", np.int64(1) << (int(s) - 1))
            imm_op(f"{name}_shr", "shr", int(s))
        else:
            rnd = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
            tensor_op(f"{name}_round", "add", rnd)
            tensor_op(f"{name}_shr", "shr", s)

    if np.any(np.asarray(rq.shift) > 31):
        raise ValueError(f"requant shift {int(np.max(rq.shift))} > 31 needs the fused REQUANT op (a config with "
                         f"block_in * wgt_width >= 128, pre_shift 0, int16 bounds); for the multi-pass ALU epilogue "
                         f"choose parameters with choose_requant(..., mult_bits=15)")
    if bias is not None:
        tensor_op("bias", "add", bias)
    round_shift("pre", rq.pre_shift)
    m = np.asarray(rq.multiplier)
    if not (m.ndim == 0 and int(m) == 1):
        op_any("mul", "mul", m)
    round_shift("post", rq.shift)
    zp = int(rq.zero_point)
    if zp:
        imm_op("zp", "add", zp)
    lo = rq.out_min
    if rq.relu:
        imm_op("relu", "max", zp)
    if not (rq.relu and lo <= zp):
        op_any("clip_lo", "max", lo)
    op_any("clip_hi", "min", rq.out_max)
    ep.out = cur
    return ep


def _apply(op: str, x, y):
    if op == "add":
        return x + y
    if op == "mul":
        return x * y
    if op == "shr":
        return x >> y
    if op == "max":
        return te.max_(x, y)
    if op == "min":
        return te.min_(x, y)
    raise ValueError(op)
