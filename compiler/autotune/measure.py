"""Measurement: simulator cycles of a task's kernel with given knobs (cycle-accurate timing, zero data).

The timing engine runs without the arithmetic (:class:`TimingOnlyDevice`: same cycles, a fraction of the time),
through the one measurement the conv chooser and the DSE use (:func:`compiler.backend.accel.measure.measure_conv`).

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
from compiler.backend.accel.measure import TimingOnlyDevice, measure_conv

__all__ = ["LocalMeasurer", "RayMeasurer", "Result", "TimingOnlyDevice", "kernel_cycles", "measure", "measure_knobs"]


@dataclass
class Result:
    """One measurement: ``cycles`` (None on error), the ``error`` text, and the seconds it took."""

    cycles: int | None
    error: str | None
    seconds: float


def kernel_cycles(task: Task, knobs: ConvKnobs, device="timing") -> int:
    """Cycles of ``task``'s kernel with ``knobs`` and zero inputs; ``device``: ``"timing"``, the one timing-only
    measurement the conv chooser and the DSE use (:func:`compiler.backend.accel.measure.measure_conv`, cached per schedule), or
    a ``jit_runtime`` device name such as ``"sim"`` (the kernel built and run as a module, for checks)."""
    import numpy as np

    if device == "timing":
        return measure_conv(task.cfg, task.shape, knobs, task.bias, task.requant)

    from compiler.backend.accel.module import build
    from compiler.topi.conv2d import conv2d_kernel

    k = conv2d_kernel(task.cfg, task.shape, task.bias, task.requant, knobs)
    mod = build(k.schedule, task.cfg, name="conv2d_tune")
    inputs = {k.data: np.zeros(k.data.shape, np.int8), k.weight: np.zeros(k.weight.shape, np.int8)}
    inputs.update({t: a for t, a in k.epilogue.consts})
    _, prof = mod.run(inputs, device=device)
    return int(prof["cycles"])


def measure(task: Task, knobs: ConvKnobs) -> Result:
    """Build the kernel with ``knobs`` and time it on the cycle-accurate simulator with zero inputs."""
    t0 = time.perf_counter()
    try:
        cycles = kernel_cycles(task, knobs)
    except Exception as exc:  # noqa: BLE001 - a failed candidate is a result, not a crash of the tuner
        return Result(None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    return Result(int(cycles), None, time.perf_counter() - t0)


def measure_knobs(knobs: ConvKnobs, task: Task) -> Result:
    """:func:`measure` with the candidate first: the ``fn(item, *shared)`` shape :mod:`compiler.scaleout` maps."""
    return measure(task, knobs)


class _Measurer:
    """Measure a batch through a :class:`compiler.scaleout.Runner` (one result per candidate, in order)."""

    _runner = None

    def __call__(self, task: Task, batch: list[ConvKnobs]) -> list[Result]:
        if len(batch) == 1 or self._runner is None:
            return [measure(task, k) for k in batch]
        return self._runner.map(measure_knobs, batch, (task,))

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalMeasurer(_Measurer):
    """Measure batches in a pool of worker processes (forked at the first batch, reused); ``workers=0``: in this
    process (:class:`compiler.scaleout.PoolRunner`)."""

    def __init__(self, workers: int | None = None) -> None:
        from compiler.scaleout import PoolRunner

        self.workers = (os.cpu_count() or 1) if workers is None else int(workers)
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self._runner = PoolRunner(self.workers) if self.workers > 0 else None


class RayMeasurer(_Measurer):
    """Measure batches as Ray tasks (:class:`compiler.scaleout.RayRunner`, the mechanism ``vta dse --ray`` uses)
    on the cluster at ``address``: ``"local"`` starts one here with ``workers`` CPUs, ``"auto"`` or
    ``"ray://host:10001"`` joins one. A worker lost mid-measurement is retried, never a lost candidate."""

    def __init__(self, address: str, workers: int | None = None) -> None:
        from compiler.scaleout import RayRunner

        self._runner = RayRunner(address, workers)
        self.workers = self._runner.workers

    def __call__(self, task: Task, batch: list[ConvKnobs]) -> list[Result]:
        return self._runner.map(measure_knobs, batch, (task,))
