"""The sweep: validate the space, time the model on every point, synthesize only what can be on the front.

Stages, cheap before expensive:

1. **Prune**: every point of the space goes through the config validator (and the caller's ``check``, e.g. a
   board's); a rejected point is recorded with its reason and costs nothing more.
2. **Latency** of every valid point (:func:`compiler.dse.evaluate.latency_record`, seconds each), the slowest
   first (:func:`compiler.dse.evaluate.latency_cost`), so the last evaluations to finish are short ones.
3. **Resources**: the analytic estimate of every point; a point dominated on (latency, estimated utilization)
   by another point cannot be on the front and is not synthesized, nor is one whose estimate exceeds the device
   by more than :data:`OVER_CAPACITY`; the rest are synthesized (minutes each) through the caller's
   :class:`ResourceModel` (yosys in ``hw.synth``).

Each evaluation is a pure function run through a :class:`compiler.scaleout.Runner` (a loop, a process pool or Ray
tasks); each result is appended to the JSON-lines log under its design hash as it arrives, so a rerun (or a run
of another space sharing points) skips what is done, and synthesis results are shared through ``synth_cache``.

The front is over (latency_ms, utilization): utilization is the largest of LUT, DSP and RAMB36 as a fraction of
the device's capacity, so "fits" is utilization <= 1 and each front point is the fastest design within its budget.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from compiler.dse.evaluate import (DEFAULT_TUNE, estimate_resources, latency_cost, latency_key, latency_record,
                                   model_sha)
from compiler.dse.log import ResultLog
from compiler.dse.space import Space
from compiler.scaleout import LoopRunner, Runner

#: Resources the front compares (yosys names them LUT, DSP, BRAM; reported as RAMB36).
RESOURCES = ("LUT", "DSP", "RAMB36")
#: A point whose estimate exceeds the device by this factor on any resource is not synthesized.
OVER_CAPACITY = 1.25


@dataclass(frozen=True)
class ResourceModel:
    """How a sweep gets resources (passed in, so ``compiler`` does not import ``hw``):

    ``device``: the capacity entry's name; ``capacity``: {LUT, DSP, RAMB36} of the device; ``key(fields, device)``:
    the design hash a synthesis is cached under; ``evaluate(fields, device)``: the pure synthesis function
    (a record with LUT, DSP, RAMB36, or ``error``)."""

    device: str
    capacity: dict[str, int]
    key: Callable[[dict, str], str]
    evaluate: Callable[[dict, str], dict]


@dataclass(frozen=True)
class TimingModel:
    """How a sweep gets a synthesized design's Fmax (passed in, like :class:`ResourceModel`; ``compiler`` imports no
    ``fpga``). A timing record carries ``fmax_mhz`` (None when there is none), ``error`` and ``critical_path``.

    ``method``: one line saying how; either ``from_synthesis(synth_record)``: the record from the synthesis
    record, when the resource model's tool run timed the netlist too (Xilinx: yosys ``sta`` in the same run, so
    no second yosys run), or ``key(fields)`` and ``evaluate(fields)``: a timing run of its own per point (ECP5:
    nextpnr place and route), cached in the synthesis cache under ``key``."""

    method: str
    from_synthesis: Callable[[dict], dict] | None = None
    key: Callable[[dict], str] | None = None
    evaluate: Callable[[dict], dict] | None = None

    def __post_init__(self) -> None:
        if (self.from_synthesis is None) == (self.evaluate is None or self.key is None):
            raise ValueError("a TimingModel takes either from_synthesis or both key and evaluate")


@dataclass
class DseResult:
    """Everything a sweep found: one row per valid point, the pruned points, the front and the figures."""

    rows: list[dict]
    pruned: list[dict]
    front: list[dict]
    stats: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {**self.stats, "pareto": self.front,
                "pruned": [{"params": p["params"], "reason": p["reason"]} for p in self.pruned]}


def utilization(res: dict, capacity: dict[str, int]) -> float:
    """Largest fraction of the device any of :data:`RESOURCES` takes."""
    return max(res[k] / capacity[k] for k in RESOURCES)


def dominated(a: tuple, b: tuple) -> bool:
    """``a`` is dominated by ``b`` (minimising every coordinate): b <= a everywhere and b < a somewhere."""
    return all(y <= x for x, y in zip(a, b)) and any(y < x for x, y in zip(a, b))


def pareto(items: list, objectives: Callable[[Any], tuple]) -> list:
    """The items no other item dominates, in input order."""
    objs = [objectives(i) for i in items]
    return [it for it, o in zip(items, objs) if not any(dominated(o, p) for p in objs)]


def _evaluate(runner: Runner, log: ResultLog, fn: Callable, todo: list[tuple[str, dict, dict]], shared: tuple,
              desc: str, progress: bool) -> None:
    """Run ``fn(fields, *shared)`` for each (key, fields, extra) not yet in ``log`` and append each record."""
    from tqdm import tqdm

    log.refresh()  # a shared cache: what other sweeps added since
    todo = [t for t in todo if t[0] not in log]
    if not todo:
        return
    with tqdm(total=len(todo), desc=desc, disable=not progress, leave=False) as bar:
        for i, rec in runner.imap(fn, [t[1] for t in todo], shared):
            key, _, extra = todo[i]
            if key not in log:  # one record per key, whatever the runner retried
                log.append({"key": key, **extra, **rec})
            bar.update()


def run_sweep(model: str | Path | bytes, space: Space, out_dir: str | Path, resources: ResourceModel | None = None,
              runner: Runner | None = None, *, synth: bool = True, synth_cache: str | Path | None = None,
              check: Callable[[dict], None] | None = None, progress: bool = False,
              tune: int = DEFAULT_TUNE, timing: "TimingModel | None" = None) -> DseResult:
    """Sweep ``space`` for the int8 ONNX ``model`` (path or bytes); results go to ``out_dir/dse.jsonl`` and the
    synthesis cache (``synth_cache``, default ``out_dir/synth-cache.jsonl``). ``check(fields)`` may reject a
    point by raising ValueError (e.g. a board's constraint). ``synth=False`` runs no synthesis: points
    whose synthesis is cached use it, the others stay out of the front. ``tune``:
    conv tilings timed per layer (:func:`compiler.dse.evaluate.latency_record`). ``timing``: how each synthesized
    design's Fmax is found (:class:`TimingModel`); its latency is then at min(clock, Fmax) (:func:`apply_fmax`)."""
    if not isinstance(tune, int) or isinstance(tune, bool) or tune < 1:
        raise ValueError(f"tune must be an integer >= 1, got {tune!r}")
    runner = runner or LoopRunner()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = model if isinstance(model, bytes) else Path(model).read_bytes()
    mhash = model_sha(data)
    log = ResultLog(out / "dse.jsonl")
    cache = ResultLog(Path(synth_cache) if synth_cache else out / "synth-cache.jsonl")
    stats: dict[str, Any] = {"points_total": space.size}

    # 1. prune: the config validator did it while expanding; the caller's check here
    pruned = list(space.pruned)
    points = []
    for p in space.valid:
        try:
            if check is not None:
                check(p.fields)
        except ValueError as exc:
            pruned.append({"index": p.index, "params": p.params, "reason": str(exc)})
            continue
        points.append(p)
    if not points:
        raise ValueError(f"the space has no valid point: {len(pruned)} rejected, e.g. {pruned[0]['reason']}")

    # 2. latency of every point
    t0 = time.perf_counter()
    lkeys = {p.index: latency_key(p.fields, mhash, tune) for p in points}
    slowest_first = sorted(points, key=lambda p: latency_cost(p.fields))  # an even spread over the workers
    _evaluate(runner, log, latency_record, [(lkeys[p.index], p.fields, {"stage": "latency", "tune": tune})
                                            for p in slowest_first], (data, tune), "latency", progress)
    stats["latency_stage_s"] = round(time.perf_counter() - t0, 2)
    rows = []
    for p in points:
        lat = log.get(lkeys[p.index])
        rows.append({"index": p.index, "params": p.params, "fields": p.fields, "latency_key": lkeys[p.index],
                     "cycles": lat["cycles"], "latency_ms": lat["latency_ms"], "latency_error": lat["error"],
                     "estimate": estimate_resources(p.fields)})

    # 3. resources and Fmax: skip what cannot be on the front, synthesize (and time) the rest, in rounds: a point
    # skipped because a candidate was faster is reconsidered once that candidate's Fmax is known
    if resources is not None:
        cap = resources.capacity
        ok = [r for r in rows if r["latency_error"] is None]
        for r in rows:
            r["estimate_utilization"] = round(utilization(r["estimate"], cap), 4)
            if r["latency_error"] is not None:
                r["synth"] = "skipped: no latency (" + r["latency_error"] + ")"
            elif r["estimate_utilization"] > OVER_CAPACITY:
                r["synth"] = f"skipped: estimate {r['estimate_utilization']:.0%} of {resources.device}"
        t0 = time.perf_counter()
        done: set[int] = set()
        stats["synth_rounds"] = 0
        while True:
            for r in ok:
                if r["index"] in done or str(r.get("synth", "")).startswith("skipped: estimate"):
                    continue
                r["synth"] = ("skipped: dominated on latency and estimated resources"
                              if any(dominated((r["latency_ms"], r["estimate_utilization"]),
                                               (q["latency_ms"], q["estimate_utilization"])) for q in ok if q is not r)
                              else "synthesized")
            todo = [r for r in ok if r["synth"] == "synthesized" and r["index"] not in done]
            if not todo:
                break
            stats["synth_rounds"] += 1
            done.update(r["index"] for r in todo)
            _synthesize(todo, resources, timing, runner, cache, synth, progress)
        stats["synth_stage_s"] = round(time.perf_counter() - t0, 2)
        stats.update(device=resources.device, capacity=dict(cap))
        if timing is not None:
            stats["timing_method"] = timing.method
    measured = [r for r in rows if r.get("resources")]
    front = pareto(measured, lambda r: (r["latency_ms"], r["utilization"]))
    front.sort(key=lambda r: r["latency_ms"])
    stats.update(points_evaluated=len(rows), points_pruned_invalid=len(pruned),
                 latency_errors=sum(r["latency_error"] is not None for r in rows),
                 synth_skipped_dominated=sum(str(r.get("synth", "")).startswith("skipped: dominated") for r in rows),
                 synth_skipped_over_capacity=sum(" of " in str(r.get("synth", "")) for r in rows),
                 synthesized=len(measured), synth_missing=sum(str(r.get("synth", "")).startswith("not synth")
                                                              for r in rows), model_sha=mhash)
    fitting = [r for r in measured if r["fits"]]
    if fitting:
        best = min(fitting, key=lambda r: r["latency_ms"])
        stats["best_fitting"] = _front_row(best)
    result = DseResult(rows, pruned, [_front_row(r) for r in front], stats)
    (out / "front.json").write_text(json.dumps(result.summary(), indent=1) + "\n")
    return result


def _synthesize(todo: list[dict], resources: ResourceModel, timing: "TimingModel | None", runner: Runner,
                cache: ResultLog, synth: bool, progress: bool) -> None:
    """Synthesize (and time) the rows ``todo``; set their resources, utilization, Fmax and achievable latency."""
    for r in todo:
        r["synth_key"] = resources.key(r["fields"], resources.device)
    if synth:
        uniq = {r["synth_key"]: r for r in todo}
        _evaluate(runner, cache, resources.evaluate,
                  [(k, r["fields"], {"stage": "synth", "device": resources.device}) for k, r in uniq.items()],
                  (resources.device,), "synthesis", progress)
    else:  # no yosys: what the cache already holds (a hit costs nothing), the rest is left out of the front
        cache.refresh()
        for r in todo:
            if r["synth_key"] not in cache:
                r["synth"] = "not synthesized (--no-synth, not in the cache)"
    have = [r for r in todo if r["synth_key"] in cache]
    for r in have:
        rec = cache.get(r["synth_key"])
        r["resources"] = None if rec["error"] else {k: rec[k] for k in RESOURCES}
        r["synth_error"] = rec["error"]
        r["synth_seconds"] = rec.get("seconds")
        if r["resources"]:
            r["utilization"] = round(utilization(r["resources"], resources.capacity), 4)
            r["fits"] = r["utilization"] <= 1.0
    timed = [r for r in have if r.get("resources")]
    if timing is None or not timed:
        return
    if timing.from_synthesis is not None:  # the synthesis run timed the netlist too (one yosys run)
        recs = {r["index"]: timing.from_synthesis(cache.get(r["synth_key"])) for r in timed}
    else:  # a timing run of its own per design (e.g. nextpnr), cached like synthesis
        for r in timed:
            r["timing_key"] = timing.key(r["fields"])
        if synth:
            uniq = {r["timing_key"]: r for r in timed}
            _evaluate(runner, cache, timing.evaluate, [(k, r["fields"], {"stage": "timing"}) for k, r in uniq.items()],
                      (), "timing", progress)
        else:
            cache.refresh()
        recs = {r["index"]: cache.get(r["timing_key"]) or {"fmax_mhz": None, "error": "not timed (--no-synth, not in "
                                                                                       "the cache)"} for r in timed}
    for r in timed:
        apply_fmax(r, recs[r["index"]])


def apply_fmax(row: dict, rec: dict) -> None:
    """Put a timing record's Fmax on a row: ``fmax_mhz``, ``meets`` (Fmax >= the point's clock), ``clock_run_mhz``
    (the clock it can run: min(clock, Fmax)) and ``latency_ms`` at that clock (``latency_ms_at_clock``: at the
    point's own clock). A record without an Fmax (``timing_error``) leaves the latency at the point's clock."""
    clock = float(row["fields"]["clock_mhz"])
    fmax = rec.get("fmax_mhz")
    row["timing_error"] = rec.get("error")
    row["critical_path"] = rec.get("critical_path")
    row["latency_ms_at_clock"] = round(row["cycles"] / (clock * 1e3), 6)
    if fmax is None:
        row.update(fmax_mhz=None, meets=None, clock_run_mhz=clock)
        return
    run = min(clock, float(fmax))
    row.update(fmax_mhz=float(fmax), meets=float(fmax) >= clock, clock_run_mhz=run,
               latency_ms=round(row["cycles"] / (run * 1e3), 6))


def _front_row(r: dict) -> dict:
    res = r.get("resources") or {}
    return {"index": r["index"], "params": r["params"], "latency_ms": r["latency_ms"], "cycles": r["cycles"],
            "LUT": res.get("LUT"), "DSP": res.get("DSP"), "RAMB36": res.get("RAMB36"),
            "utilization": r.get("utilization"), "fits": r.get("fits"), "clock_mhz": r["fields"].get("clock_mhz"),
            "fmax_mhz": r.get("fmax_mhz"), "meets": r.get("meets"), "latency_ms_at_clock": r.get("latency_ms_at_clock")}
