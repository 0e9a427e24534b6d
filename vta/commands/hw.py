"""``vta hw verilog|synth|timing|build``: generate the accelerator's Verilog, synthesize it with yosys for a resource
estimate, measure its Fmax (``timing``), write a PYNQ board's Vivado project (Zynq shell) or build the ULX3S self-test bitstream."""
from __future__ import annotations

import argparse
import json
import sys

from fpga.boards import board_names
from isa import make_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hw", help="RTL: write Verilog, synthesize for resource estimates")
    hs = p.add_subparsers(dest="hw_command", metavar="HW_COMMAND")
    hs.required = True
    v = hs.add_parser("verilog", help="write the top-level Verilog (vta_top.v)")
    v.add_argument("--config", default="pynq-z1", help="preset name or JSON file (default pynq-z1)")
    v.add_argument("-o", "--out", default=".", help="output directory (default .)")
    v.set_defaults(func=run_verilog)
    s = hs.add_parser("synth", help="synthesize with yosys and print LUT/FF/DSP/BRAM next to the device capacity")
    s.add_argument("--config", default="pynq-z1", help="preset name or JSON file (default pynq-z1)")
    s.add_argument("--family", choices=("xc7", "ecp5"), help="target family (default: from the config's fpga_part)")
    s.add_argument("--board", choices=board_names(),
                   help="synthesize the accelerator as it sits in this board's Zynq shell, against its device")
    s.add_argument("--json", action="store_true", help="end with one JSON object")
    s.set_defaults(func=run_synth)
    t = hs.add_parser("timing", help="Fmax of a config's design: nextpnr-ecp5 (ECP5 parts) or the calibrated yosys "
                                     "estimate (Xilinx parts), against the config's clock_mhz")
    t.add_argument("--config", default="pynq-z1", help="preset name or JSON file (default pynq-z1)")
    t.add_argument("--part", help="FPGA part to time for instead of the config's fpga_part")
    t.add_argument("--no-cache", action="store_true", help="rerun the tools even if build/timing/ has this design")
    t.add_argument("--json", action="store_true", help="end with one JSON object")
    t.set_defaults(func=run_timing)
    b = hs.add_parser("build", help="PYNQ boards: Vivado project of the Zynq shell (run when vivado is on PATH); "
                                    "ulx3s: self-test bitstream (open tools)")
    b.add_argument("--board", required=True, choices=("ulx3s",) + tuple(board_names()))
    b.add_argument("--config", help="preset name or JSON file (default: the board's, e.g. pynq-z1, ultra96, ecp5-85f)")
    b.add_argument("--name", default="vta", help="PYNQ boards: base name of the .bit/.hwh (default vta)")
    b.add_argument("--no-run", action="store_true", help="PYNQ boards: write the project, do not run Vivado")
    b.add_argument("--self-test", action="store_true",
                   help="pynq-z1: the old self-test system (on-chip RAM, LEDs) as a Vivado plan instead of the shell")
    b.add_argument("--program", default="relu",
                   help="self-test systems: instruction-suite program run and checked on the board (default relu)")
    b.add_argument("-o", "--out", required=True, help="output directory")
    b.add_argument("--json", action="store_true", help="end with one JSON object")
    b.set_defaults(func=run_build)


def run_verilog(args: argparse.Namespace) -> int:
    from hw.verilog import write

    cfg = make_config(args.config)
    path = write(cfg, args.out)
    print(f"wrote {path} ({path.stat().st_size} bytes) for config {cfg.name}")
    return 0


def run_synth(args: argparse.Namespace) -> int:
    from hw.synth import synthesize

    cfg = make_config(args.config)
    if args.board:
        from fpga.shell_synth import synthesize_shell

        print(f"synthesizing {cfg.name} in the {args.board} shell (vta_accel) with yosys - this can take minutes")
        rep = synthesize_shell(args.board, cfg)
    else:
        print(f"synthesizing {cfg.name} with yosys ({args.family or 'auto'}) - this can take minutes for large configs")
        rep = synthesize(cfg, args.family)
    print(f"  device {rep['device']}")
    for k in ("LUT", "FF", "DSP", "BRAM"):
        print(f"  {k:<5} {rep['counts'][k]:>8} / {rep['capacity'][k]:<8} ({rep['utilization_pct'][k]}%)")
    print(f"  fits: {rep['fits']}")
    if args.json:
        print(json.dumps(rep))
    return 0


