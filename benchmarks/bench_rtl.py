"""RTL co-simulation benchmark: runs the instruction suite, blocked GEMMs and random programs (tiny) on the RTL
under Verilator and on the simulator; with ``--pynq`` also a compiled conv2d layer and the blocked GEMMs on
pynq-z1. Prints per-program mismatches and, last, one JSON line with ``cycles_per_s`` (RTL co-simulation
speed), ``programs`` and ``mismatches`` (and ``pynq``: the pynq-z1 programs, their mismatches and the conv2d
layer's cycles)."""
from __future__ import annotations

import argparse
import json
import time

from hw.cosim.compare import compare
from hw.cosim.runner import build
from hw.cosim.workloads import blocked_gemms
from hw.random_programs import random_program
from isa import make_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--random", type=int, default=200, help="random programs (fixed seeds 0..N-1)")
    ap.add_argument("--pynq", action="store_true",
                    help="also the compiled conv2d layer + blocked GEMMs on pynq-z1 (first build ~3-4 min)")
    args = ap.parse_args()
    cfg = make_config(args.config)
    from jit_runtime.suite import suite_cases

    progs = []
    for name, b in suite_cases(cfg).items():
        p, _ = b()
        progs.append((name, p.dram, p.insn_addr, p.n_insns))
    for name, p in blocked_gemms(cfg)[2:]:  # the default-plan blocked GEMM (the suite has gemm_vt1/vt2)
        progs.append((name, p.dram, p.insn_addr, p.n_insns))
    for s in range(args.random):
        p = random_program(cfg, s)
        progs.append((p.name, p.dram, p.insn_addr, p.n_insns))
    t = time.time()
    build(cfg)
    build_s = time.time() - t
    t = time.time()
    res = compare(cfg, progs)
    wall = time.time() - t
    bad = [c for c in res if not c.ok]
    for c in bad:
        print(f"MISMATCH {c.name}: sim {c.sim_cycles} rtl {c.rtl_cycles} dram_equal={c.dram_equal}")
    cycles = sum(c.rtl_cycles for c in res if c.rtl_cycles > 0)
    print(f"{len(res)} programs, {cycles} cycles in {wall:.1f} s (build {build_s:.1f} s)")
    out = {"config": cfg.name, "programs": len(res), "mismatches": len(bad), "cycles": cycles,
           "wall_s": round(wall, 2), "build_s": round(build_s, 2), "cycles_per_s": round(cycles / wall, 1)}
    if args.pynq:
        out["pynq"] = pynq_workloads()
    print(json.dumps(out))


def pynq_workloads() -> dict:
    """The compiled conv2d layer and the blocked GEMMs on pynq-z1, RTL vs simulator (one RTL process)."""
    import numpy as np

    from hw.cosim.runner import run_programs
    from hw.cosim.workloads import compiled_conv2d

    pcfg = make_config("pynq-z1")
    conv = compiled_conv2d(pcfg)
    names, jobs, ref = ["conv2d_16x32_8x8_3x3"], [conv.job], [(conv.sim_dram, conv.sim_cycles)]
    for name, p in blocked_gemms(pcfg):
        img = p.dram.copy()
        ref.append((img, int(conv.device.sim.run(img, p.insn_addr, p.n_insns).cycles)))
        names.append(name)
        jobs.append((p.dram.copy(), p.insn_addr, p.n_insns))
    t = time.time()
    build(pcfg)
    build_s = time.time() - t
    rtl = run_programs(pcfg, jobs)
    bad = [n for n, (img, cyc), r in zip(names, ref, rtl)
           if r.timeout or r.cycles != cyc or not np.array_equal(r.dram, img)]
    ok_out = bool(np.array_equal(conv.read_output(rtl[0].dram), conv.expected))
    for n, (_, cyc), r in zip(names, ref, rtl):
        print(f"pynq-z1 {n}: sim {cyc} rtl {r.cycles}{'' if n not in bad else '  MISMATCH'}")
    return {"programs": len(jobs), "mismatches": len(bad) + (not ok_out), "conv2d_cycles": conv.sim_cycles,
            "cycles": {n: r.cycles for n, r in zip(names, rtl)}, "build_s": round(build_s, 2)}


if __name__ == "__main__":
    main()
