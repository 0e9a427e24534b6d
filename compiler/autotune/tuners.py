"""Tuners: propose batches of valid knob settings for one task, learn from their measurements.

:class:`Tuner` holds the loop (propose, reject invalid before measuring with the reason counted,
measure, log, keep the best); :class:`RandomTuner` samples the space uniformly, :class:`GridTuner`
walks it in order. The model-based tuner is :class:`compiler.autotune.xgb_tuner.XGBTuner`.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Callable

import numpy as np

from compiler.autotune.measure import Result
from compiler.autotune.records import TuningLog
from compiler.autotune.space import ConvSpace, Point
from compiler.autotune.task import Task
from compiler.topi.knobs import ConvKnobs


class Tuner:
    """Base tuner: subclasses implement :meth:`propose` (up to ``n`` new points, validity not yet checked)."""

    name = "base"

    def __init__(self, task: Task, space: ConvSpace | None = None, seed: int = 0) -> None:
        self.task = task
        # the task's own space (an llvm task: CpuConvSpace), else the accelerator's
        self.space = space or (task.make_space() if hasattr(task, "make_space") else ConvSpace(task))
        self.rng = np.random.default_rng(seed)
        self.visited: set[Point] = set()     # proposed points (measured or rejected)
        self.rejected: Counter = Counter()   # reason -> candidates rejected before measurement
        self.history: list[tuple[ConvKnobs, Result]] = []
        self.best_knobs: ConvKnobs | None = None
        self.best_cycles: int | None = None
        self.best_curve: list[int | None] = []  # best cycles after each trial
        self.invalid_measured = 0            # measured candidates that failed (should stay 0)
        self._seeds: list[Point] = []        # points to try before new proposals

    def seed_points(self, knobs: list[ConvKnobs]) -> None:
        """Settings to try first (e.g. the analytic choice), before the tuner's own proposals."""
        self._seeds = [p for p in (self.space.point(k) for k in knobs) if p is not None] + self._seeds

    # subclasses --------------------------------------------------------------------
    def propose(self, n: int) -> list[Point]:
        raise NotImplementedError

    def exhausted(self) -> bool:
        return len(self.visited) >= len(self.space)

    # loop ----------------------------------------------------------------------------
    def next_batch(self, n: int) -> list[ConvKnobs]:
        """Up to ``n`` valid, not yet tried settings; invalid proposals are counted by reason and dropped."""
        out: list[ConvKnobs] = []
        for _ in range(50):
            if len(out) >= n or self.exhausted():
                break
            seeds, self._seeds = self._seeds, []
            want = n - len(out) - len(seeds)
            fresh = [p for p in seeds + (self.propose(want) if want > 0 else []) if p not in self.visited]
            if not fresh:
                break  # the tuner has nothing new to offer
            for j, p in enumerate(fresh):
                if len(out) >= n:
                    self._seeds = fresh[j:]  # kept for the next batch, not lost
                    break
                if p in self.visited:
                    continue
                self.visited.add(p)
                k = self.space.knobs(p)
                why = self.space.reject(k)
                if why:
                    self.rejected[why] += 1
                else:
                    out.append(k)
        return out

    def update(self, batch: list[ConvKnobs], results: list[Result]) -> None:
        for k, r in zip(batch, results):
            self.history.append((k, r))
            if r.cycles is None:
                self.invalid_measured += 1
            elif self.best_cycles is None or r.cycles < self.best_cycles:
                self.best_cycles, self.best_knobs = r.cycles, k
            self.best_curve.append(self.best_cycles)

    def tune(self, n_trial: int, measure: Callable, batch_size: int = 8, log: TuningLog | None = None,
             callback: Callable | None = None, stop_at: float | None = None) -> ConvKnobs | None:
        """Measure up to ``n_trial`` valid settings (fewer when the space runs out); returns the best knobs.

        ``callback(tuner, batch, results, seconds)`` runs after each batch (progress lines). ``stop_at``: stop
        after the batch in which the best measured cost reaches it (at or below)."""
        if n_trial < 1 or batch_size < 1:
            raise ValueError(f"n_trial ({n_trial}) and batch_size ({batch_size}) must be >= 1")
        t0 = time.perf_counter()
        while len(self.history) < n_trial:
            if stop_at is not None and self.best_cycles is not None and self.best_cycles <= stop_at:
                break
            batch = self.next_batch(min(batch_size, n_trial - len(self.history)))
            if not batch:
                break
            results = measure(self.task, batch)
            for k, r in zip(batch, results):
                if log is not None:
                    log.write(self.task, k, r, self.name)
            self.update(batch, results)
            if callback is not None:
                callback(self, batch, results, time.perf_counter() - t0)
        return self.best_knobs


class RandomTuner(Tuner):
    """Uniform random points without repeats (a random permutation of the space, walked in order)."""

    name = "random"

    def __init__(self, task: Task, space: ConvSpace | None = None, seed: int = 0) -> None:
        super().__init__(task, space, seed)
        self._order = self.rng.permutation(len(self.space))
        self._pos = 0

    def propose(self, n: int) -> list[Point]:
        idx = self._order[self._pos:self._pos + 4 * n]
        self._pos += len(idx)
        return [self.space.at(int(i)) for i in idx]


class GridTuner(Tuner):
    """Every point in the space's fixed order."""

    name = "grid"

    def __init__(self, task: Task, space: ConvSpace | None = None, seed: int = 0) -> None:
        super().__init__(task, space, seed)
        self._it = self.space.grid()

    def propose(self, n: int) -> list[Point]:
        out = []
        for p in self._it:
            out.append(p)
            if len(out) >= 4 * n:
                break
        return out
