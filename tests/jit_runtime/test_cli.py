import json

import pytest

from isa import make_config
from jit_runtime.blocked_gemm import blocked_gemm
from jit_runtime import suite
from vta.cli import main


@pytest.fixture(scope="module")
def gemm_file(tmp_path_factory):
    program, _ = blocked_gemm(make_config("tiny"), virtual_threads=2)
    path = tmp_path_factory.mktemp("prog") / "gemm.vtaprog"
    program.save(path)
    return path, program


def test_disasm_prints_every_instruction_and_a_summary(gemm_file, capsys):
    path, program = gemm_file
    assert main(["disasm", str(path), "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    numbered = [line for line in out if "  # " in line]
    assert len(numbered) == program.n_insns
    assert numbered[0].endswith("# 0") and numbered[-1].startswith("FINISH")
    assert any(line.startswith("  by kind:") and "GEMM" in line for line in out)
    summary = json.loads(out[-1])
    assert summary["n_insns"] == program.n_insns and summary["by_unit"]["load"] > 0


def test_sim_prints_cycles_and_units_and_matches_a_direct_run(gemm_file, capsys, tmp_path):
    path, program = gemm_file
    trace, png = tmp_path / "t.json", tmp_path / "t.png"
    assert main(["sim", str(path), "--json", "--trace", str(trace), "--timeline", str(png)]) == 0
    out = capsys.readouterr().out.splitlines()
    last = json.loads(out[-1])
    assert last["cycles"] == program.run("sim").cycles and last["mismatches"] == []
    assert any(line.startswith("cycles:") for line in out)
    assert any(line.strip().startswith("compute") for line in out)
    assert "output c: matches expected (bit-exact)" in out
    assert json.loads(trace.read_text())["traceEvents"] and png.stat().st_size > 0


def test_sim_reports_a_mismatch_with_exit_status_1(tmp_path, capsys):
    program, expected = suite.relu(make_config("tiny"))
    program.expected["y"] = expected["y"] + 1
    path = program.save(tmp_path / "bad.vtaprog")
    assert main(["sim", str(path), "--device", "sim-functional"]) == 1
    assert "output y: MISMATCH" in capsys.readouterr().out


def test_user_errors_are_one_line(tmp_path, capsys, gemm_file):
    assert main(["sim", str(tmp_path / "nope.vtaprog")]) == 2
    assert main(["sim", str(gemm_file[0]), "--device", "nodevice"]) == 2
    bad = tmp_path / "bad.vtaprog"
    bad.write_text("not a program")
    assert main(["disasm", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3
    assert "does not exist" in err[0] and "known devices" in err[1] and "not a vta program file" in err[2]
