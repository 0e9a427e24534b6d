"""RTL co-simulation benchmark: runs the instruction suite and random programs (tiny) on the RTL under
Verilator and on the simulator; prints per-program results and, last, one JSON line with
``cycles_per_s`` (RTL co-simulation speed), ``programs`` and ``mismatches``."""
from __future__ import annotations

import argparse
import json
import time

from hw.cosim.compare import compare
from hw.cosim.runner import build
from hw.random_programs import random_program
from isa import make_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--random", type=int, default=200, help="random programs (fixed seeds 0..N-1)")
    args = ap.parse_args()
    cfg = make_config(args.config)
    from jit_runtime.suite import suite_cases

    progs = []
    for name, b in suite_cases(cfg).items():
        p, _ = b()
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
    print(json.dumps({"config": cfg.name, "programs": len(res), "mismatches": len(bad), "cycles": cycles,
                      "wall_s": round(wall, 2), "build_s": round(build_s, 2),
                      "cycles_per_s": round(cycles / wall, 1)}))


if __name__ == "__main__":
    main()
