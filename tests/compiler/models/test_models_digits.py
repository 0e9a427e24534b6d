"""Acceptance: the digits demo on the simulator backend ("sim") against onnxruntime int8."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from compiler.executor import available_accel_backends
from compiler.zoo.digits import digits_model_path


def _demo_module():
    path = digits_model_path().with_name("demo.py")
    spec = importlib.util.spec_from_file_location("vta_digits_demo", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("vta_digits_demo", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sim_result():
    # No skip: the simulator backend must be registered (compiler/backend/accel/backend.py registers "sim").
    assert "sim" in available_accel_backends(), (
        f"accelerator backend 'sim' is not registered (have {available_accel_backends()}): "
        "compiler/backend/accel/backend.py must register it")
    return _demo_module().run_demo("pynq-z1", "sim", progress=False)


def test_digits_on_sim_matches_onnxruntime_int8(sim_result):
    r = sim_result
    assert r.target == "sim" and r.test_images == 450
    assert abs(r.accuracy - r.int8_ort_accuracy) <= 0.005, (r.accuracy, r.int8_ort_accuracy)
    assert r.identical_predictions >= 0.99
    assert r.accuracy >= r.float_ort_accuracy - 0.01 and r.accuracy >= 0.95


def test_digits_on_sim_reports_cycles(sim_result):
    r = sim_result
    assert r.accel_layers == 3 and r.cycles_per_image > 0
    assert r.latency_us_per_image == pytest.approx(r.cycles_per_image / r.clock_mhz)
    acc_rows = [row for row in r.profile if row["target"] == "accel"]
    assert sum(row["cycles"] for row in acc_rows) == pytest.approx(r.cycles_per_image * r.test_images)
    assert all(0 < row["utilization"] <= 1 for row in acc_rows)


def test_demo_falls_back_to_ref_and_says_so(monkeypatch):
    demo = _demo_module()
    import compiler.executor as ex

    monkeypatch.setattr(ex, "available_accel_backends", lambda: ["ref"])
    target, note = demo.choose_target(None)
    assert target == "ref" and "not registered" in note
    with pytest.raises(ValueError, match="not registered"):
        demo.choose_target("sim")
