"""``vta run``: outputs, per-layer table, trace, calibration and one-line errors."""
from __future__ import annotations

import json
import logging

import numpy as np
import onnx
import pytest

from compiler.executor.module import Module
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.zoo import resnet18_small
from compiler.zoo.builder import OnnxBuilder
from compiler.zoo.digits import digits_model_path, load_digits_split
from vta.cli import main

logging.getLogger().setLevel(logging.ERROR)


@pytest.fixture(scope="module")
def digits_q(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    xtr, _, xte, _ = load_digits_split()
    q = ort_quantize_static(digits_model_path(), [{"input": xtr[i:i + 1]} for i in range(0, 200, 4)], reduce_range=True)
    path = d / "digits_q.onnx"
    onnx.save(q, str(path))
    np.save(d / "x.npy", xte[:4])
    return path, d / "x.npy", q, xte[:4]


def test_run_with_input_prints_top5_table_and_ref_note(digits_q, capsys):
    path, x_path, q, x = digits_q
    assert main(["run", str(path), "--input", str(x_path), "--target", "ref", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "output 'logits': shape (4, 10)" in out and "random" not in out
    want = ort_run(q, {"input": x})[0].argmax(1)
    for r in range(4):
        assert f"row {r} top-5: {want[r]} (" in out
    assert "AccelConv2D" in out and "per-layer profile" in out and "no cycle counts" in out


def test_run_random_input_on_sim_with_trace(digits_q, capsys, tmp_path):
    path = digits_q[0]
    trace = tmp_path / "t.json"
    assert main(["run", str(path), "--trace", str(trace), "--no-progress"]) == 0  # default target: sim
    out = capsys.readouterr().out
    assert "no --input given: using seeded random input (seed 0)" in out
    assert "timings from simulator" in out
    data = json.loads(trace.read_text())
    layers = [e for e in data["traceEvents"] if e.get("ph") == "X" and e["tid"] == 0]
    assert [e["cat"] for e in layers] == ["AccelConv2D", "AccelConv2D", "AccelDense"]
    assert data["metadata"]["source"].startswith("simulator")
    assert data["metadata"]["total"] == sum(e["dur"] for e in layers) > 0
    assert layers[1]["ts"] == layers[0]["ts"] + layers[0]["dur"]


def test_run_ref_trace_says_wall_clock(digits_q, capsys, tmp_path):
    trace = tmp_path / "t.json"
    assert main(["run", str(digits_q[0]), "--target", "ref", "--trace", str(trace), "--no-progress"]) == 0
    assert "wall-clock profile rows" in capsys.readouterr().out
    assert json.loads(trace.read_text())["metadata"]["source"] == "wall-clock profile rows"


def test_float_model_needs_calibrate(tmp_path, capsys):
    p = tmp_path / "r.onnx"
    onnx.save(resnet18_small(), str(p))
    assert main(["run", str(p), "--target", "ref"]) == 2
    err = capsys.readouterr().err
    assert "float model" in err and "--calibrate N" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert main(["run", str(p), "--target", "ref", "--calibrate", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "2 calibration sample(s)" in out and "shape (1, 10)" in out


def test_calibration_data_file(tmp_path, capsys):
    p, c = tmp_path / "r.onnx", tmp_path / "c.npy"
    onnx.save(resnet18_small(), str(p))
    np.save(c, np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32))
    assert main(["run", str(p), "--target", "ref", "--calibrate", "2", "--calibration-data", str(c), "--no-progress"]) == 0
    assert f"from {c}" in capsys.readouterr().out
    np.save(c, np.zeros((3, 3, 8, 8), np.float32))
    assert main(["run", str(p), "--target", "ref", "--calibrate", "2", "--calibration-data", str(c)]) == 2
    assert "needs (3, 32, 32)" in capsys.readouterr().err


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_missing_file(capsys):
    assert main(["run", "/nonexistent/model.onnx"]) == 2
    assert "not found" in _one_line_error(capsys)


def test_unsupported_operator_named(tmp_path, capsys):
    b = OnnxBuilder(0)
    y = b.op("Hardmax", [b.conv("input", 3, 16, 3)], "weird")
    p = tmp_path / "bad.onnx"
    onnx.save(b.model("bad", "input", (1, 3, 8, 8), y), str(p))
    assert main(["run", str(p), "--calibrate", "1"]) == 2
    err = _one_line_error(capsys)
    assert "unsupported operator(s): Hardmax (1 node(s): weird_" in err


def test_bad_input_shape(digits_q, tmp_path, capsys):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, 1, 9, 9), np.float32))
    assert main(["run", str(digits_q[0]), "--input", str(bad), "--target", "ref"]) == 2
    err = _one_line_error(capsys)
    assert "input" in err and "9" in err


def test_unknown_target(digits_q, capsys):
    assert main(["run", str(digits_q[0]), "--target", "fpga9"]) == 2
    assert "unknown --target 'fpga9'" in _one_line_error(capsys)


def test_run_reports_offload_and_warns_about_host_layers(tmp_path, capsys):
    from tests.compiler.quant.test_quant_int_elementwise import _qdq_residual_model

    path = tmp_path / "residual.onnx"
    onnx.save(_qdq_residual_model(dilation=6), str(path))  # too dilated to widen onto the accelerator
    assert main(["run", str(path), "--target", "ref", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "warning:" in out and "dilated (QConv2D): dilations (6, 6)" in out
    assert "50.0% of the MACs in accelerator layers (run by the numpy reference backend" in out and "QConv2D x1" in out and "end to end" in out


def test_pynq_target_needs_a_usable_bitstream(digits_q, capsys, tmp_path):
    """``--target pynq``: no --bitstream, a missing file and a .bit without its .hwh are one-line errors."""
    path = str(digits_q[0])
    assert main(["run", path, "--target", "pynq", "--no-progress"]) == 2
    assert "--target pynq needs --bitstream" in capsys.readouterr().err
    assert main(["run", path, "--target", "pynq", "--bitstream", str(tmp_path / "none.bit"), "--no-progress"]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "vta.bit").write_bytes(b"\0")
    assert main(["run", path, "--target", "pynq", "--bitstream", str(tmp_path / "vta.bit"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "vta.hwh is missing beside" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_run_float_model_on_llvm_target_without_calibration(tmp_path, capsys):
    path = tmp_path / "r18.onnx"
    model = resnet18_small()
    onnx.save(model, str(path))
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(path), "--target", "llvm", "--input", str(tmp_path / "x.npy"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    want = ort_run(model, {"input": x})[0]
    assert f"row 0 top-5: {int(want[0].argmax())} (" in out
    assert "cpu:llvm" in out and "FusedConv" in out and "operator-library kernels (float32)" in out


def test_run_qdq_model_on_llvm_target_and_bad_combinations(digits_q, capsys):
    path, x_path, q, x = digits_q
    assert main(["run", str(path), "--input", str(x_path), "--target", "llvm", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "operator-library kernels (int8)" in out and "cpu:llvm" in out
    assert main(["run", str(path), "--target", "llvm", "--cpu", "llvm", "--no-progress"]) == 2
    assert "--cpu chooses the host backend of accelerator targets" in capsys.readouterr().err
    assert main(["run", str(path), "--target", "tpu", "--no-progress"]) == 2
    assert "llvm, cuda" in capsys.readouterr().err


def test_run_on_cuda_target_compiles_and_runs_only_with_a_gpu(tmp_path, capsys):
    from compiler.backend.cuda.runtime import gpu_present

    path = tmp_path / "r18.onnx"
    onnx.save(resnet18_small(), str(path))
    rc = main(["run", str(path), "--target", "cuda", "--no-progress"])
    captured = capsys.readouterr()
    if gpu_present():
        assert rc == 0 and "row 0 top-5:" in captured.out
    else:
        assert rc == 2 and "GPU kernels, PTX) but this machine has no NVIDIA GPU" in captured.err
        assert "VTA_CUDA_DEVICE=emulate" in captured.err


def test_run_on_cuda_target_emulated(tmp_path, capsys, monkeypatch):
    """``VTA_CUDA_DEVICE=emulate``: the GPU kernels run on this CPU; the top-5 classes are the llvm target's."""
    import re

    def classes(out: str) -> list[str]:
        return [re.findall(r"(\d+) \(", ln) for ln in out.splitlines() if "top-5" in ln]

    path = tmp_path / "r18.onnx"
    onnx.save(resnet18_small(), str(path))
    assert main(["run", str(path), "--target", "llvm", "--no-progress"]) == 0
    want = classes(capsys.readouterr().out)
    monkeypatch.setenv("VTA_CUDA_DEVICE", "emulate")
    assert main(["run", str(path), "--target", "cuda", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert want and len(want[0]) == 5 and classes(out) == want and "cpu:cuda" in out
    # the per-layer times are the device's, from the 4th run (the first runs load kernels and weights, then two
    # runs that agree make it a replay)
    assert "per-layer times: the device's own (timed between its events), of a replayed run (run 4" in out


def test_run_on_cuda_target_with_host_layers_says_whose_times(tmp_path, capsys, monkeypatch):
    """A model with layers on the host (Concat, Transpose) is never replayed: one run more (the second run tells),
    and the table says its times are the host's."""
    from tests.compiler.backend.test_cuda_residency import _branchy_model

    path = tmp_path / "branchy.onnx"
    onnx.save(_branchy_model(), str(path))
    monkeypatch.setenv("VTA_CUDA_DEVICE", "emulate")
    runs = []
    real = Module.run
    monkeypatch.setattr(Module, "run", lambda self, *a, **k: runs.append(1) or real(self, *a, **k))
    assert main(["run", str(path), "--target", "cuda", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "per-layer times: this host's time to launch each layer" in out and len(runs) == 2
