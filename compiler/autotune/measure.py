"""Measurement: simulator cycles of a task's kernel with given knobs (cycle-accurate timing, zero data).

The timing engine runs without the arithmetic (:class:`TimingOnlyDevice`: same cycles, a fraction of the time).

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


class TimingOnlyDevice:
    """The cycle-accurate simulator's timing engine without the arithmetic (a ``jit_runtime`` device).

    The simulator's timing depends on the instruction stream only, never on the data, so with zero inputs
    the cycles equal the ``"sim"`` device's (checked by a test) while the GEMMs/ALU ops on zeros, most of a
    run's time, are skipped. Scratchpads and outputs are left untouched: use it for cycles only."""

    def __init__(self, cfg) -> None:
        self.cfg = cfg

    def run(self, dram, insn_addr: int, n_insns: int):
        from simulator.budget import DEFAULT_MAX_CYCLES, check_budget
        from simulator.dram import check_image
        from simulator.program import Decoder
        from simulator.result import SimResult
        from simulator.timing_engine import run_timed

        check_image(dram)
        infos = Decoder(self.cfg).program(dram, insn_addr, n_insns)
        check_budget(infos, DEFAULT_MAX_CYCLES)
        return SimResult(self.cfg, infos, run_timed(self.cfg, infos, lambda i: None, DEFAULT_MAX_CYCLES))


def kernel_cycles(task: Task, knobs: ConvKnobs, device="timing") -> int:
    """Cycles of ``task``'s kernel with ``knobs`` and zero inputs; ``device``: ``"timing"`` (the simulator's
    timing engine alone, :class:`TimingOnlyDevice`) or a ``jit_runtime`` device name such as ``"sim"``."""
    import numpy as np

    from compiler.codegen.module import build
    from compiler.topi.conv2d import conv2d_kernel

    k = conv2d_kernel(task.cfg, task.shape, task.bias, task.requant, knobs)
    mod = build(k.schedule, task.cfg, name="conv2d_tune")
    inputs = {k.data: np.zeros(k.data.shape, np.int8), k.weight: np.zeros(k.weight.shape, np.int8)}
    inputs.update({t: a for t, a in k.epilogue.consts})
    _, prof = mod.run(inputs, device=TimingOnlyDevice(task.cfg) if device == "timing" else device)
    return int(prof["cycles"])


def measure(task: Task, knobs: ConvKnobs) -> Result:
    """Build the kernel with ``knobs`` and time it on the cycle-accurate simulator with zero inputs."""
    t0 = time.perf_counter()
    try:
        cycles = kernel_cycles(task, knobs)
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
