"""Tuners compared on ResNet-18 C2-C11 (pynq-z1, simulator cycles, the fused REQUANT epilogue), then the tuned network.

The baseline (the acceptance figure, ``avg_ratio_K_over_random``): per layer a *landscape*, ``--landscape`` valid
settings drawn uniformly (0: every valid setting), each measured once (cycles are deterministic; ``--cache FILE``
keeps them across runs). Random search's trials to reach 0.99 of the best is then its exact expectation over
uniform sampling without replacement, ``(N + 1) / (Q + 1)`` for ``Q`` qualifying of ``N`` settings
(:mod:`compiler.autotune.landscape`), not the luck of one draw. The tuners search the same landscape (a
:class:`~compiler.autotune.landscape.LandscapeSpace`: the XGB tuner ranks every untried setting by its model), for
``--trials`` trials per layer and seed (the budget, and the data a transferring tuner hands to the next task); a
tuner that has not reached 0.99 of the landscape's best by then goes on until it does, so nothing is censored
(``--trials 0``: no budget, every tuner stops at that target); ``best`` = the fewest cycles anything measured for
the layer in the run; a tuner's ratio = its trials to 0.99 of best over random's expectation, averaged over layers
and seeds (target <= 1/3). ``xgb`` is the tuner as
``vta tune`` runs it (the analytic choice measured first, when it lies in the landscape), ``xgb_cold`` the same
without that start and without the analytic estimate among its features (nothing analytic about speed).

The earlier figure, ``avg_ratio_K_over_random_draw``: per seed ONE random-search run (``random``), ``best`` = the
best of that seed's tuners, ``needed_K / needed_random`` (censoring: a model that never reached the target counts
``trials + 1``, random search ``trials``). On flat layers random search hits 0.99 of best at trial 1-2 by luck,
so this figure is dominated by the draw. Also invalid candidates measured (target 0) and rejections by reason.
Then ResNet-18 (1x3x224x224, ORT int8) is tuned task by task (``vta tune``'s path on the whole space: analytic
choice measured first, XGB, ``--net-trials``) and built with and without the log.

``--spaces llvm`` (default: both) does the same on the llvm target's conv schedule space
(:mod:`compiler.autotune.llvm_conv`: ResNet-18's float conv tasks at ``--llvm-image-size``, the first
``--llvm-tasks``): the landscape (``--llvm-landscape``, 0: the whole space, at most 576 settings a task) is timed
in ``--llvm-passes`` alternating passes (forward, then reversed), the minimum kept, and shared by the tuners and
seeds; then every task of that ResNet-18 (convs and its max pool) is tuned (``--llvm-net-trials``, XGB, default
knobs first) and the whole model timed untuned and tuned (min of alternating medians): ``tuned_over_untuned_ms``.
Wall-clock measurements: run it on an idle machine.
The last line is one JSON object; ``spaces`` holds the acceptance summary of each space.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_conv2d import LAYERS  # noqa: E402

from compiler.autotune import LocalMeasurer, Task, make_tuner, tune_tasks  # noqa: E402
from compiler.autotune.landscape import (LandscapeSpace, expected_random_trials, ratio_to_expected,  # noqa: E402
                                         valid_sample)
from compiler.autotune.measure import Result  # noqa: E402
from compiler.autotune.network import analytic_knobs  # noqa: E402
from compiler.autotune.space import ConvSpace  # noqa: E402
from compiler.autotune.task import config_hash  # noqa: E402
from compiler.autotune.xgb_tuner import OBJECTIVES, TransferData  # noqa: E402
from jit_runtime.host_ops.requant import Requant  # noqa: E402
from compiler.topi.conv2d import ConvShape  # noqa: E402
from compiler.topi.conv2d_direct import CpuConvKnobs  # noqa: E402
from compiler.topi.knobs import ConvKnobs  # noqa: E402
from compiler.topi.requant import fused_ok  # noqa: E402
from isa import make_config  # noqa: E402

RATIO_DEFINITION = ("avg_ratio_K_over_random (the acceptance figure): mean over tasks and seeds of tuner K's trials "
                    "to 0.99 of the best cycles/ns anything measured for the task in the run, over random search's "
                    "exact expected trials (N+1)/(Q+1) on the landscape (N valid settings measured once, Q of "
                    "them within 1 %); a censored tuner counts max(1, (trials+1)/expected). "
                    "avg_ratio_K_over_random_draw: the earlier figure, over ONE random-search draw per seed, "
                    "best = the best of that seed's tuners.")
TUNERS = ("random", "grid", "xgb", "xgb_cold")  # xgb: as `vta tune` runs it (analytic choice first); xgb_cold: without


class CachedMeasurer:
    """Wraps a measurer: each (task, knobs) is simulated once (cycles are deterministic), shared by all
    tuners and seeds of a run; each tuner still counts every setting it asks for as one trial.

    ``path``: a JSON-lines file of earlier measurements of the same hardware config (read at start,
    appended to), so a rerun simulates only settings no earlier run measured."""

    def __init__(self, inner, cfg, path: str | None = None) -> None:
        self.inner, self.cache, self.simulated, self.reused = inner, {}, 0, 0
        self.cfg_hash, self.path = config_hash(cfg), path
        if path and Path(path).exists():
            for line in Path(path).read_text().splitlines():
                d = json.loads(line)
                if d["cfg"] == self.cfg_hash:
                    self.cache[(d["task"], ConvKnobs(*d["knobs"]))] = Result(d["cycles"], d["error"], d["seconds"])
        self.loaded = len(self.cache)

    def __call__(self, task, batch):
        todo = [k for k in dict.fromkeys(batch) if (task.key, k) not in self.cache]
        new = self.inner(task, todo) if todo else []
        for k, r in zip(todo, new):
            self.cache[(task.key, k)] = r
        if self.path and todo:
            with open(self.path, "a") as f:
                for k, r in zip(todo, new):
                    f.write(json.dumps({"cfg": self.cfg_hash, "task": task.key, "knobs": list(dataclasses.astuple(k)),
                                        "cycles": r.cycles, "error": r.error, "seconds": r.seconds}) + "\n")
        self.simulated += len(todo)
        self.reused += len(batch) - len(todo)
        return [self.cache[(task.key, k)] for k in batch]


def layer_tasks(cfg, names=None) -> list[Task]:
    """The layers with the full requant epilogue of a quantized model: per-channel bias and multiplier,
    rounding shift, relu, clip (as the operator library lowers it for ``cfg``: the fused ALU REQUANT
    with per-channel records in wgt where the config has it)."""
    rng = np.random.default_rng(0)
    out = []
    for name, hw, cin, cout, k, s, p in LAYERS:
        if names and name not in names:
            continue
        cs = ConvShape(1, 1, cin // cfg.block_in, cout // cfg.block_out, hw, hw, k, k, (s, s), (p, p, p, p))
        rq = Requant(multiplier=rng.integers(1 << 10, 1 << 14, cout), shift=16, relu=True, out_min=0, out_max=127)
        out.append(Task(cfg, cs, rng.integers(-2000, 2000, cout).astype(np.int32), rq, name))
    return out


def needed(curve: list, target: float) -> int | None:
    """The first trial whose best-so-far reaches ``target`` cycles, or None (censored: not within the budget)."""
    for i, c in enumerate(curve, 1):
        if c is not None and c <= target:
            return i
    return None


def ratio(need_model: int | None, need_random: int | None, trials: int) -> float:
    """``needed_model / needed_random`` with censoring resolved against the model: a model that never
    reached the target counts ``trials + 1``, a random search that never did counts ``trials`` (the least
    it could have needed), so the ratio is never flattered by the budget."""
    return (trials + 1 if need_model is None else need_model) / (trials if need_random is None else need_random)


def run_tuner(tuner, trials: int, land: dict, measure, batch: int) -> None:
    """``tuner`` for ``trials`` trials on ``land`` (a budget as a user gives it; the data a transferring tuner hands
    on), then, if it has not reached 0.99 of the landscape's best, on until it does: every tuner's trials to the
    target are counted, none censored (the landscape is measured, so the extra trials are cache hits).
    ``trials`` 0: no budget, each tuner stops at the target."""
    if trials > 0:
        tuner.tune(trials, measure, batch)
    tuner.tune(len(land["points"]), measure, batch, stop_at=min(land["costs"]) / 0.99)


def landscape_rng(task, seed: int = 0) -> np.random.Generator:
    """The landscape sample's generator: seeded by the task itself, so a subset of tasks draws the same samples."""
    return np.random.default_rng([zlib.crc32(task.key.encode()), seed])


