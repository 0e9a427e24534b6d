"""``vta disasm FILE [--json]``: print a saved program's instructions (numbered) and a summary."""
from __future__ import annotations

import argparse
import json

from isa import disassemble
from jit_runtime.program import load_program


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("disasm", help="disassemble a saved program (.vtaprog)",
                       description="Print every instruction of a program saved by the runtime, with its index, "
                                   "then a summary (counts by kind and unit, dependency flags, uop cache, buffers).")
    p.add_argument("file", help="program file written by Program.save / CommandQueue.finalize().save")
    p.add_argument("--json", action="store_true", help="end with one JSON line holding the summary")
    p.add_argument("--layer", metavar="N|NAME", help="FILE is an exported module (.vtamod): disassemble the program "
                   "of accelerator layer N (0-based) or NAME; without it the module's layers are listed")
    p.set_defaults(func=run)


def list_layers(path: str, as_json: bool) -> int:
    """An exported module's accelerator programs: index, layer, instructions, DRAM bytes."""
    from jit_runtime.exported import load_module

    m = load_module(path)
    progs = m.layer_programs()
    print(f"module {m.name!r}: config {m.cfg.name}, {len(m.steps)} steps, {len(progs)} accelerator programs "
          f"(vta disasm/sim {path} --layer N)")
    for i, (name, call, prog) in enumerate(progs):
        print(f"  {i:>3}  {name}{f'#{call}' if call else ''}: {prog.n_insns} instructions, DRAM image {prog.dram.size} bytes")
    if as_json:
        print(json.dumps({"module": m.name, "config": m.cfg.name, "programs": [
            {"index": i, "layer": name, "call": call, "n_insns": prog.n_insns} for i, (name, call, prog) in enumerate(progs)]}))
    return 0


def run(args: argparse.Namespace) -> int:
    from jit_runtime.module_file import FORMAT, peek_format
    from vta.commands.sim import load_program_or_layer

    if args.layer is None and peek_format(args.file) == FORMAT:
        return list_layers(args.file, args.json)
    prog = load_program_or_layer(args.file, args.layer)
    insns = prog.instructions()
    summary = prog.summary()
    print(f"program {prog.name!r}: config {prog.cfg.name}, {prog.n_insns} instructions at byte "
          f"{prog.insn_addr:#x}, DRAM image {prog.dram.size} bytes")
    print(disassemble(insns, numbered=True), end="")
    print("summary")
    print("  by kind:  " + ", ".join(f"{k} {v}" for k, v in summary["by_kind"].items()))
    print("  by unit:  " + ", ".join(f"{k} {v}" for k, v in summary["by_unit"].items()))
    print("  deps:     " + (", ".join(f"{k} {v}" for k, v in summary["dep_flags"].items()) or "none"))
    if summary["uop_cache"]:
        print("  uop cache: " + ", ".join(f"{k} {v}" for k, v in summary["uop_cache"].items()))
    for name, b in summary["buffers"].items():
        print(f"  buffer {name}: addr {b['addr']:#x} shape {tuple(b['shape'])} {b['dtype']}")
    if args.json:
        print(json.dumps(summary))
    return 0
