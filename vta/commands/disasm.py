"""``vta disasm FILE [--json]``: print a saved program's instructions (numbered) and a summary."""
from __future__ import annotations

import argparse
import json

from isa import disassemble
from jit_runtime.program_file import load_program


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("disasm", help="disassemble a saved program (.vtaprog)",
                       description="Print every instruction of a program saved by the runtime, with its index, "
                                   "then a summary (counts by kind and unit, dependency flags, uop cache, buffers).")
    p.add_argument("file", help="program file written by Program.save / CommandQueue.finalize().save")
    p.add_argument("--json", action="store_true", help="end with one JSON line holding the summary")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    prog = load_program(args.file)
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
