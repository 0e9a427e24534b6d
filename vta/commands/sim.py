"""``vta sim FILE [--device sim] [--trace T.json] [--timeline T.png] [--json]``: replay a saved program."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from jit_runtime.device import device_names
from jit_runtime.program import load_program
from simulator.budget import DEFAULT_MAX_CYCLES
from vta.checks import check_output_paths

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
    p.add_argument("--layer", metavar="N|NAME", help="FILE is an exported module (.vtamod): run the program of "
                   "accelerator layer N (0-based, or its name; a layer of several programs: NAME#CALL); "
                   "`vta disasm FILE.vtamod` lists them")
    p.add_argument("--force", action="store_true", help="overwrite existing --trace/--timeline files")
    p.add_argument("--max-cycles", type=int, metavar="N", help="cycle budget of the simulator devices: stop with an "
                   f"error past N cycles (default {DEFAULT_MAX_CYCLES:,}; 0: no limit)")
    p.set_defaults(func=run)


def load_program_or_layer(path: str, layer: str | None):
    """The program in ``path``: a ``.vtaprog``, or with ``layer`` one accelerator layer's program of an exported
    module (``N``, ``NAME`` or ``NAME#CALL``)."""
    from jit_runtime.module_file import FORMAT, peek_format

    if peek_format(path) != FORMAT:
        if layer is not None:
            raise ValueError(f"--layer selects a program of an exported module (.vtamod); {path} is not one")
        return load_program(path)
    from jit_runtime.exported import load_module

    progs = load_module(path).layer_programs()
    names = [f"{name}#{c}" if sum(n == name for n, _, _ in progs) > 1 else name for name, c, _ in progs]
    if layer is None:
        raise ValueError(f"{path} is an exported module of {len(progs)} accelerator programs: choose one with --layer "
                         f"N (0..{len(progs) - 1}) or a name ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})")
    if layer.isdigit() and int(layer) < len(progs):
        return progs[int(layer)][2]
    if layer in names:
        return progs[names.index(layer)][2]
    raise ValueError(f"--layer {layer!r}: the module has accelerator programs 0..{len(progs) - 1} named "
                     f"{', '.join(names[:6])}{', ...' if len(names) > 6 else ''}")


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f} %"


def run(args: argparse.Namespace) -> int:
    if args.trace and args.timeline and Path(args.trace).resolve() == Path(args.timeline).resolve():
        raise ValueError(f"--trace and --timeline name the same file {args.trace}")
    check_output_paths({"--trace": args.trace, "--timeline": args.timeline}, {"program file": args.file}, args.force)
    prog = load_program_or_layer(args.file, args.layer)
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
