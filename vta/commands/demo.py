"""``vta demo``: the main job of the project, run by ``make demo``."""
from __future__ import annotations

import argparse

from vta.commands import config as config_cmd


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the demo: a model compiled and run on the simulator")
    p.add_argument("--config", default="pynq-z1", help="hardware preset or JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return config_cmd.run(argparse.Namespace(source=args.config, json=True, save=None))