def landscapes(tasks, spaces, measure, size: int, seed: int = 0) -> dict:
    """Per task: the costs of ``size`` valid settings drawn uniformly (all of them when ``size`` <= 0 or the space
    has fewer), each measured once through ``measure`` (cached, so the tuners see the same numbers)."""
    out = {}
    for task in tasks:
        t0 = time.time()
        sp = spaces[task.key]
        pts, whole = valid_sample(sp, size, landscape_rng(task, seed))
        res = measure(task, [sp.knobs(p) for p in pts])
        costs = [r.cycles for r in res if r.cycles is not None]
        out[task.key] = {"costs": costs, "whole": whole, "invalid": len(res) - len(costs),
                         "points": [p for p, r in zip(pts, res) if r.cycles is not None]}
        print(f"landscape {getattr(task, 'name', '') or task.describe()}: {len(costs)} valid settings measured"
              f"{' (the whole space)' if whole else ''}, {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


def expected_fields(rows: list, tuners: dict, lands: dict, trials: int, kinds) -> None:
    """Add the landscape baseline to each row (in place): ``best_run`` = the fewest cycles anything measured for the
    task in this run (landscape and every tuner of every seed), ``expected_random`` = random search's exact expected
    trials to 0.99 of it over the landscape, ``ratio_K_expected`` = tuner K's trials to it over that."""
    best = {key: min(land["costs"]) for key, land in lands.items()}
    for (key, _seed), per in tuners.items():
        best[key] = min([best[key]] + [t.best_cycles for t in per.values() if t.best_cycles])
    for row in rows:
        key = row["_key"]
        costs, target = lands[key]["costs"], best[key] / 0.99
        exp = expected_random_trials(costs, target)
        row.update(best_run=best[key], landscape_size=len(costs), landscape_whole=lands[key]["whole"],
                   landscape_qualifying=int(sum(c <= target for c in costs)), expected_random=round(exp, 3))
        for k in kinds:
            if k.startswith("xgb"):
                n = needed(tuners[(key, row["seed"])][k].best_curve, target)
                row[f"needed_run_{k}"] = n
                row[f"ratio_{k}_expected"] = ratio_to_expected(n, exp, len(costs))


def summary(rows: list, seeds, kinds, field: str) -> dict:
    """``avg_ratio_K_over_random`` (and per seed) from the rows' ``{field}`` ratios (field uses K as a placeholder)."""
    out = {}
    for k in kinds:
        f = field.replace("K", k)
        if rows and f in rows[0]:
            out[f"avg_ratio_{k}_over_random"] = round(float(np.mean([r[f] for r in rows])), 4)
            out[f"avg_ratio_{k}_over_random_per_seed"] = {
                str(sd): round(float(np.mean([r[f] for r in rows if r["seed"] == sd])), 4) for sd in seeds}
    return out


def compare_tuners(cfg, tasks, trials: int, batch: int, seeds, measure, kinds=TUNERS, objective: str = "reg",
                   landscape: int = 256) -> dict:
    rows = []
    spaces = {task.key: ConvSpace(task) for task in tasks}  # one lowering cache per task, shared by the tuners
    lands = landscapes(tasks, spaces, measure, landscape)
    # the tuners search the landscape (the settings random search's expectation is over); the cold model's
    # features leave out the analytic estimate
    cold_spaces = {k: LandscapeSpace(sp.without_estimate(), lands[k]["points"]) for k, sp in spaces.items()}
    spaces = {k: LandscapeSpace(sp, lands[k]["points"]) for k, sp in spaces.items()}
    all_tuners = {}
    for seed in seeds:
        transfers = {"xgb": TransferData(), "xgb_cold": TransferData()}
        per = {}
        for task in tasks:
            per[task.name] = {}
            for kind in kinds:
                t0 = time.time()
                xgb = kind.startswith("xgb")
                tuner = make_tuner(kind.split("_")[0], task, seed, transfers[kind] if xgb else None,
                                   (cold_spaces if kind == "xgb_cold" else spaces)[task.key],
                                   **({"objective": objective} if xgb else {}))
                if kind == "xgb":
                    tuner.seed_points([analytic_knobs(task)])
                run_tuner(tuner, trials, lands[task.key], measure, batch)
                if kind.startswith("xgb"):
                    tuner.finish()
                per[task.name][kind] = tuner
                print(f"seed {seed} {task.name:4s} {kind:6s} best {tuner.best_cycles} after {len(tuner.history)} "
                      f"trials, rejected {sum(tuner.rejected.values())}, {time.time() - t0:.1f} s",
                      file=sys.stderr, flush=True)
            tuners = per[task.name]
            all_tuners[(task.key, seed)] = tuners
            best = min(t.best_cycles for t in tuners.values() if t.best_cycles)
            need = {k: needed(t.best_curve, best / 0.99) for k, t in tuners.items()}
            analytic = measure(task, [analytic_knobs(task)])[0].cycles
            row = {"layer": task.name, "seed": seed, "_key": task.key, "best_cycles": best,
                   "analytic_cycles": analytic,
                   **{f"best_{k}": t.best_cycles for k, t in tuners.items()},
                   **{f"needed_{k}": v for k, v in need.items()},
                   "invalid_measured": sum(t.invalid_measured for t in tuners.values()),
                   "rejected": {k: dict(t.rejected) for k, t in tuners.items()}}
            for k in ("xgb", "xgb_cold"):
                if k in need and "random" in need:
                    row[f"ratio_{k}_random"] = ratio(need[k], need["random"], len(lands[task.key]["points"]))
            rows.append(row)
            print("row " + json.dumps({k: v for k, v in row.items() if k not in ("rejected", "_key")}),
                  file=sys.stderr, flush=True)
    expected_fields(rows, all_tuners, lands, trials, kinds)
    for row in rows:
        print("row+ " + json.dumps({k: row.get(k) for k in ("layer", "seed", "best_run", "landscape_size",
                                                          "landscape_qualifying", "expected_random",
                                                          "needed_run_xgb_cold", "ratio_xgb_cold_expected")}),
              file=sys.stderr, flush=True)
        del row["_key"]
    kinds = [k for k in kinds if k in per[tasks[0].name]]
    out = {"rows": rows,
           "avg_needed_uncensored_as_budget": {k: round(float(np.mean([r[f"needed_{k}"] or r["landscape_size"]
                                                                        for r in rows])), 2)
                                               for k in kinds},
           "censored": {k: sum(r[f"needed_{k}"] is None for r in rows) for k in kinds},
           "invalid_measured": sum(r["invalid_measured"] for r in rows)
           + sum(land["invalid"] for land in lands.values()),
           "tuned_over_analytic_cycles": round(sum(r["best_cycles"] for r in rows)
                                               / sum(r["analytic_cycles"] for r in rows), 4),
           "landscape": {"per_task": landscape, "whole": all(land["whole"] for land in lands.values()),
                         "measured": sum(len(land["costs"]) for land in lands.values())}}
    # the acceptance figure: over random search's exact expectation on the landscape
    out.update(summary(rows, seeds, kinds, "ratio_K_expected"))
    # the earlier figure: over one random draw per seed
    out.update({k.replace("over_random", "over_random_draw"): v
                for k, v in summary(rows, seeds, kinds, "ratio_K_random").items()})
    return out


class TimedCache:
    """Wraps the llvm measurer: each (task, knobs) is compiled and timed once per run, so every tuner and seed sees
    the same number for the same setting (each tuner still counts it as a trial). :meth:`retime` times settings
    again and keeps the minimum (alternating passes over a landscape: a load burst hits one pass, not both)."""

    def __init__(self, inner, path: str | None = None) -> None:
        from compiler.autotune.host_timed import cpu_ident

        self.inner, self.cache, self.timed, self.reused = inner, {}, 0, 0
        self.path, self.cpu = path, cpu_ident()["hash"]
        if path and Path(path).exists():  # timings of an earlier run on this CPU (development: the landscape reused)
            for line in Path(path).read_text().splitlines():
                d = json.loads(line)
                if d["cpu"] == self.cpu:
                    self.cache[(d["task"], CpuConvKnobs(**d["knobs"]))] = Result(d["ns"], d["error"], 0.0)
        self.loaded = len(self.cache)

    def _store(self, task, k, r) -> None:
        self.cache[(task.key, k)] = r
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps({"cpu": self.cpu, "task": task.key, "knobs": dataclasses.asdict(k), "ns": r.cycles,
                                    "error": r.error}) + "\n")

    def __call__(self, task, batch):
        todo = [k for k in dict.fromkeys(batch) if (task.key, k) not in self.cache]
        for k, r in zip(todo, self.inner(task, todo) if todo else []):
            self._store(task, k, r)
        self.timed += len(todo)
        self.reused += len(batch) - len(todo)
        return [self.cache[(task.key, k)] for k in batch]

    def retime(self, task, batch) -> None:
        for k, r in zip(batch, self.inner(task, batch)):
            old = self.cache.get((task.key, k))
            if r.cycles is not None and (old is None or old.cycles is None or r.cycles < old.cycles):
                self._store(task, k, r)
        self.timed += len(batch)


