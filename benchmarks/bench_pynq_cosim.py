"""The pynq host driver on the RTL: programs run through ``jit_runtime.devices_pynq`` (the code a PYNQ board
runs) on the RTL-backed pynq shim (``hw.cosim.pynq_shim``: Overlay/MMIO/allocate/Interrupt over the
Verilator model, DRAM at a DDR-like physical address), each one compared with the cycle-accurate simulator
(DRAM bytes and cycle count):

- the instruction suite,
- ``--random`` random programs (fixed seeds 0..N-1),
- every accelerator layer of a small compiled CNN (3 convolutions + a dense layer), whose output is also
  compared with the same model built for the ``sim`` target.

All in one simulator process (the design is reset once, when the overlay loads, as on a board). Last line:
one JSON object with ``programs``, ``mismatches``, ``model_output_equal`` and the co-simulation speed.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
import types

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
    args = ap.parse_args()

    from compiler.accel_backend import SimAccelBackend
    from compiler.executor import build, register_accel_backend
    from fpga.boards import get_board
    from fpga.vivado_project import write_sim_overlay
    from hw.cosim.pynq_check import CrossCheckDevice
    from hw.cosim.pynq_shim import PynqShim
    from hw.cosim.runner import build as build_rtl
    from hw.random_programs import random_program
    from isa import make_config
    from jit_runtime.devices_pynq import PynqDevice
    from jit_runtime.suite import suite_cases

    cfg = make_config(args.config)
    board = get_board(args.board)
    t = time.time()
    build_rtl(cfg)
    build_s = time.time() - t
    counts = {}
    with tempfile.TemporaryDirectory(prefix="vta-bench-pynq-") as td, \
            PynqShim(phys_base=board.fam.shim_phys_base, mem_bytes=64 << 20) as shim:
        bit = write_sim_overlay(board.name, cfg, td)
        t0 = time.time()
        xc = CrossCheckDevice(cfg, PynqDevice(cfg, bit, pynq=shim))
        start_s = time.time() - t0
        t0 = time.time()
        for name, make in suite_cases(cfg).items():
            p = make()[0]
            xc.label = f"suite:{name}"
            xc.run(p.dram.copy(), p.insn_addr, p.n_insns)
        counts["suite"] = len(xc.checks)
        for s in range(args.random):
            p = random_program(cfg, s)
            xc.label = f"random:{s}"
            xc.run(p.dram.copy(), p.insn_addr, p.n_insns)
        counts["random"] = len(xc.checks) - counts["suite"]
        # the model: its accelerator layers through the same driver (the overlay already loaded), cross-checked
        pynq_api = types.SimpleNamespace(Overlay=lambda path: shim.overlay, MMIO=shim.MMIO,
                                         Interrupt=shim.Interrupt, allocate=shim.allocate)
        register_accel_backend("pynq-crosscheck", lambda config, **kw: SimAccelBackend(cfg, device=xc), replace=True)
        rng = np.random.default_rng(0)
        calib = rng.standard_normal((8, 3, 8, 8)).astype(np.float32)
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
        n_before = len(xc.checks)
        xc.label = "model"
        mod = build(small_model(), cfg, target="pynq-crosscheck", calibration=calib, progress=False)
        mod.set_input("input", x)
        got = mod.run()
        counts["model_layers"] = len(xc.checks) - n_before
        wall = time.time() - t0
        # the official target (a fresh driver on the loaded overlay) against the sim target
        mp = build(small_model(), cfg, target="pynq", calibration=calib, progress=False,
                   target_options={"bitstream": bit, "pynq": pynq_api})
        mp.set_input("input", x)
        got_target = mp.run()
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
                      "sim_start_s": round(start_s, 2), "build_s": round(build_s, 2),
                      "flush": shim.stats["flush"], "invalidate": shim.stats["invalidate"],
                      "irq_waits": shim.stats["irq_wait"]}))


if __name__ == "__main__":
    main()
