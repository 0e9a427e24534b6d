"""``vta sim FILE [--device sim] [--trace T.json] [--timeline T.png] [--json]``: replay a saved program."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from jit_runtime.device import device_names
from jit_runtime.program_file import load_program
from simulator.budget import DEFAULT_MAX_CYCLES
from vta.checks import check_output_path

UNIT_COLUMNS = ("busy", "stall_token", "stall_port", "stall_queue", "idle", "insns")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sim", help="run a saved program (.vtaprog) on a device and print cycles and utilization",
                       description="Replay a program saved by the runtime on a device, print cycles, "
                                   "utilization, per-unit busy/stall cycles, and compare the outputs with the "
                                   "expected ones stored in the file (exit status 1 on a mismatch).")
    p.add_argument("file", help="program file")
    p.add_argument("--device", default="sim", help=f"device name (registered: {', '.join(device_names())})")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace")
    p.add_argument("--timeline", metavar="OUT.png", help="write a timeline plot")
    p.add_argument("--json", action="store_true", help="end with one JSON line (cycles, utilization, profile)")
    p.add_argument("--max-cycles", type=int, metavar="N", help="cycle budget of the simulator devices: stop with an "
                   f"error past N cycles (default {DEFAULT_MAX_CYCLES:,}; 0: no limit)")
    p.set_defaults(func=run)


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f} %"


def run(args: argparse.Namespace) -> int:
    for option, out in (("--trace", args.trace), ("--timeline", args.timeline)):
        if out:
            check_output_path(out, option, {"program file": args.file})
    if args.trace and args.timeline and Path(args.trace).resolve() == Path(args.timeline).resolve():
        raise ValueError(f"--trace and --timeline name the same file {args.trace}")
    prog = load_program(args.file)
    device = args.device
    if args.max_cycles is not None and device in ("sim", "sim-functional"):
        from simulator import Simulator

        device = Simulator(prog.cfg, timing=device == "sim", trace=bool(args.trace or args.timeline),
                           max_cycles=args.max_cycles or None)
    res = prog.run(device, trace=bool(args.trace or args.timeline))
    prof = res.profile
    print(f"program {prog.name!r} on {args.device} (config {prog.cfg.name}): {prog.n_insns} instructions")
    print(f"cycles: {res.cycles} ({res.cycles / prog.cfg.clock_mhz:.2f} us at {prog.cfg.clock_mhz:g} MHz)")
    if "utilization" in prof:
        port = prof.get("dram_port", {}).get("utilization", 0.0)
        print(f"utilization: GEMM {_pct(prof['utilization'])} of peak MACs, DRAM port {_pct(port)}")
    units = prof.get("units", {})
    if units:
        print(f"  {'unit':<8}" + "".join(f"{c:>13}" for c in UNIT_COLUMNS))
        for name, st in units.items():
            print(f"  {name:<8}" + "".join(f"{st.get(c, 0):>13}" for c in UNIT_COLUMNS))
    bad = prog.mismatches(res.outputs)
    for name in sorted(prog.expected):
        print(f"output {name}: {'MISMATCH' if name in bad else 'matches expected (bit-exact)'}")
    if args.trace:
        res.write_trace(args.trace)
        print(f"trace written to {args.trace}")
    if args.timeline:
        res.plot_timeline(args.timeline)
        print(f"timeline written to {args.timeline}")
    if args.json:
        print(json.dumps({"program": prog.name, "device": args.device, "cycles": res.cycles,
                          "utilization": prof.get("utilization"), "mismatches": bad, "profile": prof}))
    return 1 if bad else 0
