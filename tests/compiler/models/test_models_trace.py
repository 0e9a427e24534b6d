"""Module.write_trace: per-instruction lanes when the backend hands over simulator results."""
from __future__ import annotations

import json
import logging

import pytest

from compiler.executor import available_accel_backends, build
from compiler.quant.ort_tools import ort_quantize_static
from compiler.zoo.digits import digits_model_path, load_digits_split

logging.getLogger().setLevel(logging.ERROR)


@pytest.fixture(scope="module")
def digits_q():
    xtr, _, xte, _ = load_digits_split()
    return ort_quantize_static(digits_model_path(), [{"input": xtr[i:i + 1]} for i in range(0, 100, 4)],
                               reduce_range=True), xte[:2]


def test_trace_with_simulator_events(digits_q, tmp_path):
    assert "sim" in available_accel_backends()
    q, x = digits_q
    mod = build(q, "pynq-z1", target="sim", input_shapes={"input": x.shape}, progress=False)
    mod.keep_details = True
    mod(input=x)
    results = [d["sim_result"] for d in mod._details]  # the sim backend hands over each layer's result
    assert mod.write_trace(tmp_path / "t.json") == "simulator events"
    data = json.loads((tmp_path / "t.json").read_text())
    ev = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    layers = [e for e in ev if e["tid"] == 0]
    assert len(layers) == 3 and data["metadata"]["total"] == sum(r.cycles for r in results)
    gemm = [e for e in ev if e["name"].startswith("GEMM")]
    assert gemm and all(layers[0]["ts"] <= e["ts"] <= layers[-1]["ts"] + layers[-1]["dur"] for e in gemm)
    # events of the second layer are shifted by the first layer's cycles
    second = [e for e in ev if e["tid"] > 0 and e.get("args", {}).get("index") == 0]
    assert sorted({e["ts"] >= layers[1]["ts"] for e in second}) == [False, True]


def test_trace_without_cycles_uses_wall_clock(digits_q, tmp_path):
    q, x = digits_q
    mod = build(q, target="ref", input_shapes={"input": x.shape}, progress=False)
    mod(input=x)
    assert mod.write_trace(tmp_path / "t.json") == "wall-clock profile rows"
    meta = json.loads((tmp_path / "t.json").read_text())["metadata"]
    assert meta["accel_layers"] == 3 and "host microsecond" in meta["time_unit"]
