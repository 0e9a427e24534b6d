"""A tuning log on the llvm (and cuda) target, confirmed in the model: a logged schedule is kept only where its
layers run faster in the whole model than with the default schedule.

:func:`compiler.autotune.llvm_conv.logged_faster` times each task's logged knobs against the default alone (hot
and after a cache sweep). Alone is not the model: ResNet-18's 28x28 Winograd convs with ``parallel='outer'`` ran
12 % faster alone (0.27 vs 0.31 ms) but 9 % slower between the other layers (0.36 vs 0.33 ms; Zen 5, two
threads), and an 8-trial log made the network 5 % slower. So the build runs the model with and without the kept
knobs, alternating, on seeded inputs, and keeps a task's knobs only where the sum of its layers' fastest times
beats the default's by :data:`~compiler.autotune.llvm_conv.MIN_GAIN`.

The tuner's search times kernels alone, so its fastest setting is often not the model's: ResNet-18's 56x56 Winograd
convs ran 20-75 % slower in the model with each of the 8 fastest settings a 24-trial search found alone (Zen 5,
two threads). :func:`compiler.executor.llvm_rank.rank_in_model` (the last step of ``vta tune --target llvm``)
therefore runs each task's few fastest logged settings in the model and logs the one its layers ran fastest with,
or the default; the build then starts from that choice.

The cuda target's build confirms its log the same way, each layer timed on the device (CUDA events in replayed
runs): on an H200, a ResNet-18 log whose kept 1x1/2 conv had timed faster alone ran it 13 -> 32 us in the model
and the network 3 % slower (its trials were then timed on the host's clock; 2026-11-30).
"""
from __future__ import annotations

import warnings

import numpy as np

from compiler.autotune.records import TuningLogWarning
from compiler.executor.module import Module

ROUNDS = 12  # alternating whole-model runs per side; a layer's time is its minimum over them


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
    """Each module's per-layer minimum ms over ``rounds`` runs, the modules run in turn each round (one warm-up).
    A cuda module's layers are timed on the device (``Module.device_timing``: CUDA events in its replayed runs,
    which start after a few warm-up runs; a run that was not replayed is left out, its times being the host's to
    launch); one that is never replayed (a layer runs on the host) keeps the host's time per layer, whose sum is
    still the run's."""
    on_device = []
    for m in mods:
        m.run(feeds)
        if getattr(m.cpu, "target", None) == "cuda":
            m.time_on_device()  # device timing on, until a run is replayed
        on_device.append(m.timed_on_device)
    # per module: [the layers' minima over runs timed on the device, over the others]
    best: list[list[dict[str, float]]] = [[{}, {}] for _ in mods]
    try:
        for _ in range(rounds):
            for m, acc in zip(mods, best):
                m.run(feeds)
                into = acc[0] if m.timed_on_device else acc[1]
                for r in m.profile():
                    into[r["name"]] = min(into.get(r["name"], np.inf), r["time_ms"])
    finally:
        for m in mods:
            m.device_timing = False
    # a cuda module's runs that were not replayed hold the host's times to launch: left out where it has others
    return [dev if device and dev else host for (dev, host), device in zip(best, on_device)]


def _target_tasks(target: str):
    """The autotune module of ``target``'s tasks (``use_knobs``, ``node_task``): llvm's or cuda's."""
    if target == "cuda":
        from compiler.autotune import cuda_conv
        return cuda_conv
    from compiler.autotune import llvm_conv
    return llvm_conv


def cpu_with_knobs(graph, knobs: dict, target: str = "llvm"):
    """A prepared ``TargetCpuBackend`` of ``target`` for ``graph`` whose tasks with a key in ``knobs`` compile with
    those knobs (the others with the default)."""
    from compiler.backend.plans.backend import TargetCpuBackend

    cpu = TargetCpuBackend(target)
    _target_tasks(target).use_knobs(cpu, knobs, graph)
    cpu.prepare(graph)
    return cpu


def task_layers(graph, keys=None, target: str = "llvm") -> dict[str, list[str]]:
    """Task key -> the names of ``graph``'s nodes of that ``target`` task (only the keys in ``keys`` if given)."""
    node_task = _target_tasks(target).node_task
    layers: dict[str, list[str]] = {}
    for n in graph.nodes:
        t = node_task(n, [graph.tensors.get(i) if i else None for i in n.inputs], graph.constants)
        if t is not None and (keys is None or t.key in keys):
            layers.setdefault(t.key, []).append(n.name)
    return layers


def confirm_in_model(compiled, accel, kept: dict, progress, target: str = "llvm") -> tuple[Module, dict]:
    """The module with ``kept`` (task key -> knobs, from ``logged_faster``) narrowed to the tasks whose layers run
    faster in the model, kept only where the whole model (the sum of its layers' minima) then runs faster than
    without the log (else the untuned module, nothing kept); ``target``: llvm or cuda (whose tasks and backends).
    Returns ``(module, kept)``."""
    from compiler.autotune.llvm_conv import MIN_GAIN

    g = compiled.graph
    layers = task_layers(g, kept, target)

    def make_cpu(knobs: dict):
        return cpu_with_knobs(g, knobs, target)
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
    if not confirmed:
        return base, confirmed
    if len(confirmed) < len(kept):
        tuned = Module(compiled, accel, make_cpu(confirmed), progress)
        t_base, t_tuned = layer_times([base, tuned], seeded_feeds(g))
    if sum(t_tuned.values()) >= sum(t_base.values()):  # faster layers, a slower model (their neighbours paid)
        return base, {}
    return tuned, confirmed
