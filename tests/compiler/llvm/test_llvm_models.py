"""Whole zoo models with cpu="llvm" equal the numpy CPU backend bit for bit (target "ref")."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from compiler.zoo.cpu_workloads import zoo_workloads
from compiler.executor import build

logging.getLogger().setLevel(logging.ERROR)
WORK = zoo_workloads()
# integer host ops of the offload path (jit_runtime.host_ops.int_elementwise, tap folding, packed pools): numpy only so far
# (QAdd, QMul, QLookup and PackedMaxPool have LLVM kernels)
NUMPY_INT_OPS = {"QGlobalAveragePool", "FoldTaps", "PackedSqueezeHW",
                 "RebaseUint8"}


@pytest.mark.parametrize("name", ["resnet18_small", "mobilenet_v2_small_ort", "digits"])
def test_model_bit_exact_vs_numpy(name):
    model, kw, feeds = WORK[name]()
    ref = build(model, target="ref", cpu="numpy", progress=False, **kw).run(feeds)
    mod = build(model, target="ref", cpu="llvm", progress=False, **kw)
    got = mod.run(feeds)
    for a, b in zip(got, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    rows = [r for r in mod.profile() if r["target"] == "cpu" and r["op"] not in NUMPY_INT_OPS]
    by = {r["cpu_backend"] for r in rows}
    assert by <= {"llvm", "view"}, by  # every CPU layer of the zoo models compiles
    assert sum(r["cpu_backend"] == "llvm" for r in rows) >= 0.8 * len(rows)
    assert mod.run(feeds)[0].tobytes() == got[0].tobytes()  # second run: cached kernels, same bytes


def test_build_cpu_argument():
    model, kw, feeds = WORK["digits"]()
    with pytest.raises(ValueError, match="unknown CPU backend 'gpu'"):
        build(model, target="ref", cpu="gpu", **kw)
    mod = build(model, target="ref", progress=False, **kw)
    mod.run(feeds)
    assert {r["cpu_backend"] for r in mod.profile() if r["target"] == "cpu"} == {"numpy"}
    assert all(r["cpu_backend"] is None for r in mod.profile() if r["target"] == "accel")
