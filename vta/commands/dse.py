"""``vta dse MODEL.onnx --space SPACE.json [--board B] [--ray ADDRESS] [--workers N] -o DIR``: which accelerator
configuration for this model and this FPGA (docs/dse.md)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fpga.boards import board_names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dse", help="design-space exploration: latency and resources of many configs, the Pareto front",
                       description="Sweeps the HwConfig fields of SPACE.json (lists or ranges over a base config), "
                                   "prunes invalid points, times the model on each (timing engine, no arithmetic), "
                                   "synthesizes with yosys only the points that can be on the front, and writes "
                                   "DIR/dse.jsonl (resumable), DIR/front.json, DIR/table.txt and DIR/pareto.png.")
    p.add_argument("model", help="int8 (QDQ) ONNX model")
    p.add_argument("--space", required=True, help="space JSON: {\"base\": PRESET, \"params\": {FIELD: [..] or "
                                                  "{\"from\", \"to\", \"step\"|\"times\"}}}")
    p.add_argument("--board", choices=board_names(),
                   help="compare against this board's device and prune configs its shell cannot connect "
                        "(default: the device of the base config's fpga_part)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="evaluate as Ray tasks: 'local' starts a local cluster with --workers CPUs, or a cluster "
                        "address (pip install 'vta-stack[ray]')")
    p.add_argument("--workers", type=int, default=None,
                   help="parallel evaluations (default: os.cpu_count(); 0 or 1: in this process); yosys runs are "
                        "as many")
    p.add_argument("--tune", type=int, default=2, metavar="N",
                   help="conv tilings timed per layer shape, as build does (default 2); 1: the analytic choice "
                        "alone (about a third of the work per point)")
    p.add_argument("--no-synth", action="store_true", help="run no synthesis: latencies, estimates, and the syntheses already in the cache")
    p.add_argument("--no-timing", action="store_true",
                   help="no Fmax: synthesize for resources only and take every point's clock as achievable")
    p.add_argument("--synth-cache", help="synthesis cache (JSON lines, shared by sweeps; default DIR/synth-cache.jsonl)")
    p.add_argument("-o", "--out", required=True, help="output directory (a rerun resumes from its dse.jsonl)")
    p.add_argument("--json", action="store_true", help="end with one JSON object (the front and the figures)")
    p.set_defaults(func=run)


def sweep_models(device: str, timing: bool = True):
    """The sweep's ResourceModel (yosys, :mod:`hw.synth`) and TimingModel (:mod:`fpga.timing`; None without
    ``timing``) for a :data:`hw.synth.CAPACITY` device: on the Zynq-7020 (xc7) one yosys run gives both the counts
    and the sta path; ECP5 and UltraScale+ devices are timed by a run of their own (nextpnr; yosys xc7 sta)."""
    from functools import partial

    from compiler.dse import ResourceModel, TimingModel
    from fpga.timing import ROUTING_FACTOR, fmax_from_synthesis, point_timing_key, point_timing_record
    from hw.synth import CAPACITY, design_hash, synth_record

    cap = CAPACITY[device]
    cap = {"LUT": cap["LUT"], "DSP": cap["DSP"], "RAMB36": cap["BRAM"]}
    if not timing:
        return ResourceModel(device, cap, design_hash, synth_record), None
    if device == "xc7":
        return (ResourceModel(device, cap, partial(design_hash, sta=True), partial(synth_record, sta=True)),
                TimingModel(f"yosys sta in the synthesis run x routing factor {ROUTING_FACTOR} (fpga.timing)",
                            from_synthesis=fmax_from_synthesis))
    return (ResourceModel(device, cap, design_hash, synth_record),
            TimingModel("fpga.timing.timing_record per design (nextpnr-ecp5 for ECP5 parts, yosys xc7 sta for "
                        "Xilinx)", key=point_timing_key, evaluate=point_timing_record))


def _resources(args, base_fields: dict):
    from hw.synth import device_for
    from isa import make_config

    if args.board:
        from fpga.shell_synth import DEVICES
        from fpga.boards import get_board

        part = get_board(args.board).part
        device = next(v for k, v in DEVICES.items() if part.startswith(k))
    else:
        device = device_for(make_config(base_fields))
    return sweep_models(device, timing=not args.no_timing)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from compiler.dse import parse_space, run_sweep
    from compiler.dse.report import plot, table
    from compiler.scaleout import make_runner
    from isa import make_config

    model = Path(args.model)
    if not model.is_file():
        raise FileNotFoundError(f"model {args.model} does not exist")
    if args.workers is not None and args.workers < 0:
        raise ValueError(f"--workers must be >= 0, got {args.workers}")
    space = parse_space(args.space)
    check = None
    if args.board:
        from fpga.boards import get_board

        board = get_board(args.board)

        def check(fields):
            board.check_config(make_config(fields))
    resources, timing = _resources(args, space.base.to_dict())
    out = Path(args.out)
    print(f"{space.size} points ({len(space.valid)} valid, {len(space.pruned)} rejected by the config validator); "
          f"device {resources.device}; log {out / 'dse.jsonl'}")
    with make_runner(args.ray, args.workers) as runner:
        res = run_sweep(model, space, out, resources, runner, synth=not args.no_synth, synth_cache=args.synth_cache,
                        check=check, progress=sys.stderr.isatty(), tune=args.tune,
                        timing=timing)
    console = Console(width=200)
    console.print(table(res))
    with (out / "table.txt").open("w") as f:
        Console(file=f, width=200).print(table(res))
    png = plot(res, out / "pareto.png", f"{model.name} on {args.board or resources.device}")
    for p in res.pruned:
        print(f"pruned {p['params']}: {p['reason']}")
    best = res.stats.get("best_fitting")
    if best:
        at = "" if best.get("fmax_mhz") is None else f" at {min(best['clock_mhz'], best['fmax_mhz']):g} MHz"
        print(f"fastest config that fits {resources.device}: {best['params']} {best['latency_ms']:.3f} ms{at} "
              f"(LUT {best['LUT']}, DSP {best['DSP']}, RAMB36 {best['RAMB36']}"
              + ("" if best.get("fmax_mhz") is None else f", Fmax {best['fmax_mhz']:g} MHz") + ")")
    print(f"front: {len(res.front)} point(s); wrote {out / 'front.json'}, {out / 'table.txt'}, {png}")
    if args.json:
        print(json.dumps(res.summary()))
    return 0
