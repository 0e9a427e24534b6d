"""RTL benchmark and differential test: the compiled Verilator harness against the simulator.

Runs, on the RTL (hw/cosim/harness) and on the simulator, comparing DRAM bytes and cycle counts:
the instruction suite, the default-plan blocked GEMM and ``--random N`` random programs (seeds S..S+N-1,
``hw/random_programs.py``) on ``--config`` (default tiny); ``--pynq-random M`` random programs on pynq-z1;
the 512^3 blocked GEMM on pynq-z1 (``long_gemm_cycles_per_s``); with ``--resnet18`` the zoo ResNet-18
(quantized as in bench_models) whole network on pynq-z1, every accelerator layer on the RTL and the
simulator (``resnet18_rtl``: mismatching layers, RTL wall time); with ``--pynq`` the compiled conv2d layer
and the blocked GEMMs on pynq-z1.

    python benchmarks/bench_rtl.py --random 10000 --seed 0 --pynq-random 1000 --resnet18

Prints mismatches as they are found; the last line is one JSON object. Speeds are wall-clock figures of
this run (``*_cpu_s`` the harness process's CPU time, for machines shared with other work):
``long_gemm_cycles_per_s`` is wall cycles/s (the best of ``--long-gemm-repeat`` runs, each run's in
``long_gemm_runs_cycles_per_s``), ``long_gemm_cycles_per_cpu_s`` cycles per harness CPU-second, and
``harness_flags`` the Verilator/C++ flags the harness binary was built with (the 512^3 GEMM runs on the
profile-guided build, ``PGO`` in the flags, unless ``--no-pgo``; building it takes about twice a plain build).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np

from hw.cosim.harness import Harness
from hw.cosim.harness.build import build_harness
from hw.random_programs import random_program
from isa import make_config


class Differ:
    """One simulator and one harness process for a config (both keep their scratchpads across programs)."""

    def __init__(self, cfg):
        from simulator import Simulator

        self.cfg, self.sim, self.h = cfg, Simulator(cfg), Harness(cfg)
        self.rtl_s = self.sim_s = 0.0
        self.cycles = 0
        self.mismatches: list[str] = []

    def run(self, name: str, dram: np.ndarray, addr: int, n: int) -> None:
        img = np.array(dram, np.uint8, copy=True)
        t = time.perf_counter()
        s = self.sim.run(img, addr, n)
        self.sim_s += time.perf_counter() - t
        t = time.perf_counter()
        r = self.h.run(dram, addr, n)
        self.rtl_s += time.perf_counter() - t
        self.cycles += max(r.cycles, 0)
        if r.timeout or r.cycles != int(s.cycles) or not np.array_equal(r.dram, img):
            diff = np.flatnonzero(r.dram != img) if r.dram.shape == img.shape else np.array([-1])
            msg = (f"MISMATCH {self.cfg.name} {name}: sim {int(s.cycles)} rtl {r.cycles} timeout={r.timeout} "
                   f"bytes differing {diff.size}" + (f" (first at {int(diff[0]):#x})" if diff.size else ""))
            print(msg, flush=True)
            self.mismatches.append(name)

    def close(self) -> None:
        self.h.close()


def programs_and_random(cfg, n_random: int, seed: int, suite: bool = True) -> dict:
    from jit_runtime.blocked_gemm import blocked_gemm
    from jit_runtime.suite import suite_cases

    t = time.perf_counter()
    build_harness(cfg)
    build_s = time.perf_counter() - t
    d = Differ(cfg)
    t0 = time.perf_counter()
    n = 0
    if suite:
        for name, b in suite_cases(cfg).items():
            p, _ = b()
            d.run(name, p.dram, p.insn_addr, p.n_insns)
            n += 1
        p, _ = blocked_gemm(cfg)
        d.run("blocked_gemm", p.dram, p.insn_addr, p.n_insns)
        n += 1
    for s in range(seed, seed + n_random):
        p = random_program(cfg, s)
        d.run(p.name, p.dram, p.insn_addr, p.n_insns)
        n += 1
        if (s - seed + 1) % 1000 == 0:
            print(f"  {cfg.name}: {s - seed + 1}/{n_random} random programs, {len(d.mismatches)} mismatches, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    wall = time.perf_counter() - t0
    cpu = d.h.cpu_seconds()
    d.close()
    return {"config": cfg.name, "programs": n, "random": n_random, "seed": seed, "mismatches": len(d.mismatches),
            "mismatched": d.mismatches[:20], "cycles": d.cycles, "wall_s": round(wall, 2),
            "rtl_wall_s": round(d.rtl_s, 2), "sim_wall_s": round(d.sim_s, 2), "harness_cpu_s": round(cpu, 2),
            "cycles_per_s": round(d.cycles / d.rtl_s, 1) if d.rtl_s else None, "build_s": round(build_s, 2)}


def long_gemm(n: int = 512, cfg=None, pgo: bool = True, repeat: int = 3) -> dict:
    """The n^3 blocked GEMM on pynq-z1 (or ``cfg``): RTL cycles per second, best of ``repeat`` runs in one fresh
    harness process after a warm-up (every run's figure is reported too; each run checked against the
    simulator, bytes and cycles). ``pgo``: the profile-guided harness build, ``build_harness(..., pgo=True)``."""
    from jit_runtime.blocked_gemm import blocked_gemm, default_plan
    from simulator import Simulator

    if repeat < 1:
        raise ValueError(f"long_gemm: repeat must be >= 1, got {repeat}")
    cfg = cfg or make_config("pynq-z1")
    p, _ = blocked_gemm(cfg, replace(default_plan(cfg), n=n, k=n, m=n))
    img = p.dram.copy()
    t = time.perf_counter()
    s = Simulator(cfg).run(img, p.insn_addr, p.n_insns)
    sim_s = time.perf_counter() - t
    walls, cpus, ok = [], [], True
    with Harness(cfg, pgo=pgo) as h:
        h.run(p.dram[:64 + 16], 0, 1, max_cycles=10)  # warm the process (page faults, first eval)
        for _ in range(repeat):
            c0 = h.cpu_seconds()
            t = time.perf_counter()
            r = h.run(p.dram, p.insn_addr, p.n_insns, max_cycles=100_000_000)
            walls.append(time.perf_counter() - t)
            cpus.append(h.cpu_seconds() - c0)
            ok = ok and not r.timeout and r.cycles == int(s.cycles) and np.array_equal(r.dram, img)
    wall, cpu = min(walls), min(cpus)
    print(f"long GEMM {n}^3 {cfg.name}: {r.cycles:,} cycles, best of {repeat} in {wall:.2f} s = "
          f"{r.cycles / wall:,.0f} cycles/s (runs {', '.join(f'{r.cycles / w:,.0f}' for w in walls)}; harness CPU "
          f"{cpu:.2f} s = {r.cycles / max(cpu, 1e-9):,.0f} cycles/s; simulator {sim_s:.2f} s)"
          f"{'' if ok else '  MISMATCH'}", flush=True)
    from hw.cosim.harness.build import build_flags

    return {"long_gemm_cycles": r.cycles, "long_gemm_wall_s": round(wall, 3), "harness_flags": build_flags(cfg, pgo=pgo),
            "long_gemm_cycles_per_s": round(r.cycles / wall, 1), "long_gemm_runs_cycles_per_s":
            [round(r.cycles / w, 1) for w in walls], "long_gemm_sim_wall_s": round(sim_s, 3),
            "long_gemm_harness_cpu_s": round(cpu, 2),
            "long_gemm_cycles_per_cpu_s": round(r.cycles / cpu, 1) if cpu else None, "long_gemm_mismatch": not ok}


def resnet18_rtl(seed: int = 0) -> dict:
    """The zoo ResNet-18 (quantized as in bench_models) on pynq-z1: every accelerator layer on the RTL and on
    the simulator; counts layers whose bytes or cycles differ. ``wall_s``: the network's run time with the
    simulator's share taken out (RTL layers + CPU layers)."""
    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.executor import build, register_accel_backend
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import get_model
    from hw.device import RtlDevice
    from jit_runtime.device import register_device
    from simulator import Simulator

    shape = (1, 3, 224, 224)
    rng = np.random.default_rng(seed)
    calib = [{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)]
    x = rng.standard_normal(shape).astype(np.float32)
    q = ort_quantize_static(get_model("resnet18"), calib, reduce_range=True)
    stats = {"sim_s": 0.0, "rtl_s": 0.0, "layers": 0, "mismatches": [], "cycles": 0}

    class Both:
        def __init__(self, cfg, trace=False):
            self.sim, self.rtl = Simulator(cfg), RtlDevice(cfg)

        def run(self, dram, addr, n):
            img = dram.copy()
            t = time.perf_counter()
            s = self.sim.run(img, addr, n)
            stats["sim_s"] += time.perf_counter() - t
            t = time.perf_counter()
            r = self.rtl.run(dram, addr, n)
            stats["rtl_s"] += time.perf_counter() - t
            stats["layers"] += 1
            stats["cycles"] += r.cycles
            if r.cycles != int(s.cycles) or not np.array_equal(dram, img):
                stats["mismatches"].append(stats["layers"] - 1)
                print(f"MISMATCH resnet18 accelerator call {stats['layers'] - 1}: sim {int(s.cycles)} rtl {r.cycles}",
                      flush=True)
            return s

    from hw.cosim.harness import shared_harness

    register_device("rtl-and-sim-bench", Both, replace=True)
    register_accel_backend("rtl-and-sim-bench", lambda c: SimAccelBackend(c, device="rtl-and-sim-bench"), replace=True)
    h = shared_harness(make_config("pynq-z1"))  # the process every rtl device of this run uses
    mod = build(q, "pynq-z1", target="rtl-and-sim-bench", progress=False)
    c0 = h.cpu_seconds()
    t = time.perf_counter()
    mod(input=x)
    total = time.perf_counter() - t
    cpu = h.cpu_seconds() - c0
    names = [r["name"] for r in mod.profile() if r["target"] == "accel"]
    bad = [names[i] if i < len(names) else str(i) for i in stats["mismatches"]]
    out = {"mismatches": len(bad), "mismatched_layers": bad[:10], "layers": stats["layers"],
           "cycles": stats["cycles"], "wall_s": round(total - stats["sim_s"], 2), "rtl_wall_s": round(stats["rtl_s"], 2),
           "sim_wall_s": round(stats["sim_s"], 2), "total_wall_s": round(total, 2), "harness_cpu_s": round(cpu, 2),
           "cycles_per_s": round(stats["cycles"] / stats["rtl_s"], 1) if stats["rtl_s"] else None}
    print(f"resnet18 on RTL (pynq-z1): {out['layers']} accelerator layers, {out['cycles']:,} cycles, "
          f"{out['mismatches']} mismatches, RTL {out['rtl_wall_s']} s (harness CPU {out['harness_cpu_s']} s), "
          f"network {out['wall_s']} s", flush=True)
    return out


