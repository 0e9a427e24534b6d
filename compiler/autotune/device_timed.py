"""What the cuda target's tuning tasks share (convs, products, grouped convs, pools): the device records are keyed
by, a kernel bound to seeded inputs on the device and timed as a model calls it (:class:`DeviceTimed`), and the
log2 the features use."""
from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Callable

import numpy as np

from compiler.autotune.host_timed import MIN_RUN_S, REPEATS
from compiler.autotune.measure import Result
from compiler.autotune.records import FORMAT

GPU_SPEC_DROP = ("oc_block", "pixel_tile", "pad_value", "in_block", "pixel_vectors", "row_tile", "dtype")
"""Conv2dSpec fields a cuda conv task's identity leaves out (the CPU layouts' knobs, and the dtype: float32)."""


def device_ident() -> dict:
    """The device records are keyed by: its name and architecture (``{"name": "emulate", ...}`` when emulated)."""
    from compiler.backend.cuda.device import get_device

    dev = get_device()
    return {"name": dev.name, "arch": dev.arch}


class DeviceTimed:
    """What the cuda tasks share: the kernel bound to seeded inputs on the device, its timing and its log line. A task
    gives ``kernel(knobs)``, ``inputs(knobs)``, ``out_shape()``, ``ident`` and ``rate(ns)``."""

    def bound_call(self, knobs) -> tuple[Callable[[], None], object]:
        """``(call, device)``: the kernel with ``knobs`` on its seeded inputs, uploaded once (pinned), its output
        kept on the device (a mirrored host buffer, as a model's arena), as a model calls it."""
        from compiler.backend.cuda.device import get_device
        from compiler.backend.cuda.mirror import mirror_host_buffer

        fn = self.kernel(knobs)
        args = self.inputs(knobs)
        fn.pin(*args)
        shape = self.out_shape_for(knobs)
        arena = np.empty(math.prod(shape) * 4, np.uint8)
        mirror_host_buffer(arena)
        out = arena.view(np.float32).reshape(shape)

        def call() -> None:
            fn(*args, out=out)
        call.keep = (fn, args, arena)  # type: ignore[attr-defined]  (alive while the call is)
        return call, get_device()

    def out_shape_for(self, knobs) -> tuple[int, ...]:
        """The kernel's output shape with ``knobs`` (``out_shape()`` unless the knobs change the layout)."""
        return self.out_shape()

    def measure_cost(self, knobs, repeats: int = REPEATS) -> int:
        """Median nanoseconds a call of the kernel with ``knobs`` (see the module docstring)."""
        call, dev = self.bound_call(knobs)
        return time_device_call(call, dev, repeats)

    def record_line(self, knobs, res: Result, tuner: str = "") -> str:
        """The JSON line of one trial (see the module docstring)."""
        result = None if res.cycles is None else {"ns": int(res.cycles), "gflops": round(self.rate(res.cycles), 4)}
        return json.dumps({"vta_tuning": FORMAT, "target": "cuda", "gpu": device_ident(), "task": self.ident,
                           "config": dataclasses.asdict(knobs), "result": result, "error": res.error,
                           "time": round(time.time(), 3), "seconds": round(res.seconds, 3), "tuner": tuner},
                          sort_keys=True)


def lg(x) -> float:
    return math.log2(max(float(x), 1.0))


def time_device_call(call: Callable[[], None], dev, repeats: int = REPEATS) -> int:
    """Median nanoseconds of ``call``'s device work on ``dev``'s own clock: after a warm-up call, one call's device
    operations are recorded and made again back to back (each launch's parameter block built once, as a replayed
    model run makes them), ``repeats`` runs of as many as last about
    :data:`~compiler.autotune.host_timed.MIN_RUN_S`, each run between two marks of the device's timer (CUDA events
    on a GPU; the emulated device's host clock). The host's per-call Python (argument checks, parameter blocks) is
    not counted: on a GPU it outlasts most kernels, so timing the calls on the host's clock would rank the host's
    overhead, not the kernels."""
    from compiler.backend.cuda.device import record_ops, replayable

    call()
    dev.synchronize()
    with record_ops(dev) as ops:
        call()
    dev.synchronize()
    if not ops:
        raise ValueError("time_device_call: the call made no device operations (nothing to time on the device)")
    again = [replayable(dev, op) for op in ops]

    def timed(number: int, runs: int) -> list[float]:
        timer = dev.timer(runs + 1)
        timer.mark()
        for _ in range(runs):
            for _ in range(number):
                for op in again:
                    op()
            timer.mark()
        return [s / number for s in timer.seconds()]

    once = timed(1, 1)[0]
    number = max(1, min(1000, int(MIN_RUN_S / max(once, 1e-7))))
    return max(1, int(round(float(np.median(timed(number, repeats))) * 1e9)))
