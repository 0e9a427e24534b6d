"""Board flows (fpga/): the self-test system in amaranth.sim, the PYNQ Vivado plan, the ULX3S bitstream (tiny)."""
from __future__ import annotations

import json

import pytest
from amaranth.sim import Simulator

from isa import make_config

TINY = make_config("tiny")


def _run_soc(test, max_cycles=5000):
    from fpga.soc import SelfTestSoC

    soc = SelfTestSoC(TINY, test)
    sim = Simulator(soc)
    sim.add_clock(1e-8)
    res = {}

    async def tb(ctx):
        for _ in range(max_cycles):
            await ctx.tick()
            if ctx.get(soc.done):
                res.update(passed=ctx.get(soc.passed), failed=ctx.get(soc.failed), cycles=ctx.get(soc.cycles))
                return

    sim.add_testbench(tb)
    sim.run()
    return res


def test_self_test_soc_runs_program_from_axi_ram_and_checks_it():
    """Accelerator + on-chip AXI RAM + controller: the relu program runs and its output matches the simulator's;
    a wrong expectation is caught."""
    from dataclasses import replace

    from fpga.soc import self_test_for

    test = self_test_for(TINY, "relu")
    res = _run_soc(test)
    assert res and res["passed"] == 1 and res["failed"] == 0 and res["cycles"] > 0
    bad = test.expected.copy()
    bad[test.check_words[0] * TINY.bus_bytes] ^= 1
    res = _run_soc(replace(test, expected=bad))
    assert res and res["passed"] == 0 and res["failed"] == 1


def test_axi_ram_read_burst_three_cycles_after_ar_and_holds_under_backpressure():
    """AxiRam reads: the first beat is valid 3 cycles after the AR handshake (the contract's smallest DRAM
    latency, which the DMA engines' address precompute relies on), beats come in order with rlast on the last,
    and a beat is held while rready is low."""
    import numpy as np

    from fpga.axi_ram import AxiRam

    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, 256, dtype=np.uint8)
    ram = AxiRam(4, 256, image)
    words = [int.from_bytes(image[i * 4:i * 4 + 4].tobytes(), "little") for i in range(64)]
    ready_pattern = [1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0] * 4
    got: list = []

    async def tb(ctx):
        ctx.set(ram.araddr, 12 * 4)
        ctx.set(ram.arlen, 9)  # 10 beats
        ctx.set(ram.arvalid, 1)
        ctx.set(ram.rready, 1)
        assert ctx.get(ram.arready)
        await ctx.tick()
        ctx.set(ram.arvalid, 0)
        for cyc in range(1, 60):
            first = not got
            if first:
                assert ctx.get(ram.rvalid) == (cyc >= 3)
            ready = ready_pattern[cyc] if got or cyc > 3 else 1
            ctx.set(ram.rready, ready)
            if ctx.get(ram.rvalid) and ready:
                got.append((ctx.get(ram.rdata), ctx.get(ram.rlast)))
            await ctx.tick()
            if len(got) == 10:
                break
        assert not ctx.get(ram.rvalid) and ctx.get(ram.arready)

    sim = Simulator(ram)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert [d for d, _ in got] == words[12:22]
    assert [last for _, last in got] == [0] * 9 + [1]


def test_parse_fmax_and_utilisation():
    from fpga.build import parse_fmax, parse_utilisation

    log = ("Info: Max frequency for clock '$glbnet$clk': 40.10 MHz (PASS at 25.00 MHz)\n"
           "Info: Device utilisation:\nInfo: \t          TRELLIS_COMB:  9000/83640    10%\n"
           "Info: Max frequency for clock '$glbnet$clk': 38.52 MHz (PASS at 25.00 MHz)\n")
    assert parse_fmax(log) == {"$glbnet$clk": 38.52}
    assert parse_utilisation(log) == {"TRELLIS_COMB": "9000/83640"}


def test_vta_hw_build_pynq_vivado_plan(tmp_path, capsys):
    from vta.cli import main

    out = tmp_path / "pynq"
    assert main(["hw", "build", "--board", "pynq-z1", "--self-test", "--config", "tiny", "-o", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rep["part"] == "xc7z020clg400-1"
    tcl = (out / "top.tcl").read_text()
    assert "create_project" in tcl and "xc7z020clg400-1" in tcl and "write_bitstream" in tcl
    assert "module top" in (out / "top.v").read_text()
    xdc = (out / "top.xdc").read_text()
    assert "set_property LOC H16" in xdc and "create_clock" in xdc  # the xc7z020 clock pin


@pytest.mark.slow
def test_vta_hw_build_ulx3s_bitstream_tiny(tmp_path, capsys):
    from vta.cli import main

    out = tmp_path / "ulx3s"
    assert main(["hw", "build", "--board", "ulx3s", "--config", "tiny", "-o", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out / "top.bit").stat().st_size > 100_000
    assert rep["fmax_mhz"] and min(rep["fmax_mhz"].values()) >= rep["clock_mhz"] == 25.0  # a miss raises instead
    assert rep["meets"] and rep["critical_path"]["from"] and rep["critical_path"]["to"]