def pynq_workloads() -> dict:
    """The compiled conv2d layer and the blocked GEMMs on pynq-z1, RTL vs simulator (one harness process)."""
    from compiler.backend.accel.conv_job import compiled_conv2d
    from hw.cosim.workloads import blocked_gemms

    pcfg = make_config("pynq-z1")
    conv = compiled_conv2d(pcfg)
    d = Differ(pcfg)
    d.run("conv2d_16x32_8x8_3x3", *conv.job)
    for name, p in blocked_gemms(pcfg):
        d.run(name, p.dram, p.insn_addr, p.n_insns)
    d.close()
    return {"programs": 4, "mismatches": len(d.mismatches), "conv2d_cycles": conv.sim_cycles}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--random", type=int, default=200, help="random programs on --config (seeds S..S+N-1)")
    ap.add_argument("--seed", type=int, default=0, help="first random seed S")
    ap.add_argument("--pynq-random", type=int, default=0, help="random programs on pynq-z1 (same seeds)")
    ap.add_argument("--no-long-gemm", action="store_true", help="skip the 512^3 blocked GEMM on pynq-z1")
    ap.add_argument("--no-pgo", action="store_true", help="the 512^3 GEMM on the plain harness build, not the "
                    "profile-guided one")
    ap.add_argument("--long-gemm-repeat", type=int, default=3, help="runs of the 512^3 GEMM (best reported)")
    ap.add_argument("--resnet18", action="store_true", help="also ResNet-18 whole network on pynq-z1 (minutes)")
    ap.add_argument("--pynq", action="store_true", help="also the compiled conv2d layer + blocked GEMMs on pynq-z1")
    args = ap.parse_args(argv)
    if args.random < 0 or args.pynq_random < 0:
        raise SystemExit("--random/--pynq-random must be >= 0")
    if args.long_gemm_repeat < 1:
        raise SystemExit("--long-gemm-repeat must be >= 1")
    cfg = make_config(args.config)
    res = programs_and_random(cfg, args.random, args.seed)
    print(f"{cfg.name}: {res['programs']} programs, {res['mismatches']} mismatches, {res['cycles']:,} cycles, "
          f"RTL {res['rtl_wall_s']} s ({res['cycles_per_s']} cycles/s), total {res['wall_s']} s", flush=True)
    out = dict(res)
    out["random_runs"] = {cfg.name: {k: res[k] for k in ("random", "seed", "mismatches", "wall_s")}}
    if args.pynq_random:
        pr = programs_and_random(make_config("pynq-z1"), args.pynq_random, args.seed, suite=False)
        print(f"pynq-z1: {pr['random']} random programs, {pr['mismatches']} mismatches, {pr['wall_s']} s", flush=True)
        out["random_runs"]["pynq-z1"] = {k: pr[k] for k in ("random", "seed", "mismatches", "wall_s", "cycles_per_s")}
        out["mismatches"] += pr["mismatches"]
    if not args.no_long_gemm:
        out.update(long_gemm(pgo=not args.no_pgo, repeat=args.long_gemm_repeat))
        out["mismatches"] += int(out["long_gemm_mismatch"])
    if args.pynq:
        out["pynq"] = pynq_workloads()
        out["mismatches"] += out["pynq"]["mismatches"]
    if args.resnet18:
        out["resnet18_rtl"] = resnet18_rtl()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
