"""Tensor intrinsics: the computations the hardware performs in one micro-op, declared once.

Each declaration gives the iteration axes and their extents (from ``HwConfig``), the
operands with their scratchpad scopes and index axes, the combining rule, and a numpy
function with the exact integer semantics for a batch of micro-ops. The simulator
executes GEMM/ALU micro-ops through ``numpy_fn``; the compiler tensorizes loop nests
by matching them against ``operands``/``output``/``reduce_axes``; the RTL builds its
datapath from the same shapes and the ALU registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from isa.alu import AluOp, alu_ops, evaluate, wrap
from isa.requant import Record, unpack_records

if TYPE_CHECKING:
    from isa.config import HwConfig


@dataclass(frozen=True)
class Operand:
    """A tensor operand of an intrinsic: which scratchpad it lives in and which axes index it."""

    name: str
    scope: str  # "inp", "wgt", "acc" or "imm"
    axes: tuple[str, ...]
    bits: int


@dataclass(frozen=True)
class TensorIntrinsic:
    """One hardware tensor operation.

    ``kind`` is ``"gemm"`` (output += product of inputs reduced over ``reduce_axes``) or
    ``"alu"`` (output = op(output, operand) elementwise). ``expr`` is the human-readable form.
    """

    name: str
    kind: str
    extents: dict[str, int]
    inputs: tuple[Operand, ...]
    output: Operand
    reduce_axes: tuple[str, ...]
    expr: str
    numpy_fn: Callable[..., np.ndarray]
    alu_op: AluOp | None = None

    def shape(self, operand: Operand) -> tuple[int, ...]:
        return tuple(self.extents[a] for a in operand.axes)


def gemm_intrinsic(cfg: "HwConfig") -> TensorIntrinsic:
    """``acc[b, o] += sum_i inp[b, i] * wgt[o, i]`` over BATCH x BLOCK_IN x BLOCK_OUT."""
    acc_bits = cfg.acc_width

    # float64 matmul is exact while every partial sum stays below 2**53; otherwise use int64,
    # whose wrap-around modulo 2**64 is still exact modulo 2**acc_width.
    exact_in_float = (cfg.inp_width - 1) + (cfg.wgt_width - 1) + cfg.log_block_in < 53

    def fn(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray) -> np.ndarray:
        """Batched: acc (n,B,BO) int64, inp (n,B,BI), wgt (n,BO,BI) -> new acc (n,B,BO), wrapped."""
        if exact_in_float:
            f64 = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731 - no copy when already float64
            prod = np.matmul(f64(inp), np.swapaxes(f64(wgt), -1, -2)).astype(np.int64)
        else:
            with np.errstate(over="ignore"):
                prod = np.matmul(inp.astype(np.int64), np.swapaxes(wgt, -1, -2).astype(np.int64))
        with np.errstate(over="ignore"):
            return wrap(acc + prod, acc_bits)

    return TensorIntrinsic(
        name="gemm",
        kind="gemm",
        extents={"b": cfg.batch, "i": cfg.block_in, "o": cfg.block_out},
        inputs=(Operand("inp", "inp", ("b", "i"), cfg.inp_width), Operand("wgt", "wgt", ("o", "i"), cfg.wgt_width)),
        output=Operand("acc", "acc", ("b", "o"), cfg.acc_width),
        reduce_axes=("i",),
        expr="acc[b, o] += inp[b, i] * wgt[o, i]",
        numpy_fn=fn,
    )


def record_lanes(rows: np.ndarray, wgt_width: int) -> Record:
    """Records of WGT elements ``(n, block_out, block_in)`` as fields of shape ``(n, 1, block_out)`` (every batch lane)."""
    r = unpack_records(rows, wgt_width)
    return Record(**{k: v[:, None, :] for k, v in vars(r).items()})


def alu_intrinsic(cfg: "HwConfig", op: AluOp) -> TensorIntrinsic:
    """``acc[b, o] = op(acc[b, o], src[b, o] or imm)`` for one registered ALU op; for a record op (REQUANT)
    ``acc[b, o] = op(acc[b, o], record(wgt[src][o]))``."""
    width = cfg.acc_width
    if op.operand == "wgt":
        def rfn(dst: np.ndarray, rows: np.ndarray) -> np.ndarray:
            """dst (n, B, BO) int64, rows (n, BO, BI) WGT elements -> new acc (n, B, BO)."""
            return evaluate(op, dst, record_lanes(rows, cfg.wgt_width), width)

        return TensorIntrinsic(
            name=f"alu_{op.name.lower()}", kind="alu", extents={"b": cfg.batch, "o": cfg.block_out, "i": cfg.block_in},
            inputs=(Operand("rec", "wgt", ("o", "i"), cfg.wgt_width),),
            output=Operand("acc", "acc", ("b", "o"), width), reduce_axes=(),
            expr=f"acc[b, o] = {op.name}(acc[b, o], record(wgt[src][o, :]))", numpy_fn=rfn, alu_op=op)

    def fn(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
        return evaluate(op, dst, src, width)

    return TensorIntrinsic(
        name=f"alu_{op.name.lower()}",
        kind="alu",
        extents={"b": cfg.batch, "o": cfg.block_out},
        inputs=(Operand("src", "acc", ("b", "o"), width),),
        output=Operand("acc", "acc", ("b", "o"), width),
        reduce_axes=(),
        expr=f"acc[b, o] = {op.name}(acc[b, o], src[b, o] | imm)",
        numpy_fn=fn,
        alu_op=op,
    )


def intrinsics(cfg: "HwConfig") -> dict[str, TensorIntrinsic]:
    """Every intrinsic of ``cfg``: the GEMM and one ALU intrinsic per registered op that ``cfg`` supports."""
    out = {"gemm": gemm_intrinsic(cfg)}
    for op in alu_ops(cfg):
        intr = alu_intrinsic(cfg, op)
        out[intr.name] = intr
    return out
