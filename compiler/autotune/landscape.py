"""How a tuner compares with random search on a measured landscape (the tuner benchmark's baseline).

A *landscape* is the cost of every valid setting of a task's space, or of a uniform random sample of them
(:func:`valid_sample`), each measured once. Uniform random search without replacement over ``N`` settings of
which ``K`` reach a target needs, in expectation, exactly ``(N + 1) / (K + 1)`` trials to hit the first one
(:func:`expected_random_trials`): the baseline is a property of the landscape, not the luck of one draw.
A tuner's trials to the same target divided by it is :func:`ratio_to_expected`.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np


def expected_random_trials(costs: Iterable[float], target: float) -> float:
    """Expected trials of uniform random search without replacement over ``costs`` until one is <= ``target``.

    With ``K`` of the ``N`` costs qualifying the first hit's position has mean ``(N + 1) / (K + 1)`` (the ``N - K``
    misses split into ``K + 1`` equally likely gaps around the hits). ``K = 0`` (a sample of the space in which
    nothing reaches a target some tuner found elsewhere) gives ``N + 1``: the sample exhausted, then the hit."""
    c = np.asarray(list(costs), dtype=np.float64)
    if c.ndim != 1 or len(c) == 0:
        raise ValueError("expected_random_trials needs a non-empty list of costs")
    k = int(np.count_nonzero(c <= target))
    return (len(c) + 1) / (k + 1)


def ratio_to_expected(needed: int | None, expected: float, trials: int) -> float:
    """A tuner's trials to the target over random search's expected trials. A tuner that never reached the target
    within its ``trials`` (``needed`` None) counts ``trials + 1`` and never better than random (ratio >= 1): its
    true count is unknown, so censoring never flatters it."""
    if expected <= 0:
        raise ValueError(f"expected trials must be > 0, got {expected}")
    if needed is None:
        return max(1.0, (trials + 1) / expected)
    return needed / expected


def valid_sample(space, size: int, rng: np.random.Generator) -> tuple[list, bool]:
    """Up to ``size`` valid points of ``space`` drawn uniformly without replacement (its ``reject`` decides
    validity), and whether they are all of its valid points (the whole landscape). ``size`` <= 0: all of them."""
    out: list = []
    for i in rng.permutation(len(space)):
        p = space.at(int(i))
        if space.reject(space.knobs(p)) is None:
            out.append(p)
            if 0 < size <= len(out):
                return out, False
    return out, True


class LandscapeSpace:
    """The measured settings of a task's space as a space of their own (the tuners of the benchmark search the same
    landscape random search's expectation is taken over). Points, knobs and features are ``space``'s; a point
    outside ``points`` is rejected with a reason. :meth:`candidates` lists them all, so a model-based tuner ranks
    every untried one instead of annealing."""

    def __init__(self, space, points: list) -> None:
        if not points:
            raise ValueError("a landscape space needs at least one point")
        self.space, self.points = space, list(dict.fromkeys(points))
        self._set = set(self.points)
        self.dims = space.dims
        self.structure_axis = getattr(space, "structure_axis", 3)
        self.structure_share = getattr(space, "structure_share", 0.5)

    def __len__(self) -> int:
        return len(self.points)

    def at(self, i: int):
        return self.points[i]

    def sample(self, rng: np.random.Generator):
        return self.points[int(rng.integers(len(self.points)))]

    def candidates(self) -> list:
        return self.points

    def grid(self):
        return iter(self.points)

    def knobs(self, p):
        return self.space.knobs(p)

    def point(self, k):
        p = self.space.point(k)
        return p if p in self._set else None

    def neighbour(self, p, rng: np.random.Generator):
        return self.space.neighbour(p, rng)

    def features(self, k) -> np.ndarray:
        return self.space.features(k)

    def reject(self, k) -> str | None:
        p = self.space.point(k)
        if p not in self._set:
            return "outside the measured landscape"
        return self.space.reject(k)
