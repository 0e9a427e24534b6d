"""A tuning log on the llvm target, confirmed in the model: a logged conv schedule is kept only where its layers
run faster in the whole model than with the default schedule.

:func:`compiler.autotune.llvm_conv.logged_faster` times each task's logged knobs against the default alone (hot
and after a cache sweep). Alone is not the model: ResNet-18's 28x28 Winograd convs with ``parallel='outer'`` ran
12 % faster alone (0.27 vs 0.31 ms) but 9 % slower between the other layers (0.36 vs 0.33 ms; Zen 5, two
threads), and an 8-trial log made the network 5 % slower. So the build runs the model with and without the kept
knobs, alternating, on seeded inputs, and keeps a task's knobs only where the sum of its layers' fastest times
beats the default's by :data:`~compiler.autotune.llvm_conv.MIN_GAIN`.

The tuner's search times kernels alone, so its fastest setting is often not the model's: ResNet-18's 56x56 Winograd
convs ran 20-75 % slower in the model with each of the 8 fastest settings a 24-trial search found alone (Zen 5,
two threads). :func:`rank_in_model` (the last step of ``vta tune --target llvm``) therefore runs each task's few
fastest logged settings in the model and logs the one its layers ran fastest with, or the default; the build then
starts from that choice.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from compiler.autotune.measure import Result
from compiler.autotune.records import TuningLogWarning
from compiler.executor.module import Module

ROUNDS = 12  # alternating whole-model runs per side; a layer's time is its minimum over them
CANDIDATES = 4  # rank_in_model: each task's fastest logged settings run in the model


def seeded_feeds(graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for ``graph``'s non-constant inputs: standard normal floats, zeros for integer and bool inputs."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        if name in graph.constants:
            continue
        info = graph.tensors[name]
        if info.dtype.kind == "f":
            feeds[name] = rng.standard_normal(info.shape).astype(info.dtype)
        else:
            feeds[name] = np.zeros(info.shape, info.dtype)
    return feeds


def layer_times(mods: list[Module], feeds: dict, rounds: int = ROUNDS) -> list[dict[str, float]]:
    """Each module's per-layer minimum ms over ``rounds`` runs, the modules run in turn each round (one warm-up)."""
    for m in mods:
        m.run(feeds)
    best: list[dict[str, float]] = [{} for _ in mods]
    for _ in range(rounds):
        for m, acc in zip(mods, best):
            m.run(feeds)
            for r in m.profile():
                acc[r["name"]] = min(acc.get(r["name"], np.inf), r["time_ms"])
    return best


def cpu_with_knobs(graph, knobs: dict):
    """A prepared llvm ``TargetCpuBackend`` for ``graph`` whose convs with a task key in ``knobs`` compile with those
    knobs (the others with the default)."""
    from compiler.autotune.llvm_conv import use_knobs
    from compiler.backend.plans.backend import TargetCpuBackend

    cpu = TargetCpuBackend("llvm")
    use_knobs(cpu, knobs)
    cpu.prepare(graph)
    return cpu


def task_layers(graph, keys=None) -> dict[str, list[str]]:
    """Task key -> the names of ``graph``'s conv nodes of that llvm task (only the keys in ``keys`` if given)."""
    from compiler.autotune.llvm_conv import task_of_node

    layers: dict[str, list[str]] = {}
    for n in graph.nodes:
        t = task_of_node(n, [graph.tensors.get(i) if i else None for i in n.inputs])
        if t is not None and (keys is None or t.key in keys):
            layers.setdefault(t.key, []).append(n.name)
    return layers


