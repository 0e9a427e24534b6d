"""The compiled RTL harness (hw/cosim/harness): agrees with the cocotb bench and the simulator, register access,
the design hash, models on the RTL (``build(..., target="rtl")``, ``vta run --target rtl --check``)."""
from __future__ import annotations


import re

import numpy as np
import pytest

from hw.cosim.harness import Harness, HarnessError, shared_harness
from hw.random_programs import random_program
from hw.regfile import CYCLES, INSN_ADDR, INSN_COUNT
from isa import make_config

TINY = make_config("tiny")


def _suite(cfg):
    from jit_runtime.suite import suite_cases

    return [(name, *(lambda p: (p.dram, p.insn_addr, p.n_insns))(b()[0])) for name, b in suite_cases(cfg).items()]


@pytest.mark.slow
def test_harness_agrees_with_cocotb_on_every_suite_program():
    """Same bytes and cycles from the compiled harness and the cocotb bench (both against the simulator too)."""
    from hw.cosim.runner import run_programs
    from simulator import Simulator

    progs = _suite(TINY)
    cocotb = run_programs(TINY, [(d, a, n) for _, d, a, n in progs])
    h = shared_harness(TINY)
    sim = Simulator(TINY)
    for (name, d, a, n), c in zip(progs, cocotb):
        r = h.run(d, a, n)
        img = d.copy()
        s = sim.run(img, a, n)
        assert not r.timeout and not c.timeout, name
        assert r.cycles == c.cycles == int(s.cycles), (name, r.cycles, c.cycles, s.cycles)
        assert np.array_equal(r.dram, c.dram) and np.array_equal(r.dram, img), name
        assert r.out_of_image == 0


def test_random_programs_match_simulator():
    """Random programs with whole-scratchpad, >256-beat and 4 KiB-crossing transfers and filled token queues."""
    from simulator import Simulator

    with Harness(TINY) as h:  # fresh scratchpads on both sides: random programs may read what they did not load
        sim = Simulator(TINY)
        for seed in range(60):
            p = random_program(TINY, 10_000 + seed)
            img = p.dram.copy()
            s = sim.run(img, p.insn_addr, p.n_insns)
            r = h.run(p.dram, p.insn_addr, p.n_insns)
            assert (r.cycles, r.timeout) == (int(s.cycles), False), p.name
            assert np.array_equal(r.dram, img), p.name


def test_smallest_dram_latency_programs_match_simulator():
    """dram_latency 3, the smallest the contract allows: a load's first beat comes 3 cycles after its grant, when
    the engines' address precompute (g+1, g+2) is just ready. Every suite program (all padding cases) and random
    programs agree with the simulator in bytes and cycles."""
    from simulator import Simulator

    cfg = make_config("tiny", dram_latency=3)
    with Harness(cfg) as h:
        sim = Simulator(cfg)
        progs = [(name, d, a, n) for name, d, a, n in _suite(cfg)]
        progs += [(p.name, p.dram, p.insn_addr, p.n_insns) for p in (random_program(cfg, 20_000 + s) for s in range(20))]
        for name, d, a, n in progs:
            img = d.copy()
            s = sim.run(img, a, n)
            r = h.run(d, a, n)
            assert (r.cycles, r.timeout) == (int(s.cycles), False), name
            assert np.array_equal(r.dram, img), name


def test_registers_and_errors():
    from jit_runtime.suite import suite_cases

    h = shared_harness(TINY)
    prog, _ = suite_cases(TINY)["relu"]()
    r = h.run(prog.dram, prog.insn_addr, prog.n_insns)
    assert h.read_reg(CYCLES) == r.cycles  # the register of the last run, read over AXI4-Lite
    assert h.read_reg(INSN_COUNT) == prog.n_insns
    h.write_reg(INSN_ADDR, 0x1234)
    assert h.read_reg(INSN_ADDR) == 0x1234
    assert h.step(3) is True  # still done: irq stays high until the next start
    with pytest.raises(ValueError, match="outside"):
        h.run(prog.dram, prog.dram.size, 1)
    # a program that never finishes within the limit is reported as a timeout, not a hang
    t = h.run(prog.dram, prog.insn_addr, prog.n_insns, max_cycles=5)
    assert t.timeout and t.cycles == -1


def test_dead_process_is_a_clear_error():
    h = Harness(TINY)
    h._proc.kill()
    h._proc.wait()
    with pytest.raises(HarnessError, match="exited"):
        h.read_reg(CYCLES)
    h.close()


def test_design_key_covers_isa(tmp_path, monkeypatch):
    """An edit anywhere in isa/ changes the Verilog cache key (and so the harness key built on it)."""
    import hw.cosim.runner as runner

    files = runner.isa_files()
    assert any(f.name == "timing.py" for f in files) and any(f.name == "encoding.py" for f in files)
    before = runner.design_key(TINY)
    edited = tmp_path / files[0].name
    edited.write_bytes(files[0].read_bytes() + b"\n# edited\n")
    monkeypatch.setattr(runner, "isa_files", lambda: [edited] + files[1:])
    assert runner.design_key(TINY) != before