def llvm_space(image_size: int, n_tasks: int, trials: int, batch: int, seeds, net_trials: int,
               landscape: int = 0, passes: int = 2, cache: str | None = None) -> dict:
    """The llvm space's summary: cold XGB vs random on ResNet-18's first ``n_tasks`` tasks (its convs, in graph order;
    0: all, its max pool too), then the tuned model's wall time (every task tuned)."""
    from compiler.autotune.llvm_conv import LlvmMeasurer
    from compiler.executor.llvm_tasks import extract_llvm_tasks
    from compiler.autotune.xgb_tuner import TransferData
    from compiler.executor.llvm_rank import rank_in_model
    from compiler.executor import build
    from compiler.zoo import get_model
    from vta.commands.tune import model_wall_ms

    model = get_model("resnet18", image_size=image_size)
    all_tasks = extract_llvm_tasks(model)
    tasks = all_tasks[:n_tasks] if n_tasks else all_tasks
    rows = []
    t0 = time.time()
    kinds = ("random", "xgb_cold")
    with LlvmMeasurer() as m:
        measure = TimedCache(m, cache)
        spaces = {t.key: t.make_space() for t in tasks}
        lands = landscapes(tasks, spaces, measure, landscape)
        spaces = {k: LandscapeSpace(sp, lands[k]["points"]) for k, sp in spaces.items()}
        for p in range(1, 1 if measure.loaded else passes):  # alternating passes over each landscape, min kept
            for task in tasks:
                ks = [spaces[task.key].knobs(q) for q in lands[task.key]["points"]]
                measure.retime(task, ks[::-1] if p % 2 else ks)
                lands[task.key]["costs"] = [r.cycles for r in measure(task, ks) if r.cycles is not None]
        all_tuners = {}
        for seed in seeds:
            transfer = TransferData()  # the XGB tuner takes its space's family of it (convs, pools)
            for task in tasks:
                tuners = {}
                for kind in kinds:
                    tuner = make_tuner(kind.split("_")[0], task, seed, transfer if kind == "xgb_cold" else None,
                                       spaces[task.key])
                    run_tuner(tuner, trials, lands[task.key], measure, batch)
                    if kind == "xgb_cold":
                        tuner.finish()
                    tuners[kind] = tuner
                all_tuners[(task.key, seed)] = tuners
                best = min(t.best_cycles for t in tuners.values() if t.best_cycles)
                need = {k: needed(t.best_curve, best / 0.99) for k, t in tuners.items()}
                default_ns = measure(task, [task.default_knobs()])[0].cycles
                row = {"layer": task.describe(), "seed": seed, "_key": task.key, "best_ns": best,
                       "default_ns": default_ns, **{f"needed_{k}": v for k, v in need.items()},
                       "ratio_xgb_cold_random": ratio(need["xgb_cold"], need["random"], len(lands[task.key]["points"])),
                       "invalid_measured": sum(t.invalid_measured for t in tuners.values())}
                rows.append(row)
                print("llvm row " + json.dumps({k: v for k, v in row.items() if k != "_key"}), file=sys.stderr,
                      flush=True)
        expected_fields(rows, all_tuners, lands, trials, kinds)
        for row in rows:
            print("llvm row+ " + json.dumps({k: row.get(k) for k in (
                "layer", "seed", "best_run", "landscape_size", "landscape_qualifying", "expected_random",
                "needed_run_xgb_cold", "ratio_xgb_cold_expected")}), file=sys.stderr, flush=True)
            del row["_key"]
        out = {"tasks": [t.describe() for t in tasks], "image_size": image_size, "trials": trials, "seeds": list(seeds),
               **summary(rows, seeds, kinds, "ratio_K_expected"),
               **{k.replace("over_random", "over_random_draw"): v
                  for k, v in summary(rows, seeds, kinds, "ratio_K_random").items()},
               "censored": {k: sum(r[f"needed_{k}"] is None for r in rows) for k in kinds},
               "censored_run_xgb_cold": sum(r["needed_run_xgb_cold"] is None for r in rows),
               "invalid_measured": sum(r["invalid_measured"] for r in rows)
               + sum(land["invalid"] for land in lands.values()),
               "best_over_default_ns": round(sum(r["best_ns"] for r in rows) / sum(r["default_ns"] for r in rows), 4),
               "landscape": {"per_task": landscape, "passes": passes, "loaded_timings": measure.loaded,
                             "whole": all(land["whole"] for land in lands.values()),
                             "measured": sum(len(land["costs"]) for land in lands.values())},
               "rows": rows,
               "timed": measure.timed, "reused_measurements": measure.reused, "space_s": round(time.time() - t0, 1)}
        if net_trials:
            x = {"input": np.random.default_rng(0).standard_normal((1, 3, image_size, image_size)).astype(np.float32)}
            with tempfile.TemporaryDirectory() as d:
                log = Path(d) / "resnet18_llvm.log"
                t1 = time.time()
                res = tune_tasks(all_tasks, measure, "xgb", net_trials, batch, str(log), 0)
                out["net_tune_s"] = round(time.time() - t1, 1)
                base = build(model, target="llvm", progress=False)
                t1 = time.time()  # as `vta tune --target llvm` ends: the fastest settings of each task in the model
                ranked = rank_in_model(model, log, feeds=x, base=base)
                out.update(net_in_model_s=round(time.time() - t1, 1), net_in_model_ranked=len(ranked),
                           net_in_model_chosen=sum(v is not None for v in ranked.values()))
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    tuned = build(model, target="llvm", progress=False, tuning_log=log)
            before, after = [], []
            for _ in range(9):  # alternating, min of each side's medians (the whole model moves +-5 % with load)
                before.append(model_wall_ms(base, x))
                after.append(model_wall_ms(tuned, x))
            out.update(net_tasks=len(all_tasks), net_trials=net_trials, untuned_ms=round(min(before), 3),
                       tuned_ms=round(min(after), 3), tuned_over_untuned_ms=round(min(after) / min(before), 4),
                       net_invalid_measured=sum(r.invalid_measured for r in res),
                       # tasks whose logged knobs the build kept (faster alone and in the model)
                       kept_logged_tasks=tuned.compiled.stats["tuned_tasks"],
                       build_warnings=[str(w.message)[:200] for w in caught])
    return out


