"""CPU backends side by side: numpy kernels vs JIT-compiled LLVM kernels on the zoo's int8 models.

Each model is built once per backend (target "ref", so only the CPU layers differ), outputs are
checked bit for bit, then both modules run alternately ``--repeat`` times. Reported per model:
CPU-layer time (sum of CPU rows, median over runs) and whole-run wall time, and per op type
the CPU time of each backend; ratio = numpy / llvm (> 1: LLVM faster). The first LLVM run,
which JIT-compiles the kernels, is reported separately as ``first_run_ms``.
The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from collections import defaultdict

import numpy as np

from compiler.backend.plans.compile import compiled_kernels
from compiler.zoo.cpu_workloads import zoo_workloads
from compiler.executor import build


def _run(mod, feeds) -> tuple[float, dict[str, float], dict[str, int]]:
    t0 = time.perf_counter()
    mod.run(feeds)
    wall = (time.perf_counter() - t0) * 1e3
    per_op: dict[str, float] = defaultdict(float)
    who: dict[str, int] = defaultdict(int)
    for r in mod.profile():
        if r["target"] == "cpu":
            per_op[r["op"]] += r["time_ms"]
            who[r["cpu_backend"]] += 1
    return wall, per_op, who


def bench_model(name: str, factory, repeat: int) -> dict:
    model, kw, feeds = factory()
    mods = {b: build(model, target="ref", cpu=b, progress=False, **kw) for b in ("numpy", "llvm")}
    t0 = time.perf_counter()
    ref = mods["numpy"].run(feeds)
    first = {"numpy_ms": (time.perf_counter() - t0) * 1e3}
    before = compiled_kernels()
    t0 = time.perf_counter()
    got = mods["llvm"].run(feeds)
    first["llvm_ms"] = (time.perf_counter() - t0) * 1e3
    exact = all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(ref, got))
    walls, cpus = defaultdict(list), defaultdict(list)
    ops: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    who = {}
    for _ in range(repeat):
        for b, m in mods.items():
            wall, per_op, who[b] = _run(m, feeds)
            walls[b].append(wall)
            cpus[b].append(sum(per_op.values()))
            for op, t in per_op.items():
                ops[op][b].append(t)
    med = lambda v: float(np.median(v))
    res = {"bit_exact": exact, "kernels_compiled": compiled_kernels() - before, "first_run_ms": first,
           "layers_by_backend": dict(who["llvm"]),
           "cpu_ms": {b: med(cpus[b]) for b in mods}, "wall_ms": {b: med(walls[b]) for b in mods},
           "per_op_ms": {op: {b: med(v[b]) for b in mods} for op, v in sorted(ops.items())}}
    res["cpu_ratio"] = res["cpu_ms"]["numpy"] / max(res["cpu_ms"]["llvm"], 1e-9)
    res["wall_ratio"] = res["wall_ms"]["numpy"] / max(res["wall_ms"]["llvm"], 1e-9)
    for v in res["per_op_ms"].values():
        v["ratio"] = v["numpy"] / max(v["llvm"], 1e-9)
    return res


def main() -> None:
    work = zoo_workloads()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--models", nargs="*", help="subset of: " + ", ".join(work))
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    names = args.models or list(work)
    out = {"repeat": args.repeat, "ratio": "numpy_ms / llvm_ms (>1 = llvm faster)", "models": {}}
    for name in names:
        r = bench_model(name, work[name], args.repeat)
        out["models"][name] = r
        print(f"{name}: exact={r['bit_exact']} cpu numpy {r['cpu_ms']['numpy']:.2f} ms  llvm {r['cpu_ms']['llvm']:.2f} ms "
              f"(x{r['cpu_ratio']:.2f}); wall x{r['wall_ratio']:.2f}; first llvm run {r['first_run_ms']['llvm_ms']:.0f} ms "
              f"({r['kernels_compiled']} kernels); layers {r['layers_by_backend']}")
    tot = {b: sum(m["cpu_ms"][b] for m in out["models"].values()) for b in ("numpy", "llvm")}
    out["total_cpu_ms"] = tot
    out["total_cpu_ratio"] = tot["numpy"] / max(tot["llvm"], 1e-9)
    out["all_bit_exact"] = all(m["bit_exact"] for m in out["models"].values())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
