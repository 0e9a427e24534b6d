"""Tuning every task of a network in turn, with progress lines and (for the XGB tuner) model transfer."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, TextIO

from compiler.autotune.records import TuningLog, gops
from compiler.autotune.task import Task
from compiler.autotune.tuners import GridTuner, RandomTuner, Tuner
from compiler.topi.knobs import ConvKnobs

TUNERS = ("xgb", "random", "grid")


def analytic_knobs(task: Task) -> ConvKnobs:
    """The knobs a build picks without a log (the operator library's analytic chooser)."""
    from compiler.topi.knobs import choose_conv_knobs

    n_consts, n_alu = task.epilogue_size()
    return choose_conv_knobs(task.cfg, task.shape, n_consts, n_alu)


def default_knobs(task: Task) -> ConvKnobs:
    """The knobs a build without a log compiles ``task`` with on the ``sim`` backend (the fastest of its best
    analytic tilings by the timing contract; see ``SimAccelBackend.default_knobs``)."""
    if hasattr(task, "default_knobs"):  # an llvm task: the library's schedule knobs
        return task.default_knobs()
    from compiler.backend.accel.backend import SimAccelBackend

    n_consts, n_alu = task.epilogue_size()
    return SimAccelBackend(task.cfg).default_knobs(task.shape, task.bias, task.requant, n_consts, n_alu)


def make_tuner(kind: str, task: Task, seed: int = 0, transfer=None, space=None, **xgb_options) -> Tuner:
    """A tuner by name: ``xgb`` (model-based, needs xgboost; ``xgb_options`` go to
    :class:`~compiler.autotune.xgb_tuner.XGBTuner`), ``random`` or ``grid``; ``space``: a
    :class:`~compiler.autotune.space.ConvSpace` of ``task`` to share (and its lowering cache)."""
    if kind == "xgb":
        from compiler.autotune.xgb_tuner import XGBTuner

        return XGBTuner(task, space, seed=seed, transfer=transfer, **xgb_options)
    if kind == "random":
        return RandomTuner(task, space, seed=seed)
    if kind == "grid":
        return GridTuner(task, space, seed=seed)
    raise ValueError(f"unknown tuner {kind!r}; choose one of {list(TUNERS)}")


@dataclass
class TaskResult:
    task: Task
    knobs: ConvKnobs | None
    cycles: int | None
    trials: int
    rejected: dict = field(default_factory=dict)
    invalid_measured: int = 0


def progress_printer(stream: TextIO = sys.stdout) -> Callable:
    """A callback printing ``[Task i/n] Current/Best: x/y GOPS | Progress: (k/N) | t s`` after each batch."""
    def cb(i: int, n: int, n_trial: int, tuner: Tuner, results, seconds: float) -> None:
        ok = [r.cycles for r in results if r.cycles is not None]
        rate = tuner.task.rate if hasattr(tuner.task, "rate") else (lambda c: gops(tuner.task, c))
        cur = rate(min(ok)) if ok else 0.0
        best = rate(tuner.best_cycles) if tuner.best_cycles else 0.0
        stream.write(f"[Task {i:2d}/{n:2d}] Current/Best: {cur:7.2f}/{best:7.2f} GOPS | "
                     f"Progress: ({len(tuner.history)}/{n_trial}) | {seconds:.2f} s\n")
        stream.flush()
    return cb


def tune_tasks(tasks: list[Task], measure, kind: str = "xgb", n_trial: int = 32, batch_size: int = 8,
               log: str | None = None, seed: int = 0, callback: Callable | None = None,
               include_default: bool = True) -> list[TaskResult]:
    """Tune each task with a fresh tuner of ``kind`` (XGB tuners share their data forward among the tasks whose
    spaces share a feature family: ``TransferData.family``); log every trial.

    ``include_default``: the default build's knobs (:func:`default_knobs`) are measured first (one of the
    ``n_trial``), so the log's best for a task is never slower than the default (a build with the log also
    times its choice against the default in each layer's context and keeps the faster)."""
    transfer = None
    if kind == "xgb":
        from compiler.autotune.xgb_tuner import TransferData

        transfer = TransferData()  # one family per space's transfer_family (TransferData.family)
    out = []
    tlog = TuningLog(log)
    for i, task in enumerate(tasks, 1):
        tuner = make_tuner(kind, task, seed, transfer)
        if include_default:
            tuner.seed_points([default_knobs(task)])
        cb = None if callback is None else \
            (lambda t, batch, results, seconds, i=i: callback(i, len(tasks), n_trial, t, results, seconds))
        tuner.tune(n_trial, measure, batch_size, tlog, cb)
        if hasattr(tuner, "finish"):
            tuner.finish()
        out.append(TaskResult(task, tuner.best_knobs, tuner.best_cycles, len(tuner.history), dict(tuner.rejected),
                              tuner.invalid_measured))
    return out