def _model():
    from compiler.zoo.builder import OnnxBuilder

    b = OnnxBuilder(3)
    y = b.conv_bn("input", 3, 8, 3)
    y = b.conv_bn(y, 8, 8, 3, stride=2)
    return b.model("m", "input", (1, 3, 6, 6), y)


def test_model_on_rtl_equals_simulator():
    from compiler.executor import build

    rng = np.random.default_rng(2)
    calib = rng.standard_normal((4, 3, 6, 6)).astype(np.float32)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    rtl = build(_model(), TINY, target="rtl", calibration=calib, progress=False)
    sim = build(_model(), TINY, target="sim", calibration=calib, progress=False)
    np.testing.assert_array_equal(rtl(input=x), sim(input=x))
    rows_r = [r for r in rtl.profile() if r["target"] == "accel"]
    rows_s = [r for r in sim.profile() if r["target"] == "accel"]
    assert len(rows_r) == 2 and [r["cycles"] for r in rows_r] == [r["cycles"] for r in rows_s]
    assert all(r["cycles"] > 0 for r in rows_r)


def test_vta_run_check_names_the_first_differing_layer(tmp_path, capsys, monkeypatch):
    import onnx

    from hw.device import RtlDevice
    from vta.cli import main

    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    assert main(["run", str(path), "--config", "tiny", "--calibrate", "2", "--target", "rtl", "--check",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "rtl-check" in out and re.search(r"check: [1-9]\d* layers: bytes and cycles equal", out)
    runs = []
    orig = RtlDevice.run_many

    def off_by_one_later(self, jobs):  # the second layer's RTL run reports one cycle more
        out = orig(self, jobs)
        runs.append(1)
        if len(runs) == 2:
            out[0].cycles += 1
        return out

    monkeypatch.setattr(RtlDevice, "run_many", off_by_one_later)
    assert main(["run", str(path), "--config", "tiny", "--calibrate", "2", "--target", "rtl", "--check",
                 "--no-progress"]) == 2
    err = capsys.readouterr()
    msg = err.err + err.out
    assert "cycles: simulator" in msg and "layer '" in msg
    assert main(["run", str(path), "--config", "tiny", "--calibrate", "2", "--check"]) == 2
    assert "needs --target rtl" in "".join(capsys.readouterr())


_TWO_PROCESS = """module m(clk, rst, en, d, q, p, x);
  input clk;
  input rst;
  input en;
  input [3:0] d;
  output [3:0] q;
  output [3:0] p;
  output [3:0] x;
  reg [3:0] q = 4'h0;
  reg [3:0] \\$1 ;
  reg [3:0] p = 4'h0;
  reg [3:0] \\$2 ;
  reg [3:0] x = 4'h0;
  reg [3:0] \\$3 ;
  wire [3:0] y;
  always @(posedge clk)
    q <= \\$1 ;
  always @(posedge clk)
    p <= \\$2 ;
  always @(posedge clk)
    x <= \\$3 ;
  always @* begin
    if (\\$auto$verilog_backend.cc:2355:dump_module$3 ) begin end
    \\$1  = q;
    if (en) begin
      \\$1  = d;
    end
    if (rst) begin
      \\$1  = 4'h0;
    end
  end
  always @* begin
    if (\\$auto$verilog_backend.cc:2355:dump_module$3 ) begin end
    \\$2  = d;
    if (rst) begin
      \\$2  = 4'h0;
    end
  end
  always @* begin
    if (\\$auto$verilog_backend.cc:2355:dump_module$3 ) begin end
    \\$3  = x;
    if (en) begin
      \\$3  = d;
    end
  end
  assign y = \\$3 ;
endmodule
"""


def test_flop_registers_rewrites_only_the_exact_two_process_shape():
    """Hold and plain registers become one clocked process with the same priorities (rst last = first); a next
    value with another reader (``y`` reads ``$3``) keeps its two processes."""
    from hw.cosim.harness.rewrites import flop_registers

    out, n = flop_registers(_TWO_PROCESS)
    assert n == 2
    assert "  always @(posedge clk) begin\n    if (rst) q<= 4'h0;\n    else if (en) q<= d;\n  end\n" in out
    assert "  always @(posedge clk) begin\n    if (rst) p<= 4'h0;\n    else p<= d;\n  end\n" in out
    assert "    x <= \\$3 ;\n" in out and "    \\$3  = x;\n" in out  # untouched
    assert "\\$1  = q" not in out and "\\$2  = d" not in out
    assert flop_registers(out) == (out, 0)


_FSM = """module m(clk, rst, go, d, q);
  input clk;
  input rst;
  input go;
  input [1:0] d;
  output [1:0] q;
  reg [1:0] q = 2'h0;
  reg [1:0] \\$1 ;
  reg [1:0] s = 2'h0;
  reg [1:0] \\$2 ;
  always @(posedge clk)
    q <= \\$1 ;
  always @(posedge clk)
    s <= \\$2 ;
  always @* begin
    if (\\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end
    \\$1  = q;
    if (go) begin
      casez (d)
        2'h1:
          \\$1  = 2'h2;
        default:
          \\$1  = d;
      endcase
    end
    if (rst) begin
      \\$1  = 2'h0;
    end
  end
  always @* begin
    if (\\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end
    \\$2  = s;
    if (go) begin
      \\$2  = \\$2  + 2'h1;
    end
  end
endmodule
"""


def test_flop_processes_moves_nested_next_state_logic_into_the_clocked_process():
    """A next value computed under nested conditions and a case becomes the register's own clocked process (the
    hold dropped, the body kept, blocking writes as nonblocking ones in the same order); one whose process reads
    its own next value (``$2 = $2 + 1``) keeps its two processes."""
    from hw.cosim.harness.rewrites import flop_processes, per_module

    out, n = flop_processes(_FSM)
    assert n == 1
    assert ("  always @(posedge clk) begin\n    if (go) begin\n      casez (d)\n        2'h1:\n          q<= 2'h2;\n"
            "        default:\n          q<= d;\n      endcase\n    end\n    if (rst) begin\n      q<= 2'h0;\n"
            "    end\n  end\n") in out
    assert "\\$1  = " not in out and "q <= \\$1 ;" not in out
    assert "    s <= \\$2 ;\n" in out and "\\$2  = \\$2  + 2'h1;" in out  # untouched
    # yosys reuses names in every module: per module, each is rewritten on its own; globally the shared name is not
    two = _FSM + _FSM.replace("module m(", "module m2(")
    assert flop_processes(two)[1] == 0
    out2, n2 = per_module(flop_processes, two)
    assert n2 == 2 and out2.count("q<= 2'h2;") == 2


def test_machine_multiplies_keep_the_low_bits_of_the_signed_product():
    """``$signed(a) * $signed(b)`` into a <= 64-bit result becomes a 64-bit product of 64-bit sign extensions;
    its low bits are the signed product's for every operand (checked exhaustively on 4 x 5 bits, and on the
    GEMM pair product's 8 x 25 -> 33 bits at the extremes); a product wider than 64 bits is left alone."""
    from hw.cosim.harness.rewrites import machine_multiplies

    text = ("module m(a, b, y, z);\n  input [3:0] a;\n  input [4:0] b;\n  output [8:0] y;\n  output [70:0] z;\n"
            "  wire [8:0] y;\n  wire [70:0] z;\n  assign y = $signed(a) * $signed(b);\n"
            "  assign z = $signed(a) * $signed(b);\nendmodule\n")
    out, n = machine_multiplies(text)
    assert n == 1
    assert "  wire [63:0] \\y__xa ;\n  wire [63:0] \\y__xb ;\n  assign \\y__xa = $signed(a);\n" in out
    assert "  assign y = \\y__xa * \\y__xb ;\n" in out and "  assign z = $signed(a) * $signed(b);\n" in out

    def sext(v: int, bits: int) -> int:  # the operand's bits read as signed, then as 64-bit unsigned
        v &= (1 << bits) - 1
        return (v - (1 << bits) if v >> (bits - 1) else v) % (1 << 64)

    for bits_a, bits_b, bits_y, values in ((4, 5, 9, [(x, w) for x in range(16) for w in range(32)]),
                                           (8, 25, 33, [(x, w) for x in (0, 1, 127, 128, 255)
                                                        for w in (0, 1, (1 << 24) - 1, 1 << 24, (1 << 25) - 1)])):
        for x, w in values:
            signed = (sext(x, bits_a) - (1 << 64) * (x >> (bits_a - 1) & 1)) * \
                     (sext(w, bits_b) - (1 << 64) * (w >> (bits_b - 1) & 1))
            assert (sext(x, bits_a) * sext(w, bits_b)) % (1 << bits_y) == signed % (1 << bits_y)


def test_harness_options_errors(tmp_path):
    from hw.cosim.harness.build import build_harness

    with pytest.raises(ValueError, match="vta_top harness only"):
        build_harness(TINY, top="vta_accel", pgo=True)
    from dataclasses import replace

    with pytest.raises(ValueError, match="needs its training run"):  # a design never built: no training run given
        build_harness(replace(TINY, name="tiny-never-built"), pgo=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Harness(TINY, binary=tmp_path / "missing")