def confirm_in_model(compiled, accel, make_cpu, kept: dict, progress) -> tuple[Module, dict]:
    """The module with ``kept`` (task key -> knobs, from ``logged_faster``) narrowed to the tasks whose layers run
    faster in the model; ``make_cpu(knobs_by_key)`` returns a prepared CPU backend compiling those knobs.
    Returns ``(module, kept)``."""
    from compiler.autotune.llvm_conv import MIN_GAIN

    g = compiled.graph
    layers = task_layers(g, kept)
    tuned = Module(compiled, accel, make_cpu(kept), progress)
    if not layers:
        return tuned, kept
    base = Module(compiled, accel, make_cpu({}), progress)
    try:
        t_base, t_tuned = layer_times([base, tuned], seeded_feeds(g))
    except Exception as e:  # noqa: BLE001 - seeded inputs this model cannot take: keep what timed faster alone
        warnings.warn(f"tuning log: the model could not run on seeded inputs to confirm the logged knobs "
                      f"({type(e).__name__}: {e}); kept the {len(kept)} that timed faster alone", TuningLogWarning,
                      stacklevel=3)
        return tuned, kept
    confirmed = {key: kept[key] for key, names in layers.items()
                 if sum(t_tuned[n] for n in names) <= (1.0 - MIN_GAIN) * sum(t_base[n] for n in names)}
    if len(confirmed) == len(kept):
        return tuned, kept
    return Module(compiled, accel, make_cpu(confirmed), progress), confirmed


def rank_in_model(model, path, *, input_shapes=None, candidates: int = CANDIDATES, rounds: int = ROUNDS,
                  feeds: dict | None = None) -> dict[str, object]:
    """Run each conv task's ``candidates`` fastest logged settings (the log at ``path``: timed alone, the default
    left out) in ``model`` on the llvm target and append a task's in-model choice to the log: the setting whose
    layers (the sum of their minima over ``rounds`` alternating runs) beat the default module's by
    :data:`~compiler.autotune.llvm_conv.MIN_GAIN`, the fastest such, else the default. Module ``j`` runs every
    task's ``j``-th setting, so a task is timed next to other tasks' candidates; the build confirms the final
    combination (:func:`confirm_in_model`). ``feeds``: the inputs to run (default :func:`seeded_feeds`).

    Returns task key -> the chosen knobs, or None where the default stayed (tasks with no logged setting other
    than the default are left out and get no line); ``{}`` with a ``TuningLogWarning`` where the model cannot run
    on the inputs."""
    from compiler.autotune.llvm_conv import MIN_GAIN, graph_tasks, load_llvm_log
    from compiler.executor.build import build

    if int(candidates) < 1:
        raise ValueError(f"candidates (settings run in the model per task) must be >= 1, got {candidates}")
    if int(rounds) < 1:
        raise ValueError(f"rounds (alternating model runs) must be >= 1, got {rounds}")
    base = build(model, target="llvm", input_shapes=input_shapes, progress=False)
    compiled, g = base.compiled, base.compiled.graph
    tasks = {t.key: t for t in graph_tasks(g)}
    cands: dict[str, list] = {}
    for ident, knobs, _ns, _where in sorted(load_llvm_log(path).records, key=lambda r: r[2]):
        t = tasks.get(json.dumps(ident, sort_keys=True))
        if t is None or knobs == t.default_knobs() or t.make_space().reject(knobs):
            continue
        mine = cands.setdefault(t.key, [])
        if knobs not in mine and len(mine) < int(candidates):
            mine.append(knobs)
    if not cands:
        return {}
    depth = max(map(len, cands.values()))
    mods = [base] + [Module(compiled, base.accel, cpu_with_knobs(g, {k: v[j] for k, v in cands.items() if len(v) > j}),
                            False) for j in range(depth)]
    try:
        times = layer_times(mods, feeds if feeds is not None else seeded_feeds(g), int(rounds))
    except Exception as e:  # noqa: BLE001 - inputs this model cannot take: rank nothing, the build times alone
        warnings.warn(f"tuning log: the model could not run on {'the given' if feeds is not None else 'seeded'} "
                      f"inputs to rank the logged settings ({type(e).__name__}: {e}); no in-model choice logged",
                      TuningLogWarning, stacklevel=2)
        return {}
    chosen: dict[str, object] = {}
    lines = []
    for key, names in task_layers(g, cands).items():
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
