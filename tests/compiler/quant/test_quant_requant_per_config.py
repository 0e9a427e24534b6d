"""Accelerator requant parameters follow the config: fused-REQUANT ones (31-bit multiplier, no pre-shift) only
where the ISA registry says the config has REQUANT, multi-pass ones (pre-shift, 15-bit multiplier, shift <= 31)
elsewhere, so a QDQ model builds and runs on every preset."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.executor import build
from compiler.quant.ort_tools import ort_run
from isa import make_config, preset_names
from tests.compiler.helpers import cosine
from isa.alu import alu_op, op_supported
from tests.fuzz.targets import IN_SHAPE, qdq_model


@pytest.mark.parametrize("preset", sorted(preset_names()))
def test_qdq_model_runs_on_every_preset_like_onnxruntime(preset):
    model = qdq_model()
    x = np.random.default_rng(7).standard_normal(IN_SHAPE).astype(np.float32)
    sim = build(model, preset, target="sim", progress=False)
    fused = op_supported(alu_op("REQUANT"), make_config(preset))
    rqs = [n.attrs["requant"] for n in sim.graph.nodes if n.op in ("AccelConv2D", "AccelDense")]
    assert rqs, "the Conv and Gemm are offloaded"
    for rq in rqs:
        if fused:
            assert np.all(np.asarray(rq.pre_shift) == 0) and np.max(rq.multiplier) >= 2 ** 15
        else:
            assert np.max(np.abs(rq.multiplier)) < 2 ** 15 and np.max(rq.shift) <= 31
    got = sim.run({"x": x})[0]
    ref = build(model, preset, target="ref", progress=False).run({"x": x})[0]
    np.testing.assert_array_equal(got, ref)  # the simulated instructions compute what the ref backend computes
    expect = ort_run(model, {"x": x}, basic=True)[0]  # unfused QDQ: onnxruntime's plain Q/DQ arithmetic
    assert np.abs(got - expect).max() <= float(np.abs(expect).max()) / 127 + 1e-6  # within one output quantum
    assert cosine(got, expect) >= 0.999
