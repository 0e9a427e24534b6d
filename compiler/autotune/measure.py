"""Measurement: simulator cycles of a task's kernel with given knobs (cycle-accurate timing, zero data).

:class:`LocalMeasurer` runs a batch in worker processes (``os.cpu_count()`` by default, ``workers=0``
measures in this process); :class:`RayMeasurer` spreads it over a Ray cluster (``ray`` is an optional
extra, imported only when a RayMeasurer is made). Both return one :class:`Result` per candidate, in order.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from compiler.autotune.task import Task
from compiler.topi.knobs import ConvKnobs


@dataclass
class Result:
    """One measurement: ``cycles`` (None on error), the ``error`` text, and the seconds it took."""

    cycles: int | None
    error: str | None
    seconds: float


def measure(task: Task, knobs: ConvKnobs) -> Result:
    """Build the kernel with ``knobs`` and run it on the cycle-accurate simulator with zero inputs."""
    from compiler.topi.tune import measure_conv

    t0 = time.perf_counter()
    try:
        cycles = measure_conv(task.cfg, task.shape, knobs, task.bias, task.requant)
    except Exception as exc:  # noqa: BLE001 - a failed candidate is a result, not a crash of the tuner
        return Result(None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    return Result(int(cycles), None, time.perf_counter() - t0)


def _measure_args(args: tuple) -> Result:
    return measure(*args)


class LocalMeasurer:
    """Measure batches in a pool of worker processes (forked at the first batch, reused); ``workers=0``: in this process."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = (os.cpu_count() or 1) if workers is None else int(workers)
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self._pool = None

    def __call__(self, task: Task, batch: list[ConvKnobs]) -> list[Result]:
        if self.workers == 0 or len(batch) == 1:
            return [measure(task, k) for k in batch]
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))
        return list(self._pool.map(_measure_args, [(task, k) for k in batch]))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RayMeasurer:
    """Measure batches as Ray tasks on the cluster at ``address`` (e.g. ``"auto"`` or ``"ray://host:10001"``)."""

    def __init__(self, address: str) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ValueError("--ray needs the ray package: pip install 'vta-stack[ray]'") from exc
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address)
        self._remote = ray.remote(measure)

    def __call__(self, task: Task, batch: list[ConvKnobs]) -> list[Result]:
        return self._ray.get([self._remote.remote(task, k) for k in batch])

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
