"""Tuners compared on ResNet-18 C2-C11 (pynq-z1, simulator cycles, full requant epilogue), then the tuned network.

Per layer and seed, random, grid and the XGBoost model-based tuner (model transferred from layer
to layer in order) each measure ``--trials`` candidates. ``best`` = the fewest cycles any tuner
found for that layer; ``needed[t]`` = the trials tuner t took to reach >= 0.99 of it (cycles <= best /
0.99), or ``--trials`` when it never did (censored: counts against the XGB tuner's ratio). Reported:
per-layer ``needed_xgb / needed_random`` averaged (target <= 1/3; ``xgb`` is the tuner as ``vta tune``
runs it, the analytic choice measured first, ``xgb_cold`` the same without that start), invalid candidates that were
measured anyway (target 0), and the rejected count by reason. Measurements are deterministic, so
one cache serves all tuners (trial counts are per tuner). Then ResNet-18 (1x3x224x224, ORT int8)
is tuned task by task (``vta tune``'s path: analytic choice measured first, XGB, ``--net-trials``)
and built with and without the log: whole-network accelerator latency before and after.
The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_conv2d import LAYERS  # noqa: E402

from compiler.autotune import LocalMeasurer, Task, make_tuner, tune_tasks  # noqa: E402
from compiler.autotune.network import analytic_knobs  # noqa: E402
from compiler.autotune.xgb_tuner import TransferData  # noqa: E402
from compiler.requant import Requant  # noqa: E402
from compiler.topi.conv2d import ConvShape  # noqa: E402
from isa import make_config  # noqa: E402

TUNERS = ("random", "grid", "xgb", "xgb_cold")  # xgb: as `vta tune` runs it (analytic choice first); xgb_cold: without


class CachedMeasurer:
    """Wraps a measurer: each (task, knobs) is simulated once (cycles are deterministic)."""

    def __init__(self, inner) -> None:
        self.inner, self.cache, self.simulated = inner, {}, 0

    def __call__(self, task, batch):
        todo = [k for k in dict.fromkeys(batch) if (task.key, k) not in self.cache]
        for k, r in zip(todo, self.inner(task, todo) if todo else []):
            self.cache[(task.key, k)] = r
        self.simulated += len(todo)
        return [self.cache[(task.key, k)] for k in batch]


def layer_tasks(cfg, names=None) -> list[Task]:
    """The layers with the full requant epilogue of a quantized model: per-channel bias and multiplier,
    rounding shift, relu, clip (ADD bias, MUL, ADD round, SHR, MAX, MIN on the ALU)."""
    rng = np.random.default_rng(0)
    out = []
    for name, hw, cin, cout, k, s, p in LAYERS:
        if names and name not in names:
            continue
        cs = ConvShape(1, 1, cin // cfg.block_in, cout // cfg.block_out, hw, hw, k, k, (s, s), (p, p, p, p))
        rq = Requant(multiplier=rng.integers(1 << 10, 1 << 14, cout), shift=16, relu=True, out_min=0, out_max=127)
        out.append(Task(cfg, cs, rng.integers(-2000, 2000, cout).astype(np.int32), rq, name))
    return out


def needed(curve: list, target: float, cap: int) -> int:
    for i, c in enumerate(curve, 1):
        if c is not None and c <= target:
            return i
    return cap


def compare_tuners(cfg, tasks, trials: int, batch: int, seeds, measure) -> dict:
    rows = []
    for seed in seeds:
        transfers = {"xgb": TransferData(), "xgb_cold": TransferData()}
        per = {}
        for task in tasks:
            per[task.name] = {}
            for kind in TUNERS:
                t0 = time.time()
                tuner = make_tuner(kind.split("_")[0], task, seed, transfers[kind] if kind.startswith("xgb") else None)
                if kind == "xgb":
                    tuner.seed_points([analytic_knobs(task)])
                tuner.tune(trials, measure, batch)
                if kind.startswith("xgb"):
                    tuner.finish()
                per[task.name][kind] = tuner
                print(f"seed {seed} {task.name:4s} {kind:6s} best {tuner.best_cycles} after {len(tuner.history)} "
                      f"trials, rejected {sum(tuner.rejected.values())}, {time.time() - t0:.1f} s",
                      file=sys.stderr, flush=True)
        for task in tasks:
            tuners = per[task.name]
            best = min(t.best_cycles for t in tuners.values() if t.best_cycles)
            need = {k: needed(t.best_curve, best / 0.99, trials) for k, t in tuners.items()}
            analytic = measure(task, [analytic_knobs(task)])[0].cycles
            rows.append({"layer": task.name, "seed": seed, "best_cycles": best, "analytic_cycles": analytic,
                         **{f"best_{k}": t.best_cycles for k, t in tuners.items()},
                         **{f"needed_{k}": v for k, v in need.items()},
                         "ratio_xgb_random": need["xgb"] / need["random"],
                         "ratio_xgb_cold_random": need["xgb_cold"] / need["random"],
                         "invalid_measured": sum(t.invalid_measured for t in tuners.values()),
                         "rejected": {k: dict(t.rejected) for k, t in tuners.items()}})
    return {"rows": rows,
            "avg_ratio_xgb_over_random": round(float(np.mean([r["ratio_xgb_random"] for r in rows])), 4),
            "avg_ratio_xgb_cold_over_random": round(float(np.mean([r["ratio_xgb_cold_random"] for r in rows])), 4),
            "avg_needed": {k: round(float(np.mean([r[f"needed_{k}"] for r in rows])), 2) for k in TUNERS},
            "xgb_reached_099": sum(r["needed_xgb"] < trials or r["best_xgb"] <= r["best_cycles"] / 0.99 for r in rows),
            "invalid_measured": sum(r["invalid_measured"] for r in rows),
            "tuned_over_analytic_cycles": round(sum(r["best_cycles"] for r in rows)
                                                / sum(r["analytic_cycles"] for r in rows), 4)}


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
    ap.add_argument("--trials", type=int, default=16, help="measured candidates per tuner and layer")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--layers", nargs="*", help="subset, e.g. C2 C9")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--net-trials", type=int, default=8, help="trials per ResNet-18 task (0: skip the network)")
    a = ap.parse_args(argv)
    cfg = make_config("pynq-z1")
    t0 = time.time()
    with LocalMeasurer(a.workers) as pool:
        measure = CachedMeasurer(pool)
        res = compare_tuners(cfg, layer_tasks(cfg, a.layers), a.trials, a.batch, a.seeds, measure)
        res["simulated"] = measure.simulated
        if a.net_trials:
            res["network"] = network(cfg.name, a.net_trials, a.batch, measure)
    res.update(config=cfg.name, trials=a.trials, batch=a.batch, seeds=a.seeds, wall_s=round(time.time() - t0, 1),
               target_ratio=1 / 3, meets_ratio=res["avg_ratio_xgb_over_random"] <= 1 / 3)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
