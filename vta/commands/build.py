"""``vta build MODEL.onnx -o m.vtamod``: compile once, write an exported module the runtime runs alone."""
from __future__ import annotations

import argparse
import logging

from vta.checks import check_output_paths
from vta.commands.run import add_compile_options, compile_for_cli, input_files, make_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="compile an ONNX model for a config and export it (.vtamod) for `vta run` / a board",
                       description="Compile a model as `vta run` would (same quantization and options), run it once on "
                                   "the simulator to record every accelerator program, and write one file holding the "
                                   "instruction streams, micro-kernels, weights, the host-op plan, input/output specs "
                                   "and the config with its signature. `vta run FILE.vtamod` (or "
                                   "jit_runtime.load_module) runs it with numpy alone, e.g. on a PYNQ board.")
    p.add_argument("model", help="ONNX model file (int8 QDQ, or float with --calibrate)")
    p.add_argument("-o", "--out", required=True, metavar="FILE.vtamod", help="the module file to write")
    add_compile_options(p)
    p.add_argument("--input", metavar="FILE", help=".npy/.npz sample input: fixes the input shapes (e.g. the batch); "
                   "default: the model's own shapes")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.getLogger().setLevel(logging.ERROR)
    check_output_paths({"-o": args.out}, input_files(args), args.force)  # before any work
    console = make_console()
    mod, cfg, feeds = compile_for_cli(args, console, target="sim", show=not args.no_progress)
    console.print("recording the accelerator programs (one run on the simulator) ...")
    path = mod.export(args.out, feeds)
    from compiler.graph.partition import node_target

    steps = mod.graph.nodes
    n_accel = sum(node_target(n) == "accel" for n in steps)
    console.print(f"exported {args.model} -> {path} ({path.stat().st_size / 1024:,.1f} KiB; config "
                  f"{getattr(cfg, 'name', '')}, {len(steps)} layers, {n_accel} on the accelerator); run it with "
                  f"`vta run {path}` (numpy alone: pip install vta-stack)")
    return 0
