"""Fixtures the pynq-shim tests share: the simulated overlay of the tiny config for the PYNQ-Z1 and one RTL-backed
pynq shim process per test module."""
from __future__ import annotations

import pytest

from isa import make_config

SHIM_CONFIG = "tiny"
SHIM_BOARD = "pynq-z1"


@pytest.fixture(scope="module")
def overlay(tmp_path_factory):
    """The .bit/.hwh pair the shim loads: tiny's system for the PYNQ-Z1."""
    from fpga.vivado_project import write_sim_overlay

    return write_sim_overlay(SHIM_BOARD, make_config(SHIM_CONFIG), tmp_path_factory.mktemp("overlay"))


@pytest.fixture(scope="module")
def shim():
    """A PynqShim with 16 MiB of contiguous memory at the board family's physical base."""
    from fpga.boards import get_board
    from hw.cosim.pynq_shim import PynqShim

    with PynqShim(phys_base=get_board(SHIM_BOARD).fam.shim_phys_base, mem_bytes=16 << 20) as s:
        yield s
