"""The search space of the accelerator conv2d/dense schedule (knobs of :class:`compiler.topi.knobs.ConvKnobs`).

Axes: output-channel tile and input-channel chunk (divisors of the block counts), output rows per
tile (1..OH, a ragged last tile is legal), and the thread/order/epilogue combination: virtual
threads (1-4) and the axis they split, which output-tile loop is outer, and where the ALU epilogue
sits among the threads. Settings that make no difference (the thread axis and epilogue placement
with one thread; the placement without an epilogue) appear once. A point is a tuple of indices,
one per axis. :meth:`ConvSpace.reject` says why a setting cannot work before anything is measured.
"""
from __future__ import annotations

import copy
import itertools
import math

import numpy as np

from compiler.autotune.task import Task
from compiler.topi.knobs import ConvKnobs, violation

Point = tuple[int, ...]


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class GridSpace:
    """A space of points ``p`` (a tuple of indices, one per axis) over ``self.dims``: the flat index, its inverse
    and uniform sampling. Subclasses set ``dims`` and say what a point means."""

    dims: tuple[int, ...]
    stepped_axes: tuple[int, ...] = ()  # ordered axes (tile sizes): a move steps 1-2 positions; others jump

    def neighbour(self, p: Point, rng: np.random.Generator) -> Point:
        """``p`` with one axis changed: a stepped axis by 1-2 positions (clipped), any other to another value."""
        q = list(p)
        a = int(rng.integers(len(q)))
        if self.dims[a] == 1:
            return p
        if a in self.stepped_axes:
            q[a] = int(np.clip(q[a] + rng.choice([-2, -1, 1, 2]), 0, self.dims[a] - 1))
        else:
            q[a] = int((q[a] + rng.integers(1, self.dims[a])) % self.dims[a])
        return tuple(q)

    def index(self, p: Point) -> int:
        return int(np.ravel_multi_index(p, self.dims))

    def at(self, i: int) -> Point:
        return tuple(int(x) for x in np.unravel_index(i, self.dims))

    def sample(self, rng: np.random.Generator) -> Point:
        return tuple(int(rng.integers(d)) for d in self.dims)


class ConvSpace(GridSpace):
    """All knob settings of one task, as a product of axes (see the module docstring)."""

    stepped_axes = (0, 1, 2)  # the tiles step 1-2 positions; the thread combination jumps to another

    def __init__(self, task: Task, max_vthreads: int = 4, estimate_feature: bool = True) -> None:
        self.task = task
        self.estimate_feature = estimate_feature  # the analytic cycle estimate as the last feature
        cs = task.shape
        self.n_consts, self.n_alu = task.epilogue_size()
        combos = [(1, "oc", order, "fused") for order in ("oc", "h")]
        epis = ("fused", "deferred") if self.n_alu else ("fused",)
        for v in range(2, max_vthreads + 1):
            combos += [(v, axis, order, epi) for axis in ("oc", "h") for order in ("oc", "h") for epi in epis]
        self.axes: list[tuple[str, list]] = [("oc_tile", divisors(cs.ocb)), ("ic_tile", divisors(cs.icb)),
                                             ("h_tile", list(range(1, cs.oh + 1))), ("threads", combos)]
        self.dims = tuple(len(v) for _, v in self.axes)
        self._cache: dict[tuple, tuple] = {}

    def __len__(self) -> int:
        return math.prod(self.dims)

    def knobs(self, p: Point) -> ConvKnobs:
        oc, ic, h, (v, axis, order, epi) = (vals[i] for (_, vals), i in zip(self.axes, p))
        return ConvKnobs(oc, h, ic, v, axis, order, epi)

    def point(self, k: ConvKnobs) -> Point | None:
        """The point of knobs ``k``, or None when they lie outside this space."""
        combo = (k.vthreads, k.vthread_axis if k.vthreads > 1 else "oc", k.order,
                 k.epilogue if k.vthreads > 1 and self.n_alu else "fused")
        try:
            return (self.axes[0][1].index(k.oc_tile), self.axes[1][1].index(k.ic_tile),
                    self.axes[2][1].index(k.h_tile), self.axes[3][1].index(combo))
        except ValueError:
            return None

    def grid(self):
        """Every point in a fixed order: largest tiles first, the thread combination fastest."""
        return itertools.product(*(range(d - 1, -1, -1) for d in self.dims[:3]), range(self.dims[3]))

    # -------------------------------------------------------------- validity
    def reject(self, k: ConvKnobs) -> str | None:
        """Why knobs ``k`` cannot work for this task (a short reason, counted by tuners), or None."""
        cs = self.task.shape
        try:
            k.check(cs)
        except ValueError as exc:
            return f"bad knob: {exc}"
        if cs.ocb % k.oc_tile:
            return "oc_tile does not divide the output channel blocks"
        if cs.icb % k.ic_tile:
            return "ic_tile does not divide the input channel blocks"
        if k.vthreads > 1:
            n = -(-cs.ocb // k.oc_tile) if k.vthread_axis == "oc" else -(-cs.oh // k.h_tile)
            if n < k.vthreads:
                return f"fewer {k.vthread_axis} tiles than virtual threads"
        why = violation(self.task.cfg, cs, k, self.n_consts)
        if why:
            return why
        return self._lower(k)[0]

    def features(self, k: ConvKnobs) -> np.ndarray:
        """Loop-nest features of a valid setting (see :mod:`compiler.autotune.features`)."""
        why, feats = self._lower(k)
        if why:
            raise ValueError(f"knobs {k} are invalid for this task: {why}")
        return feats if self.estimate_feature else feats[:-1]

    def without_estimate(self) -> "ConvSpace":
        """This space with features that leave out the analytic cycle estimate (a cold model: nothing analytic
        about speed); shares the lowering cache."""
        out = copy.copy(self)
        out.estimate_feature = False
        return out

    def _lower(self, k: ConvKnobs) -> tuple[str | None, np.ndarray | None]:
        """Lower the kernel with knobs ``k`` once: (reason it failed, None) or (None, features); cached."""
        from compiler.autotune.features import loop_features
        from compiler.tir.accel import lower
        from compiler.topi.conv2d import conv2d_kernel

        key = (k.oc_tile, k.h_tile, k.ic_tile, k.vthreads, k.vthread_axis, k.order, k.epilogue)
        if key not in self._cache:
            t = self.task
            try:
                func = lower(conv2d_kernel(t.cfg, t.shape, t.bias, t.requant, k).schedule, t.cfg, name="conv2d_tune")
            except Exception as exc:  # noqa: BLE001 - any lowering failure makes the setting invalid
                self._cache[key] = (f"lowering: {type(exc).__name__}", None)
            else:
                self._cache[key] = (None, loop_features(func, t, k, self.n_alu))
        return self._cache[key]
