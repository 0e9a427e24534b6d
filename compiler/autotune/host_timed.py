"""What the llvm target's tuning tasks share (convs, GEMMs, max pools): timing a kernel on this CPU as a model calls
it (one warm-up call, then the median of repeated runs; optionally each after a cache sweep), the CPU records are
keyed by, a task's bound call and log line (:class:`HostTimed`), and a knob grid that knows the target's vector
lanes, registers and threads (:class:`HostKnobGrid`)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np

from compiler.autotune.conv_task import KnobGrid
from compiler.autotune.measure import Result
from compiler.autotune.records import FORMAT

REPEATS = 5          # timed runs per measurement (the median is the cost)
MIN_RUN_S = 2e-3     # a timed run calls the kernel enough times to last about this long
SWEEP_MIN_BYTES = 64 << 20  # a flushed measurement first reads at least this much (else twice the L3 cache)
_sweep: list[np.ndarray] = []


def last_level_cache_bytes() -> int:
    """The largest CPU cache of this machine (Linux sysfs), 0 where unknown."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = f.read_text().strip().upper()
            sizes.append(int(text[:-1]) << {"K": 10, "M": 20}[text[-1]] if text[-1] in "KM" else int(text))
        except (OSError, ValueError):
            continue
    return max(sizes, default=0)


def sweep_caches() -> None:
    """Evict this machine's caches: read a buffer of twice the last-level cache (at least
    :data:`SWEEP_MIN_BYTES`), so the next call finds its weights and inputs in memory, as a network runs a layer
    whose weights the other layers have pushed out (TVM's ``enable_cpu_cache_flush``)."""
    if not _sweep:
        _sweep.append(np.ones(max(SWEEP_MIN_BYTES, 2 * last_level_cache_bytes()) // 4, np.float32))
    _sweep[0].max()


def cpu_ident() -> dict:
    """The LLVM target CPU records are keyed by: its name and a hash of its feature string."""
    from compiler.backend.llvm.host import target_cpu

    t = target_cpu()
    return {"name": t.cpu, "hash": hashlib.sha256(f"{t.cpu}|{t.features}".encode()).hexdigest()[:12]}


class HostTimed:
    """What the llvm tasks share: the kernel bound to seeded inputs as a model calls it, its timing and its log line.
    A task gives ``kernel(knobs)`` (a ``CpuOp``), ``inputs(knobs)``, ``ident`` and ``rate(ns)``."""

    def measure_cost(self, knobs, repeats: int = REPEATS, flush: bool = False) -> int:
        """Median nanoseconds of the kernel with ``knobs`` (one warm-up call, then ``repeats`` timed runs), called
        as a model calls it: the bound call on fixed arrays (``CpuOp.bind``), not ``CpuOp.__call__``, whose
        argument checks cost ~10-15 us a call (a third of a 14x14 1x1 conv's time). ``flush``: each timed run is
        one call after :func:`sweep_caches` (weights and inputs in memory, not cache)."""
        return time_call(self.bound_call(knobs), repeats, flush)

    def bound_call(self, knobs) -> Callable[[], None]:
        """The kernel with ``knobs`` bound to its seeded inputs (:meth:`inputs`) and an output array, as a model calls
        it (``CpuOp.bind``; the call keeps its arrays alive)."""
        fn = self.kernel(knobs)
        args = self.inputs(knobs)
        out = np.empty(fn.func.args[fn.func.num_inputs].shape, np.float32)
        return fn.bind(*args, out=out) or (lambda: fn(*args, out=out))

    def record_line(self, knobs, res: Result, tuner: str = "", in_model: dict | None = None) -> str:
        """The JSON line of one trial (see :mod:`compiler.autotune.llvm_conv`); ``in_model``: the figures of an
        in-model choice (its line then has no timed ``result``)."""
        result = None if res.cycles is None else {"ns": int(res.cycles), "gflops": round(self.rate(res.cycles), 4)}
        line = {"vta_tuning": FORMAT, "target": "llvm", "cpu": cpu_ident(), "task": self.ident,
                "config": dataclasses.asdict(knobs), "result": result, "error": res.error,
                "time": round(time.time(), 3), "seconds": round(res.seconds, 3), "tuner": tuner}
        if in_model is not None:
            line["in_model"] = in_model
        return json.dumps(line, sort_keys=True)


def time_call(call: Callable[[], None], repeats: int = REPEATS, flush: bool = False) -> int:
    """Median nanoseconds of ``call`` (see :meth:`HostTimed.measure_cost`)."""
    t0 = time.perf_counter()
    call()  # warm-up: caches, page faults, the thread pool
    one = max(time.perf_counter() - t0, 1e-7)
    number = 1 if flush else max(1, min(1000, int(MIN_RUN_S / one)))
    runs = []
    for _ in range(repeats):
        if flush:
            sweep_caches()
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        runs.append((time.perf_counter() - t0) / number)
    return max(1, int(round(float(np.median(runs)) * 1e9)))


class HostKnobGrid(KnobGrid):
    """A grid of a knob dataclass (:class:`~compiler.autotune.conv_task.KnobGrid`; subclasses set ``KNOBS``) with the
    target's float32 lanes, vector registers and the thread count, for the subclasses' rules and features."""

    def _set_axes(self, task, axes: list[tuple[str, list]]) -> None:
        from compiler.backend.llvm.host import float_lanes, vector_bits
        from compiler.backend.llvm.parallel import num_threads

        self._axes(task, axes)
        self.lanes = float_lanes()
        self.registers = 32 if vector_bits() == 512 else 16
        self.threads = num_threads()
