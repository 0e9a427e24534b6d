"""Entry point of the ``vta`` command; subcommands live in :mod:`vta.commands`."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import vta.commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vta", description="vta-stack: compile, simulate and build a VTA-style accelerator")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(vta.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"vta.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as exc:  # user errors: one clear line, no traceback
        print(f"vta {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
