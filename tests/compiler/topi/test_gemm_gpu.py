"""The GPU GEMM (the tiled conv's schedule on two operands): values against numpy's matmul (loop IR run serially on
the CPU), broadcast batches, split-K with a ragged reduction, launch shapes, PTX without spills, and a transformer
whose dense layers and attention products use it, run on the emulated device."""
from __future__ import annotations


import numpy as np
import pytest

import compiler
from compiler import te
from compiler.schedule import create_schedule
from compiler.topi import gemm_gpu as GG
from compiler.topi.conv2d_gpu import GpuConvKnobs
from tests.compiler.gpu_on_cpu import assert_assembles_without_spills, serial_on_cpu

CASES = [
    ((6, 20), (20, 9), None, True),  # a small dense: tiles cut to the output
    ((2, 3, 17, 40), (1, 40, 12), GpuConvKnobs(8, 8, 2, 2, 4, 3), False),  # broadcast batch, 40 steps in 3 parts
    ((128, 64), (64, 96), None, True),  # tokens x features
    ((4, 8, 33), (4, 33, 8), GpuConvKnobs(16, 8, 4, 2, 8, 1), False),  # attention-like, ragged tiles
]


def _op(sa, sb, knobs, bias):
    op = GG.gemm(sa, sb, knobs, bias=bias, act="relu")
    s = create_schedule(op.out)
    GG.schedule_gpu(op, s)
    return op, s


@pytest.mark.parametrize("case", range(len(CASES)))
def test_gpu_gemm_values_and_kernels(case):
    sa, sb, knobs, bias = CASES[case]
    knobs = knobs or GG.default_knobs(sa, sb)
    rng = np.random.default_rng(case)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    bb = rng.standard_normal(sb[-1]).astype(np.float32)
    op, s = _op(sa, sb, knobs, bias)
    got = serial_on_cpu(s, op.inputs + [op.out])(*([a, b] + ([bb] if bias else [])))
    want = np.maximum(np.matmul(a, b) + (bb if bias else 0), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    op, s = _op(sa, sb, knobs, bias)
    cuda = compiler.build_op(s, target="cuda", args=op.inputs + [op.out])
    m, n = sa[-2], sb[-1]
    bo, bp = min(knobs.bo, m), min(knobs.bp, n)
    batch = int(np.prod(np.broadcast_shapes(sa[:-2], sb[:-2]))) * knobs.split
    assert cuda.kernels[0].grid == (-(-n // bp), -(-m // bo), batch)
    assert len(cuda.kernels) == (1 if knobs.split == 1 else 2)
    assert_assembles_without_spills(cuda)


def test_gpu_gemm_refuses_bad_operands_and_knobs():
    with pytest.raises(te.TeError, match="inner sizes 5 and 6 differ"):
        GG.gemm((3, 5), (6, 2), GpuConvKnobs())
    with pytest.raises(te.TeError, match="at least 2-D"):
        GG.gemm((5,), (5, 2), GpuConvKnobs())
    with pytest.raises(te.TeError, match="split=9 exceeds the reduction's 5 steps"):
        GG.gemm((3, 5), (5, 2), GpuConvKnobs(split=9))
    with pytest.raises(te.TeError, match="knob rk must be a positive int"):
        GG.gemm((3, 5), (5, 2), GpuConvKnobs(rk=0))


def test_a_transformer_runs_its_products_as_tiled_gemms(monkeypatch):
    """The zoo's BERT on the emulated device: dense layers and attention MatMuls compile to the tiled GEMM, and the
    model's output equals onnxruntime's."""
    from compiler.executor import build
    from compiler.quant.ort_tools import ort_run
    from compiler.zoo.modern import bert, sample_inputs

    monkeypatch.setenv("VTA_CUDA_DEVICE", "emulate")
    model = bert()
    feeds = sample_inputs(model, 1)[0]
    mod = build(model, target="cuda", progress=False)
    kinds = [plan.key[0] for plan, _ in mod.cpu._plans.values()]
    assert kinds.count("gemm_gpu") >= 4 and "gemm" not in kinds
    got = mod(**feeds)
    want = ort_run(model, feeds)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(np.asarray(got), want[0], rtol=1e-4, atol=1e-4)
