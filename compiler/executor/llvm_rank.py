"""Ranking a tuning log's llvm settings in the whole model (the last step of ``vta tune --target llvm``).

The tuner times kernels alone; :func:`rank_in_model` runs each task's fastest logged settings in the model and logs
the one its layers ran fastest with, or the default (see :mod:`compiler.executor.llvm_log`, whose in-model timing
it uses; here because it builds models, above :mod:`compiler.executor.build`).
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

from compiler.autotune.measure import Result
from compiler.autotune.records import TuningLogWarning
from compiler.executor import llvm_log
from compiler.executor.build import build
from compiler.executor.module import Module

CANDIDATES = 4  # each task's fastest logged settings run in the model


def rank_in_model(model, path, *, input_shapes=None, candidates: int = CANDIDATES, rounds: int = llvm_log.ROUNDS,
                  feeds: dict | None = None, base: Module | None = None) -> dict[str, object]:
    """Run each conv task's ``candidates`` fastest logged settings (the log at ``path``: timed alone, the default
    left out) in ``model`` on the llvm target and append a task's in-model choice to the log: the setting whose
    layers (the sum of their minima over ``rounds`` alternating runs) beat the default module's by
    :data:`~compiler.autotune.llvm_conv.MIN_GAIN`, the fastest such, else the default. Module ``j`` runs every
    task's ``j``-th setting, so a task is timed next to other tasks' candidates; the build confirms the final
    combination (:func:`~compiler.executor.llvm_log.confirm_in_model`). ``feeds``: the inputs to run (default
    :func:`~compiler.executor.llvm_log.seeded_feeds`); ``base``: ``model`` already built for llvm without a log
    (built here when None).

    Returns task key -> the chosen knobs, or None where the default stayed (tasks with no logged setting other
    than the default are left out and get no line); ``{}`` with a ``TuningLogWarning`` where the model cannot run
    on the inputs."""
    from compiler.autotune.llvm_conv import MIN_GAIN, graph_tasks, load_llvm_log

    if int(candidates) < 1:
        raise ValueError(f"candidates (settings run in the model per task) must be >= 1, got {candidates}")
    if int(rounds) < 1:
        raise ValueError(f"rounds (alternating model runs) must be >= 1, got {rounds}")
    if base is None:
        base = build(model, target="llvm", input_shapes=input_shapes, progress=False)
    compiled, g = base.compiled, base.compiled.graph
    tasks = {t.key: t for t in graph_tasks(g)}
    spaces = {k: t.make_space() for k, t in tasks.items()}
    cands: dict[str, list] = {}
    for ident, knobs, _ns, _where in sorted(load_llvm_log(path).records, key=lambda r: r[2]):
        t = tasks.get(json.dumps(ident, sort_keys=True))
        if t is None or knobs == t.default_knobs() or spaces[t.key].reject(knobs):
            continue
        mine = cands.setdefault(t.key, [])
        if knobs not in mine and len(mine) < int(candidates):
            mine.append(knobs)
    if not cands:
        return {}
    depth = max(map(len, cands.values()))
    mods = [base] + [Module(compiled, base.accel,
                            llvm_log.cpu_with_knobs(g, {k: v[j] for k, v in cands.items() if len(v) > j}), False)
                     for j in range(depth)]
    try:
        times = llvm_log.layer_times(mods, feeds if feeds is not None else llvm_log.seeded_feeds(g), int(rounds))
    except Exception as e:  # noqa: BLE001 - inputs this model cannot take: rank nothing, the build times alone
        warnings.warn(f"tuning log: the model could not run on {'the given' if feeds is not None else 'seeded'} "
                      f"inputs to rank the logged settings ({type(e).__name__}: {e}); no in-model choice logged",
                      TuningLogWarning, stacklevel=2)
        return {}
    chosen: dict[str, object] = {}
    lines = []
    for key, names in llvm_log.task_layers(g, cands).items():
        ms = [sum(t[n] for n in names) for t in times[:len(cands[key]) + 1]]
        best = min(range(1, len(ms)), key=ms.__getitem__)
        pick = cands[key][best - 1] if ms[best] <= (1.0 - MIN_GAIN) * ms[0] else None
        chosen[key] = pick
        figures = {"layers": names, "ms": round(ms[best] if pick else ms[0], 4), "default_ms": round(ms[0], 4),
                   "candidates_ms": [round(v, 4) for v in ms[1:]], "rounds": int(rounds)}
        lines.append(tasks[key].record_line(pick or tasks[key].default_knobs(), Result(None, None, 0.0), "in_model",
                                            figures))
    with Path(path).open("a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return chosen
