"""Applying a tuning log to a build: the best valid record per task, the analytic choice elsewhere (warned)."""
from __future__ import annotations

import warnings
from pathlib import Path

from compiler.autotune.records import TuningLogWarning, fastest_per_task, load_records
from compiler.autotune.space import ConvSpace
from compiler.autotune.task import Task, extract_tasks
from compiler.topi.knobs import ConvKnobs


def tuned_knobs(tasks: list[Task], path: str | Path, cfg) -> dict[str, ConvKnobs]:
    """Task key -> knobs of its fastest valid record in the log at ``path``.

    Warns (:class:`TuningLogWarning`, naming ``FILE:LINE``; lines skipped for the same reason in one warning) for
    bad lines, records of tasks not in ``tasks``, records whose knobs the task cannot use, and tasks that no record
    covers."""
    spaces: dict[str, ConvSpace] = {}
    rows = [(r.task_key, r.knobs, r.cycles, r.where, r.task["shape"]) for r in load_records(path, cfg)
            if r.cycles is not None]
    return fastest_per_task(tasks, rows, path, lambda t, k: spaces.setdefault(t.key, ConvSpace(t)).reject(k),
                            "the analytic choice")


def apply_tuning_log(backend, compiled, path: str | Path) -> dict[str, ConvKnobs]:
    """Make ``backend`` (the sim backend) compile the tasks of ``compiled`` with the log's best knobs."""
    if not callable(getattr(backend, "conv2d_problem", None)) or not hasattr(backend, "tuned"):
        warnings.warn(f"backend {type(backend).__name__} has no tunable kernels; tuning log {path} ignored",
                      TuningLogWarning, stacklevel=2)
        return {}
    cfg = backend.config
    try:
        tasks = extract_tasks(compiled, backend)
    except (ValueError, KeyError) as exc:  # a graph the extractor cannot read: build as if untuned
        warnings.warn(f"tuning log {path} ignored: the model's accelerator tasks could not be read ({exc})",
                      TuningLogWarning, stacklevel=2)
        return {}
    chosen = tuned_knobs(tasks, path, cfg)

    def lookup(cs, bias, rq) -> ConvKnobs | None:
        return chosen.get(Task(cfg, cs, bias, rq).key)
    backend.tuned = lookup
    return chosen
