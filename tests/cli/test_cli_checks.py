"""The vta commands check their file arguments before any work: output paths, input arrays, models, budgets."""
from __future__ import annotations

import json
import logging
import os

import numpy as np
import onnx
import pytest

from isa import make_config
from jit_runtime import suite
from tests.fuzz.targets import IN_SHAPE, base_model
from vta.cli import main

logging.getLogger().setLevel(logging.ERROR)


@pytest.fixture
def model_path(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(base_model(), str(p))
    return p


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("vta "), err
    return err


def test_trace_equal_to_the_model_is_refused_and_the_model_kept(model_path, capsys):
    before = model_path.read_bytes()
    assert main(["run", str(model_path), "--trace", str(model_path), "--calibrate", "1", "--target", "ref"]) == 2
    err = _error(capsys)
    assert "--trace" in err and "same file as the model" in err
    assert model_path.read_bytes() == before


def test_trace_equal_to_the_model_through_another_spelling(model_path, capsys, monkeypatch):
    monkeypatch.chdir(model_path.parent)
    before = model_path.read_bytes()
    assert main(["run", "m.onnx", "--trace", f"../{model_path.parent.name}/m.onnx", "--calibrate", "1"]) == 2
    assert "same file as the model" in _error(capsys)
    assert model_path.read_bytes() == before


def test_trace_equal_to_the_input_file(model_path, tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(IN_SHAPE, np.float32))
    before = x.read_bytes()
    assert main(["run", str(model_path), "--input", str(x), "--trace", str(x), "--calibrate", "1"]) == 2
    assert "same file as the --input" in _error(capsys)
    assert x.read_bytes() == before


def test_trace_in_a_missing_folder_fails_before_any_work(model_path, tmp_path, capsys):
    out = tmp_path / "no" / "such" / "t.json"
    assert main(["run", str(model_path), "--trace", str(out), "--calibrate", "1"]) == 2
    err = _error(capsys)
    assert "does not exist" in err and "t.json" in err
    assert "compiling" not in capsys.readouterr().out


def test_trace_that_is_a_folder(model_path, tmp_path, capsys):
    assert main(["run", str(model_path), "--trace", str(tmp_path), "--calibrate", "1"]) == 2
    assert "is a folder" in _error(capsys)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_trace_in_a_read_only_folder(model_path, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["run", str(model_path), "--trace", str(ro / "t.json"), "--calibrate", "1"]) == 2
        assert "not writable" in _error(capsys)
    finally:
        ro.chmod(0o700)


def test_zero_d_npy_input(model_path, tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.float32(1.0))
    assert main(["run", str(model_path), "--input", str(x), "--calibrate", "1"]) == 2
    err = _error(capsys)
    assert "0-d" in err and "x.npy" in err


def test_object_dtype_input(model_path, tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    before = x.read_bytes()
    assert main(["run", str(model_path), "--input", str(x), "--calibrate", "1"]) == 2
    err = _error(capsys)
    assert "x.npy" in err and "numeric" in err
    assert x.read_bytes() == before


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_is_reported(model_path, tmp_path, capsys, bad):
    x = np.zeros(IN_SHAPE, np.float32)
    x[0, 0, 2, 3] = bad
    p = tmp_path / "x.npy"
    np.save(p, x)
    assert main(["run", str(model_path), "--input", str(p), "--calibrate", "1", "--target", "ref"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("warning:") and "NaN/Inf" in ln)
    assert "'x'" in line and "1 NaN/Inf" in line and "(0, 0, 2, 3)" in line


def test_non_finite_calibration_data(model_path, tmp_path, capsys):
    c = np.zeros((2,) + IN_SHAPE[1:], np.float32)
    c[1, 0, 0, 0] = np.nan
    p = tmp_path / "c.npy"
    np.save(p, c)
    assert main(["run", str(model_path), "--calibrate", "2", "--calibration-data", str(p), "--target", "ref"]) == 2
    assert "NaN/Inf" in _error(capsys)


def test_malformed_model_lists_its_problems(tmp_path, capsys):
    m = base_model()
    next(n for n in m.graph.node if n.name == "relu").input[0] = "dangling"
    p = tmp_path / "bad.onnx"
    onnx.save(m, str(p))
    before = p.read_bytes()
    assert main(["run", str(p), "--calibrate", "1"]) == 2
    err = _error(capsys)
    assert "'relu'" in err and "'dangling'" in err
    assert p.read_bytes() == before


@pytest.fixture
def program_path(tmp_path):
    program, _ = suite.relu(make_config("tiny"))
    return program.save(tmp_path / "p.vtaprog")


def test_sim_trace_equal_to_the_program_is_refused(program_path, capsys):
    before = program_path.read_bytes()
    assert main(["sim", str(program_path), "--trace", str(program_path)]) == 2
    assert "same file as the program file" in _error(capsys)
    assert program_path.read_bytes() == before
    assert main(["sim", str(program_path), "--timeline", str(program_path)]) == 2
    assert program_path.read_bytes() == before


def test_sim_max_cycles(program_path, capsys):
    assert main(["sim", str(program_path), "--max-cycles", "10"]) == 2
    err = _error(capsys)
    assert "budget of 10 cycles" in err or "budget of 10 " in err
    assert main(["sim", str(program_path), "--max-cycles", "0", "--json"]) == 0  # 0: no limit
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["mismatches"] == []


def test_sim_damaged_program(program_path, capsys):
    raw = program_path.read_bytes()
    program_path.write_bytes(raw[:len(raw) // 2])
    assert main(["sim", str(program_path)]) == 2
    assert "p.vtaprog" in _error(capsys)


def test_config_save_onto_its_source_is_refused(tmp_path, capsys):
    src = tmp_path / "c.json"
    make_config("tiny").to_json(src)
    before = src.read_text()
    assert main(["config", str(src), "--save", str(src)]) == 2
    assert "same file as the config file" in _error(capsys)
    assert src.read_text() == before


@pytest.mark.parametrize("text,words", [('{"base": "tiny", "inp_width": 8.0}', ["inp_width", "integer"]),
                                        ("[1]", ["JSON object"]),
                                        ('{"base": "tiny", "clock_mhz": Infinity}', ["Infinity"])])
def test_config_file_errors(tmp_path, capsys, text, words):
    src = tmp_path / "c.json"
    src.write_text(text)
    assert main(["config", str(src)]) == 2
    err = _error(capsys)
    for w in words:
        assert w in err
    assert src.read_text() == text
