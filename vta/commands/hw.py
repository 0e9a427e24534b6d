"""``vta hw verilog|synth|build``: generate the accelerator's Verilog, synthesize it with yosys for a resource
estimate, or build the self-test system for a board (ULX3S bitstream, PYNQ-Z1 Vivado plan)."""
from __future__ import annotations

import argparse
import json

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
    s.add_argument("--json", action="store_true", help="end with one JSON object")
    s.set_defaults(func=run_synth)
    b = hs.add_parser("build", help="board build of the self-test system (fpga/): "
                                    "ulx3s bitstream or pynq-z1 Vivado plan")
    b.add_argument("--board", required=True, choices=("ulx3s", "pynq-z1"))
    b.add_argument("--config", help="preset name or JSON file (default: ecp5-85f for ulx3s, pynq-z1 for pynq-z1)")
    b.add_argument("--program", default="relu",
                   help="instruction-suite program run and checked on the board (default relu)")
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
    print(f"synthesizing {cfg.name} with yosys ({args.family or 'auto'}) - this can take minutes for large configs")
    rep = synthesize(cfg, args.family)
    print(f"  device {rep['device']}")
    for k in ("LUT", "FF", "DSP", "BRAM"):
        print(f"  {k:<5} {rep['counts'][k]:>8} / {rep['capacity'][k]:<8} ({rep['utilization_pct'][k]}%)")
    print(f"  fits: {rep['fits']}")
    if args.json:
        print(json.dumps(rep))
    return 0


def run_build(args: argparse.Namespace) -> int:
    from fpga.build import BOARDS, build_board

    cfg = make_config(args.config or BOARDS[args.board])
    what = "bitstream" if args.board == "ulx3s" else "Vivado build plan"
    print(f"{args.board}: {what} for config {cfg.name} in {args.out} - an ECP5 build can take minutes")
    rep = build_board(args.board, args.out, cfg, args.program)
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
