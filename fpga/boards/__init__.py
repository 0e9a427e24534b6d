"""PYNQ boards: one module per board (``pynq_z1``, ``pynq_z2``, ``ultra96``, ``zcu104``), each defining ``BOARD``."""
from __future__ import annotations

import importlib

from fpga.zynq_shell import Board

#: board name (as on the command line) -> module in this package
MODULES = {"pynq-z1": "pynq_z1", "pynq-z2": "pynq_z2", "ultra96": "ultra96", "zcu104": "zcu104"}


def board_names() -> list[str]:
    return list(MODULES)


def get_board(name: str) -> Board:
    """The :class:`Board` called ``name``; raises ValueError naming the known boards."""
    if name not in MODULES:
        raise ValueError(f"unknown PYNQ board {name!r}; boards: {', '.join(MODULES)}")
    return importlib.import_module(f"fpga.boards.{MODULES[name]}").BOARD
