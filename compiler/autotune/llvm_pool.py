"""Tuning the llvm target's max-pool row schedule (:func:`compiler.topi.pool.schedule_rows_cpu`).

A task (:class:`LlvmPoolTask`) is one float32 ``MaxPool`` (window, strides, pads, output size) that
``build(model, target="llvm")`` runs with pixels in the vector lanes (read from the node's plan: the pools whose rows
take a row tile, :func:`compiler.topi.pool.default_pool_knobs`). Its space (:class:`CpuPoolSpace`) is the product of
the schedule's knobs (:class:`~compiler.topi.pool.CpuPoolKnobs`): output pixels per register tile ``xt`` (half a
vector to four vectors, or the whole row), rows per tile ``yt`` (1-8, 12, 16; their accumulators within the
target's vector registers) and the parallel (image, channel) loop on or off. Measurement, records
(``"task": {"op": "max_pool_float", ...}``), logs and applying a log are the llvm conv tasks'
(:mod:`compiler.autotune.llvm_conv`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from compiler.autotune.host_timed import HostKnobGrid, HostTimed
from compiler.autotune.pool_task import PoolWindows
from compiler.topi import pool
from compiler.topi.pool import POOL_PARALLEL_CHOICES, CpuPoolKnobs, PoolSpec
from compiler.topi.row_tiles import row_vectors

OP = "max_pool_float"
YT_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)


@dataclass(frozen=True)
class LlvmPoolTask(PoolWindows, HostTimed):
    """One float32 max pool as the llvm target compiles it (``spec``: geometry and output size); ``name``: the
    node's (not part of the identity)."""

    spec: PoolSpec
    name: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        s = self.spec
        if min(s.n, s.c, s.h, s.w, s.kh, s.kw, s.oh, s.ow, *s.stride) < 1:
            raise ValueError(f"llvm pool tasks need positive sizes, strides and output extents, got {s}")

    @property
    def ident(self) -> dict:
        return {"op": OP, "spec": dataclasses.asdict(self.spec)}

    def describe(self) -> str:
        s = self.spec
        return (f"{self.name + ': ' if self.name else ''}max pool {s.kh}x{s.kw}/{s.stride[0]} {s.c}ch "
                f"{s.h}x{s.w}->{s.oh}x{s.ow}")

    def default_knobs(self) -> CpuPoolKnobs:
        """The knobs a build without a log uses (:func:`compiler.topi.pool.default_pool_knobs`)."""
        from compiler.backend.llvm.host import float_lanes

        knobs = pool.default_pool_knobs(self.spec, float_lanes())
        if knobs is None:
            raise ValueError(f"{self.describe()}: rows narrower than half a vector take the plain max pool, which "
                             f"has no knobs")
        return knobs

    def make_space(self) -> "CpuPoolSpace":
        return CpuPoolSpace(self)

    def kernel(self, knobs: CpuPoolKnobs):
        """The compiled kernel with ``knobs`` (``compiler.backend.build.CpuOp``)."""
        from compiler.backend.build import build_op
        from compiler.schedule import create_schedule

        knobs.check(self.spec)
        ins, out, pad, window = pool.max_pool_rows(self.spec, knobs.xt, knobs.yt)
        s = create_schedule(out)
        pool.schedule_rows_cpu(s, out, pad, window, knobs)
        return build_op(s, args=ins + [out], name="max_pool_tune")

    def inputs(self, knobs: CpuPoolKnobs, seed: int = 0) -> list[np.ndarray]:
        s = self.spec
        return [np.random.default_rng(seed).standard_normal((s.n, s.c, s.h, s.w)).astype(np.float32)]


def pool_task_of_node(node, infos, consts) -> LlvmPoolTask | None:
    """The task of a ``MaxPool`` node that the llvm target runs with the row schedule (read from its plan), or
    None."""
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans import PLANNERS

    if node.op != "MaxPool" or not infos or infos[0] is None:
        return None
    try:
        plan = PLANNERS[node.op](node, infos, consts, "llvm")
    except (UnsupportedOnTarget, ValueError, TypeError, KeyError):
        return None
    if not isinstance(plan.key[-1], CpuPoolKnobs):
        return None
    return LlvmPoolTask(plan.key[1], node.name)


class CpuPoolSpace(HostKnobGrid):
    """All knob settings of one :class:`LlvmPoolTask`: xt x yt x parallel (see the module docstring)."""

    KNOBS = CpuPoolKnobs
    transfer_family = "llvm_pool"
    structure_axis = 2
    structure_share = 1.0
    stepped_axes = (0, 1)

    def __init__(self, task: LlvmPoolTask) -> None:
        from compiler.backend.llvm.host import float_lanes

        s = task.spec
        lanes = float_lanes()
        d = task.default_knobs()
        xts = sorted({x for x in (lanes // 2, lanes, 2 * lanes, 3 * lanes, 4 * lanes, s.ow, d.xt) if 1 <= x <= s.ow})
        yts = sorted({y for y in (*YT_CHOICES, d.yt) if y <= s.oh})
        self._set_axes(task, [("xt", xts), ("yt", yts), ("parallel", list(POOL_PARALLEL_CHOICES))])

    def accumulators(self, k: CpuPoolKnobs) -> int:
        """Vector registers the register tile's running maxima take."""
        return row_vectors(k.xt, self.lanes) * k.yt

    def reject(self, k: CpuPoolKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        s = self.task.spec
        why = self.knob_error(lambda: k.check(s))
        if why:
            return why
        if self.accumulators(k) + 2 > self.registers:
            return f"{self.accumulators(k)} accumulator registers and two for loads exceed the {self.registers}"
        if k.parallel == "nc" and s.n * s.c < 2:
            return "parallel='nc' over one plane (the same program as parallel='none')"
        return None

    def features(self, k: CpuPoolKnobs) -> np.ndarray:
        """Analytic, scale-free features: the register tile, waste on ragged edges, the parallel loop's balance, the
        window and the plane's geometry."""
        s = self.task.spec
        acc = self.accumulators(k)
        waste_x = -(-s.ow // k.xt) * k.xt / s.ow - 1.0
        waste_y = -(-s.oh // k.yt) * k.yt / s.oh - 1.0
        chunks = s.n * s.c if k.parallel == "nc" else 1
        th = self.threads
        balance = -(-chunks // th) * th / chunks - 1.0
        lg = lambda x: math.log2(max(float(x), 1.0))  # noqa: E731
        feats = [lg(k.xt), float(k.yt), float(row_vectors(k.xt, self.lanes)), float(acc),
                 float(acc + 2 > self.registers), waste_x, waste_y, float(k.parallel == "nc"), lg(chunks), balance,
                 lg(self.task.macs() / chunks), float(s.kh * s.kw), float(s.stride[0]), lg(s.c), lg(s.oh), lg(s.ow),
                 lg(self.task.macs()), lg(4 * s.h * s.w), float(k.xt % self.lanes == 0)]
        return np.asarray(feats, dtype=np.float32)
