"""Tuning the llvm target's GEMM schedule (:func:`compiler.topi.gemm.schedule_cpu`): dense layers over many rows (a
transformer's tokens) and attention's batched MatMuls.

A task (:class:`LlvmGemmTask`) is one float product ``a`` (..., M, K) times ``b`` (..., K, N) with its fused bias
and activation, as ``build(model, target="llvm")`` compiles it (read from the node's plan, so exactly the products
the target runs as a GEMM: a ``Gemm``/``FusedDense``/``MatMul`` of at least
:data:`~compiler.backend.plans.plans_float.GEMM_MIN_ROWS` rows or of two activations; the one-row classifier keeps
its own schedule and is not tuned). Its space (:class:`CpuGemmSpace`) is the product of the schedule's knobs
(:class:`~compiler.topi.gemm.CpuGemmKnobs`): register-tile rows ``bm`` (1-8, 10, 12) and vectors ``nvec`` (1-4)
(their accumulators, the column vectors and a broadcast within the target's vector registers), the parallel loop
(``"cols"``, the (batch x column block) loop, or ``"none"``) and the reduction's unrolling ``kunroll`` (1, 2, 4,
dividing K). Measurement, records (``"task": {"op": "gemm_float", ...}``), logs and applying a log are the llvm
conv tasks' (:mod:`compiler.autotune.llvm_conv`): the same timing, the same CPU key, the same in-model ranking and
confirmation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.autotune.host_timed import HostKnobGrid, HostTimed
from compiler.autotune.product_task import FloatProductTask
from compiler.topi import gemm
from compiler.topi.gemm import GEMM_PARALLEL_CHOICES, KUNROLL_CHOICES, CpuGemmKnobs

OP = "gemm_float"
BM_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12)
NVEC_CHOICES = (1, 2, 3, 4)


@dataclass(frozen=True)
class LlvmGemmTask(HostTimed, FloatProductTask):
    """One float product as the llvm target compiles it (:mod:`compiler.topi.gemm`; see
    :class:`~compiler.autotune.product_task.FloatProductTask`)."""

    OP = OP
    TARGET = "llvm"
    PLAN = "gemm"

    def default_knobs(self) -> CpuGemmKnobs:
        """The knobs a build without a log uses (:func:`compiler.topi.gemm.default_cpu_knobs`)."""
        from compiler.backend.llvm.host import float_lanes

        return gemm.default_cpu_knobs(*self.dims(), float_lanes())

    def make_space(self) -> "CpuGemmSpace":
        return CpuGemmSpace(self)

    def kernel(self, knobs: CpuGemmKnobs):
        """The compiled kernel with ``knobs`` (``compiler.backend.build.CpuOp``)."""
        from compiler.backend.build import build_op
        from compiler.backend.llvm.host import float_lanes
        from compiler.schedule import create_schedule

        op = gemm.gemm(tuple(self.a), tuple(self.b), float_lanes(), bias=self.bias, act=self.act,
                       act_params=tuple(self.act_params), knobs=knobs)
        s = create_schedule(op.out)
        gemm.schedule_cpu(op, s)
        return build_op(s, args=op.inputs + [op.out], name="gemm_tune")


def gemm_task_of_node(node, infos, consts) -> LlvmGemmTask | None:
    """The task of a product node that the llvm target compiles to the GEMM, or None
    (:meth:`~compiler.autotune.product_task.FloatProductTask.of_node`)."""
    return LlvmGemmTask.of_node(node, infos, consts)


class CpuGemmSpace(HostKnobGrid):
    """All knob settings of one :class:`LlvmGemmTask`: bm x nvec x parallel x kunroll (see the module docstring)."""

    KNOBS = CpuGemmKnobs
    transfer_family = "llvm_gemm"  # its features are its own: the XGB tuner keeps its data apart from the convs'
    structure_axis = 2  # parallel: one thread or all
    structure_share = 1.0
    stepped_axes = (0, 1, 3)  # bm, nvec and kunroll are ordered sizes

    def __init__(self, task: LlvmGemmTask) -> None:
        self._set_axes(task, [("bm", list(BM_CHOICES)), ("nvec", list(NVEC_CHOICES)),
                              ("parallel", list(GEMM_PARALLEL_CHOICES)), ("kunroll", list(KUNROLL_CHOICES))])
        self.m, self.k, self.n, self.batch = task.dims()

    def tile(self, k: CpuGemmKnobs) -> tuple[int, int, int]:
        """``(bm, vec, bn)`` the schedule runs with ``k`` (cut down to the extents)."""
        return gemm.tile_sizes(self.m, self.n, self.lanes, k.bm, k.nvec)

    def outer(self, k: CpuGemmKnobs) -> int:
        """Iterations of the (batch x column block) loop."""
        return self.batch * -(-self.n // self.tile(k)[2])

    def reject(self, k: CpuGemmKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        why = self.knob_error(lambda: k.check(self.k))
        if why:
            return why
        bm, vec, bn = self.tile(k)
        vecs = bn // vec
        if k.bm > bm:
            return f"bm={k.bm} exceeds the {self.m} rows (the same program as bm={bm})"
        if k.nvec > vecs:
            return f"nvec={k.nvec} exceeds the {self.n} columns' vectors (the same program as nvec={vecs})"
        if bm * vecs + vecs + 1 > self.registers:
            return f"{bm * vecs} accumulators, {vecs} column vectors and a broadcast exceed the {self.registers} " \
                   f"vector registers"
        if k.parallel == "cols" and self.outer(k) < 2:
            return "parallel='cols' over one column block (the same program as parallel='none')"
        return None

    def features(self, k: CpuGemmKnobs) -> np.ndarray:
        """Analytic, scale-free features: the register tile, its loads per FMA, waste on ragged edges, the parallel
        loop's balance, the packed panel's size, and the product's geometry."""
        bm, vec, bn = self.tile(k)
        vecs = bn // vec
        m, kk, n, batch = self.m, self.k, self.n, self.batch
        waste_m = -(-m // bm) * bm / m - 1.0
        waste_n = -(-n // bn) * bn / n - 1.0
        chunks = self.outer(k) if k.parallel == "cols" else 1
        th = self.threads
        balance = -(-chunks // th) * th / chunks - 1.0
        lg = lambda x: math.log2(max(float(x), 1.0))  # noqa: E731
        feats = [float(bm), float(vecs), lg(bm * vecs), float(bm * vecs + vecs + 1), (bm * vecs) / (bm + vecs),
                 waste_m, waste_n, float(k.parallel == "cols"), lg(chunks), balance,
                 lg(batch * m * kk * n / chunks), float(k.kunroll), lg(kk * bn * 4),  # the packed panel's bytes
                 lg(m), lg(kk), lg(n), lg(batch), lg(batch * m * kk * n), lg(-(-m // bm)), lg(vec)]
        return np.asarray(feats, dtype=np.float32)
