"""``vta config [PRESET|FILE] [--json]``: print a hardware config and its derived quantities."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from isa import make_config, preset_names
from vta.checks import check_output_path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="print a hardware config and its derived table",
                       description=f"Presets: {', '.join(preset_names())}, or a JSON file.")
    p.add_argument("source", nargs="?", default="pynq-z1", help="preset name or JSON file (default pynq-z1)")
    p.add_argument("--json", action="store_true", help="end with one JSON object (config + derived)")
    p.add_argument("--save", metavar="FILE", help="also write the config to FILE as JSON")
    p.add_argument("--force", action="store_true", help="overwrite an existing --save file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.save:
        check_output_path(args.save, "--save", {"config file": args.source if Path(args.source).is_file() else None},
                          args.force)
    cfg = make_config(args.source)
    print(f"vta-stack hardware config: {cfg.name}")
    print("  parameters")
    for k, v in cfg.to_dict().items():
        print(f"    {k:<16} {v}")
    print("  derived")
    for k, v in cfg.derived().items():
        print(f"    {k:<16} {v}")
    if args.save:
        cfg.to_json(args.save)
        print(f"  saved to {args.save}")
    if args.json:
        print(json.dumps({**cfg.to_dict(), **cfg.derived()}))
    return 0
