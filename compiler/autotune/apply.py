"""Applying a tuning log to a build: the best valid record per task, the analytic choice elsewhere (warned)."""
from __future__ import annotations

import warnings
from pathlib import Path

from compiler.autotune.records import SkippedLines, TuningLogWarning, load_records
from compiler.autotune.space import ConvSpace
from compiler.autotune.task import Task, extract_tasks
from compiler.topi.knobs import ConvKnobs


def tuned_knobs(tasks: list[Task], path: str | Path, cfg) -> dict[str, ConvKnobs]:
    """Task key -> knobs of its fastest valid record in the log at ``path``.

    Warns (:class:`TuningLogWarning`, naming ``FILE:LINE``; lines skipped for the same reason in one warning) for
    bad lines, records of tasks not in ``tasks``, records whose knobs the task cannot use, and tasks that no record
    covers."""
    records = load_records(path, cfg)
    by_key = {t.key: t for t in tasks}
    spaces: dict[str, ConvSpace] = {}
    chosen: dict[str, ConvKnobs] = {}
    skipped = SkippedLines()
    for r in sorted((r for r in records if r.cycles is not None), key=lambda r: r.cycles):
        task = by_key.get(r.task_key)
        if task is None:
            skipped.add(r.where, "record for a task that is not in this model", f" ({r.task['shape']})")
            continue
        if task.key in chosen:
            continue
        sp = spaces.setdefault(task.key, ConvSpace(task))
        why = sp.reject(r.knobs)
        if why:
            skipped.add(r.where, f"knobs {r.knobs} cannot be used for {task.describe()} ({why})")
            continue
        chosen[task.key] = r.knobs
    skipped.warn(stacklevel=3)
    missing = [t for t in tasks if t.key not in chosen]
    if missing:
        warnings.warn(f"tuning log {path}: no usable record for {len(missing)} of {len(tasks)} task(s) "
                      f"({'; '.join(t.describe() for t in missing[:4])}{'; ...' if len(missing) > 4 else ''}); "
                      f"they use the analytic choice", TuningLogWarning, stacklevel=2)
    return chosen


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