def run_timing(args: argparse.Namespace) -> int:
    from fpga.timing import method_for, timing_record

    cfg = make_config(args.config)
    if args.part:
        cfg = cfg.replace(fpga_part=args.part)
    method = method_for(cfg)  # a missing or unknown part is a clear error before anything runs
    print(f"timing {cfg.name} on {cfg.fpga_part} ({method}) - place and route or synthesis can take minutes")
    rec = timing_record(cfg, use_cache=not args.no_cache)
    path = rec["critical_path"] or {}
    verdict = "meets" if rec["meets"] else "does NOT meet"
    print(f"  Fmax {rec['fmax_mhz']} MHz: {verdict} the config's {rec['clock_mhz']:g} MHz"
          + (" (cached)" if rec.get("cached") else ""))
    print(f"  critical path {path.get('from')} -> {path.get('to')} ({path.get('delay_ns')} ns)")
    print(f"  method: {rec['method']}")
    if args.json:
        print(json.dumps(rec))
    return 0


def run_build(args: argparse.Namespace) -> int:
    if args.board in board_names() and not args.self_test:
        return _run_pynq_project(args)
    from fpga.build import BOARDS, build_board

    if args.board not in BOARDS:
        raise ValueError(f"--self-test is available for {', '.join(BOARDS)}, not {args.board}")
    cfg = make_config(args.config or BOARDS[args.board])
    what = "bitstream" if args.board == "ulx3s" else "Vivado build plan"
    print(f"{args.board}: {what} for config {cfg.name} in {args.out} - an ECP5 build can take minutes")
    from fpga.timing import PlaceRouteError

    try:
        rep = build_board(args.board, args.out, cfg, args.program)
    except PlaceRouteError as exc:  # a missed clock is a result to report, not a crash
        print(f"vta hw build: error: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"board": args.board, "config": cfg.name, "error": str(exc), **exc.record}))
        return 1
    if args.board == "ulx3s":
        print(f"  bitstream {rep['bitstream']} ({rep['bitstream_bytes']} bytes)")
        for clk, f in rep["fmax_mhz"].items():
            print(f"  Fmax {clk}: {f} MHz (board clock {rep['clock_mhz']} MHz)")
    else:
        print(f"  part {rep['part']}: {', '.join(rep['files'])}")
        print(f"  {rep['note']}")
    if args.json:
        print(json.dumps(rep))
    return 0


def _run_pynq_project(args: argparse.Namespace) -> int:
    from fpga.boards import get_board
    from fpga.vivado_project import write_project

    cfg = make_config(args.config or get_board(args.board).default_config)
    rep = write_project(args.board, args.out, cfg, name=args.name, run=False if args.no_run else None)
    print(f"{rep['board']} ({rep['part']}): Vivado project for config {cfg.name} in {rep['dir']}")
    print(f"  FCLK0 {cfg.clock_mhz:g} MHz, HP0 {cfg.bus_width} bits, config signature {rep['signature']}")
    for a in rep["address_map"]:
        print(f"  {a['segment']:<36} 0x{a['offset']:08X} +0x{a['range']:X}")
    if rep["vivado_ran"]:
        print(f"  wrote {rep['bitstream']} and {rep['hwh']}")
    else:
        print("  vivado is not on PATH; on a machine with Vivado run:")
        print(f"    {rep['command']}")
        print(f"  it writes {args.name}.bit and {args.name}.hwh; copy both to the board (docs/fpga.md)")
    if args.json:
        print(json.dumps(rep))
    return 0
