"""The pynq host driver on the RTL: programs run through ``jit_runtime.devices_pynq`` (the code a PYNQ board
runs) on the RTL-backed pynq shim (``hw.cosim.pynq_shim``: ``vta_accel``, the module Vivado instantiates, on the
compiled Verilator harness; non-coherent DRAM at a DDR-like physical address; an axi_intc and a UIO device for
the interrupt; pynq's own PynqBuffer/MMIO/Interrupt classes when the ``pynq`` package imports), each one compared
with the cycle-accurate simulator (DRAM bytes and cycle count):

- the instruction suite,
- ``--random`` random programs (fixed seeds 0..N-1),
- a blocked GEMM (``--gemm N``: N^3, the default plan's blocking; a long program for the shim's speed),
- every accelerator layer of a small compiled CNN (3 convolutions + a dense layer), whose output is also
  compared with the same model built for the ``sim`` target.

All in one simulator process (the design is reset once, when the overlay loads, as on a board). The GEMM is made
and started first (``PynqDevice.start``); while the accelerator runs it, the host makes the other programs and
builds the model, as a host keeps working while its accelerator runs (``--no-overlap``: one after the other);
then they run, each after the previous one finished. The cross-check's simulator runs in a worker process
beside the driver (``--sim``). Last line:
one JSON object with ``programs``, ``mismatches``, ``model_output_equal``, ``cycles_per_s`` (the shim's speed end
to end: accelerator cycles per wall second of the whole timed loop, which makes the programs, runs each one
through the driver on the shim and cross-checks it with the simulator, and compiles and runs the model),
``harness_cycles_per_s`` (clock cycles the harness ran per wall second it spent running them: the RTL alone),
``harness_cycles_per_cpu_s`` (the same per CPU second of the harness process, which a loaded machine does not
dilute), ``make_programs_s`` (the part of the timed loop spent making the suite, random and GEMM programs),
``host_cpu_s`` (CPU seconds of this Python process in the timed loop, all its threads: driver, simulator, model;
the harness is another process) and ``pynq_classes``.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np


def small_model():
    from compiler.zoo.builder import OnnxBuilder

    b = OnnxBuilder(11)
    y = b.conv_bn("input", 3, 8, 3)
    y = b.conv_bn(y, 8, 16, 3, stride=2)
    y = b.conv_bn(y, 16, 16, 3)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    return b.model("small_cnn", "input", (1, 3, 8, 8), b.gemm(y, 16, 10))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--board", default="pynq-z1")
    ap.add_argument("--random", type=int, default=60,
                    help="random programs (seeds 0..N-1; hw.random_programs targets the tiny preset: use 0 for others)")
    ap.add_argument("--gemm", type=int, default=256, help="N of the N^3 blocked GEMM (0: none)")
    ap.add_argument("--wait", default="auto", choices=("auto", "irq", "poll"), help="the driver's wait mode")
    ap.add_argument("--no-pynq", action="store_true", help="the shim's own classes even when pynq imports")
    ap.add_argument("--no-overlap", action="store_true",
                    help="make the other programs and build the model after the GEMM finished, not while it runs")
    ap.add_argument("--sim", default="process", choices=("process", "thread", "none"),
                    help="where the cross-check's simulator runs while the driver runs the program (CrossCheckDevice)")
    args = ap.parse_args()

    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.executor import build, register_accel_backend
    from fpga.boards import get_board
    from fpga.vivado_project import write_sim_overlay
    from hw.cosim.pynq_check import CrossCheckDevice
    from hw.cosim.pynq_shim import PynqShim
    from hw.cosim.harness.build import build_harness
    from hw.random_programs import random_program
    from isa import make_config
    from jit_runtime.blocked_gemm import blocked_gemm, default_plan
    from jit_runtime.devices_pynq import PynqDevice
    from jit_runtime.suite import suite_cases

    cfg = make_config(args.config)
    board = get_board(args.board)
    t = time.time()
    build_harness(cfg, top="vta_accel")
    build_s = time.time() - t
    counts = {}
    with tempfile.TemporaryDirectory(prefix="vta-bench-pynq-") as td, \
            PynqShim(phys_base=board.fam.shim_phys_base, mem_bytes=64 << 20,
                     pynq=False if args.no_pynq else "auto") as shim:
        bit = write_sim_overlay(board.name, cfg, td)
        t0 = time.time()
        xc = CrossCheckDevice(cfg, PynqDevice(cfg, bit, pynq=shim, wait=args.wait), worker=args.sim)
        start_s = time.time() - t0
        make_s = 0.0

        def made(make, *a, **kw):  # a program, its making timed (part of the loop's wall time all the same)
            nonlocal make_s
            t = time.perf_counter()
            try:
                return make(*a, **kw)
            finally:
                make_s += time.perf_counter() - t

        t0, cpu0 = time.time(), time.process_time()
        running = False
        if args.gemm:
            from dataclasses import replace

            p, _ = made(blocked_gemm, cfg, replace(default_plan(cfg), n=args.gemm, k=args.gemm, m=args.gemm))
            xc.label = f"gemm{args.gemm}"
            if args.no_overlap:
                xc.run(p.dram.copy(), p.insn_addr, p.n_insns)
            else:  # the host makes the other programs and builds the model while the accelerator runs the GEMM
                xc.start(p.dram.copy(), p.insn_addr, p.n_insns)
                running = True
            counts["gemm"] = 1
        suite = [(name, made(make)[0]) for name, make in suite_cases(cfg).items()]
        randoms = [made(random_program, cfg, s) for s in range(args.random)]
        # the model: its accelerator layers through the same driver (the overlay already loaded), cross-checked
        pynq_api = shim.api()
        register_accel_backend("pynq-crosscheck", lambda config, **kw: SimAccelBackend(cfg, device=xc), replace=True)
        rng = np.random.default_rng(0)
        calib = rng.standard_normal((8, 3, 8, 8)).astype(np.float32)
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
        mod = build(small_model(), cfg, target="pynq-crosscheck", calibration=calib, progress=False)
        mod.set_input("input", x)
        if running:
            xc.finish()
        for name, p in suite:
            xc.label = f"suite:{name}"
            xc.run(p.dram.copy(), p.insn_addr, p.n_insns)
        counts["suite"] = len(suite)
        for s, p in enumerate(randoms):
            xc.label = f"random:{s}"
            xc.run(p.dram.copy(), p.insn_addr, p.n_insns)
        counts["random"] = len(randoms)
        n_before = len(xc.checks)
        xc.label = "model"
        got = mod.run()
        counts["model_layers"] = len(xc.checks) - n_before
        counts = {k: counts[k] for k in ("suite", "random", "gemm", "model_layers") if k in counts}
        wall, host_cpu = time.time() - t0, time.process_time() - cpu0
        xc.close()
        # the official target (a fresh driver on the loaded overlay) against the sim target
        mp = build(small_model(), cfg, target="pynq", calibration=calib, progress=False,
                   target_options={"bitstream": bit, "pynq": pynq_api})
        mp.set_input("input", x)
        got_target = mp.run()
        harness_cycles, harness_s = shim.backend.cycles_run, shim.backend.busy_s
        harness_cpu = shim.backend.h.cpu_seconds()
        classes = "pynq" if shim.pynq is not None else "shim"
    ms = build(small_model(), cfg, target="sim", calibration=calib, progress=False)
    ms.set_input("input", x)
    want = ms.run()
    equal = all(np.array_equal(a, b) for a, b in zip(got, want)) and \
        all(np.array_equal(a, b) for a, b in zip(got_target, want)) and len(got) == len(want)
    bad = xc.mismatches
    for c in bad:
        print(f"MISMATCH {c.name}: sim {c.sim_cycles} pynq/rtl {c.dev_cycles} dram_equal={c.dram_equal}")
    cycles = sum(c.dev_cycles for c in xc.checks)
    print(f"{len(xc.checks)} programs through the pynq driver on the RTL ({counts}), {cycles} cycles in "
          f"{wall:.1f} s; simulator start {start_s:.1f} s; model output equal to the sim target's: {equal}")
    print(json.dumps({"config": cfg.name, "board": board.name, "programs": len(xc.checks), **counts,
                      "mismatches": len(bad), "model_output_equal": bool(equal), "cycles": cycles,
                      "wall_s": round(wall, 2), "cycles_per_s": round(cycles / wall, 1),
                      "make_programs_s": round(make_s, 2), "host_cpu_s": round(host_cpu, 2),
                      "harness_cycles": harness_cycles, "harness_s": round(harness_s, 3),
                      "harness_cycles_per_s": round(harness_cycles / harness_s, 1),
                      "harness_cpu_s": round(harness_cpu, 3),
                      "harness_cycles_per_cpu_s": round(harness_cycles / harness_cpu, 1) if harness_cpu else None,
                      "top": "vta_accel",
                      "pynq_classes": classes, "wait": args.wait, "sim": args.sim, "overlap": not args.no_overlap,
                      "sim_start_s": round(start_s, 2), "build_s": round(build_s, 2),
                      "flush": shim.stats["flush"], "invalidate": shim.stats["invalidate"],
                      "irq_fired": shim.stats["irq_fired"]}))


if __name__ == "__main__":
    main()