def network(cfg_name: str, trials: int, batch: int, measure) -> dict:
    from compiler.autotune import extract_tasks
    from compiler.executor import build
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import get_model

    rng = np.random.default_rng(0)
    shape = (1, 3, 224, 224)
    calib = [{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(2)]
    x = rng.standard_normal(shape).astype(np.float32)
    q = ort_quantize_static(get_model("resnet18"), calib, reduce_range=True)
    base = build(q, cfg_name, target="sim", progress=False)
    tasks = extract_tasks(base.compiled, base.accel)
    base(input=x)
    before = base.profile_summary()["accel_cycles"]
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "resnet18.log"
        t0 = time.time()
        res = tune_tasks(tasks, measure, "xgb", trials, batch, str(log), 0)
        tune_s = time.time() - t0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tuned = build(q, cfg_name, target="sim", progress=False, tuning_log=log)
        tuned(input=x)
    after = tuned.profile_summary()["accel_cycles"]
    clock = make_config(cfg_name).clock_mhz
    return {"tasks": len(tasks), "trials_per_task": trials, "tune_seconds": round(tune_s, 1),
            "cycles_analytic": int(before), "cycles_tuned": int(after),
            "latency_ms_analytic": before / (clock * 1e3), "latency_ms_tuned": after / (clock * 1e3),
            "tuned_over_analytic": round(after / before, 4), "build_warnings": [str(w.message) for w in caught],
            "invalid_measured": sum(r.invalid_measured for r in res)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=48, help="measured candidates per tuner and layer (a tuner short "
                    "of 0.99 of the landscape's best then goes on until it reaches it; 0: no budget, stop there)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seeds", type=int, nargs="*", default=list(range(8)),
                    help="tuner seeds of the accelerator space (default 0-7: one seed's ratio ranges 0.14-0.39, the "
                         "mean of 8 is the steadier figure)")
    ap.add_argument("--layers", nargs="*", help="subset, e.g. C2 C9")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--tuners", nargs="*", default=list(TUNERS), choices=TUNERS,
                    help="a subset (e.g. to fill --cache); the ratios need random and xgb")
    ap.add_argument("--objective", default="reg", choices=OBJECTIVES, help="the XGB cost model's objective")
    ap.add_argument("--cache", help="JSON-lines file of measurements to reuse and extend (cycles are deterministic)")
    ap.add_argument("--net-trials", type=int, default=8, help="trials per ResNet-18 task (0: skip the network)")
    ap.add_argument("--spaces", nargs="*", default=["accel", "llvm"], choices=("accel", "llvm"),
                    help="tuning spaces to compare (default both)")
    ap.add_argument("--llvm-image-size", type=int, default=224, help="ResNet-18 input size of the llvm tasks")
    ap.add_argument("--llvm-tasks", type=int, default=4, help="first N llvm conv tasks compared (0: all)")
    ap.add_argument("--llvm-trials", type=int, default=64, help="timed candidates per tuner and llvm task (as "
                    "--trials)")
    ap.add_argument("--llvm-seeds", type=int, nargs="*", default=[0, 1, 2, 3])
    ap.add_argument("--llvm-net-trials", type=int, default=8,
                    help="trials per ResNet-18 conv task before timing the tuned model (0: skip)")
    ap.add_argument("--landscape", type=int, default=512,
                    help="valid settings per accelerator layer measured for the random baseline (0: all of them)")
    ap.add_argument("--llvm-landscape", type=int, default=0,
                    help="valid settings per llvm task timed for the random baseline (0: all of them)")
    ap.add_argument("--llvm-passes", type=int, default=3,
                    help="alternating timing passes over each llvm landscape, the minimum kept")
    ap.add_argument("--llvm-cache", help="JSON-lines file of llvm timings to reuse and extend (development only: "
                    "a landscape timed in an earlier run on this CPU; the acceptance run times it afresh)")
    a = ap.parse_args(argv)
    for name in ("batch", "llvm_passes"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    for name in ("trials", "llvm_trials"):
        if getattr(a, name) < 0:
            ap.error(f"--{name.replace('_', '-')} must be >= 0 (0: the whole landscape), got {getattr(a, name)}")
    llvm_args = (a.llvm_image_size, a.llvm_tasks, a.llvm_trials, a.batch, a.llvm_seeds, a.llvm_net_trials,
                 a.llvm_landscape, a.llvm_passes, a.llvm_cache)
    cfg = make_config("pynq-z1")
    t0 = time.time()
    if "accel" not in a.spaces:
        llvm = llvm_space(*llvm_args)
        res = {"llvm_rows": llvm.pop("rows"), "spaces": {"llvm": llvm}, "ratio_definition": RATIO_DEFINITION,
               "wall_s": round(time.time() - t0, 1), "target_ratio": 1 / 3}
        print(json.dumps(res))
        return
    with LocalMeasurer(a.workers) as pool:
        measure = CachedMeasurer(pool, cfg, a.cache)
        tasks = layer_tasks(cfg, a.layers)
        res = compare_tuners(cfg, tasks, a.trials, a.batch, a.seeds, measure, a.tuners, a.objective,
                             a.landscape)
        res["epilogue"] = {"fused_requant_layers": sum(fused_ok(cfg, t.requant) for t in tasks),
                           "alu_stages": sorted({t.epilogue_size()[1] for t in tasks})}
        res["simulated"], res["reused_measurements"] = measure.simulated, measure.reused
        if a.net_trials:
            res["network"] = network(cfg.name, a.net_trials, a.batch, measure)
    res.update(config=cfg.name, objective=a.objective, trials=a.trials, batch=a.batch, seeds=a.seeds,
               wall_s=round(time.time() - t0, 1),
               target_ratio=1 / 3)
    # the acceptance summary: per tuning space, the cold model's ratio and the invalid candidates measured
    res["ratio_definition"] = RATIO_DEFINITION
    res["spaces"] = {"accel": {k: res[k] for k in ("avg_ratio_xgb_cold_over_random",
                                                   "avg_ratio_xgb_cold_over_random_per_seed",
                                                   "avg_ratio_xgb_cold_over_random_draw",
                                                   "avg_ratio_xgb_cold_over_random_draw_per_seed",
                                                   "avg_ratio_xgb_over_random", "avg_ratio_xgb_over_random_draw",
                                                   "invalid_measured", "landscape") if k in res}}
    if "llvm" in a.spaces:
        res["spaces"]["llvm"] = llvm_space(*llvm_args)
        res["llvm_rows"] = res["spaces"]["llvm"].pop("rows")
    res["wall_s"] = round(time.time() - t0, 1)
    for name, sp in res["spaces"].items():
        if "avg_ratio_xgb_cold_over_random" in sp:
            sp["meets_target"] = sp["avg_ratio_xgb_cold_over_random"] <= 1 / 3 and len(
                sp["avg_ratio_xgb_cold_over_random_per_seed"]) >= 4
    print(json.dumps(res))


if __name__ == "__main__":
    main()
