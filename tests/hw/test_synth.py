"""Yosys synthesis of the tiny config (Xilinx 7-series and ECP5) and ``vta hw synth --json``."""
from __future__ import annotations

import json

import pytest

from hw.synth import parse_stat
from vta.cli import main


def test_parse_stat_xc7():
    text = "=== vta_top ===\n   Number of cells: 10\n     DSP48E1 4\n     FDRE 100\n     LUT6 7\n     LUT2 3\n" \
           "     RAMB36E1 2\n     RAMB18E1 3\n"
    c = parse_stat(text, "xc7")
    assert (c["LUT"], c["FF"], c["DSP"], c["BRAM"]) == (10, 100, 4, 4)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["xc7"])  # ecp5 takes as long; run by hand
def test_synth_tiny(family, capsys):
    assert main(["hw", "synth", "--config", "tiny", "--family", family, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rep["fits"] and rep["counts"]["LUT"] > 100 and rep["counts"]["FF"] > 100
