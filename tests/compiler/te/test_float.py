"""float32 tensor expressions (CPU/GPU targets): dtype rules, math functions, max/min reductions, te.evaluate."""
import math

import numpy as np
import pytest

from compiler import te


def test_float_promotion_and_errors():
    x = te.placeholder((4,), "float32", "x")
    n = te.placeholder((4,), "int32", "n")
    assert (x[0] * 2).dtype == "float32" and (n[0] * 2.0).dtype == "float32" and (n[0] * 2).dtype == "int32"
    assert te.exp(n[0]).dtype == "float32"  # integers convert to float32 first
    with pytest.raises(te.TeError, match="float division"):
        n[0] / 2
    with pytest.raises(te.TeError, match="integer operands"):
        x[0] >> 1
    with pytest.raises(te.TeError, match="not a reduce axis"):
        te.max(x[0], axis=te.IterVar("i", 4))
    with pytest.raises(te.TeError, match="second operand"):
        te.min(x[0])


def test_evaluate_float_softmax_rounding_and_erf():
    x = te.placeholder((5, 9), "float32", "x")
    k = te.reduce_axis(9, "k")
    mx = te.compute((5,), lambda i: te.max(x[i, k], axis=k), name="mx")
    e = te.compute((5, 9), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis(9, "k2")
    sm = te.compute((5,), lambda i: te.sum(e[i, k2], axis=k2), name="sm")
    y = te.compute((5, 9), lambda i, j: e[i, j] / sm[i], name="y")
    xv = np.random.default_rng(0).standard_normal((5, 9)).astype(np.float32) * 3
    ref = np.exp(xv - xv.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    out = te.evaluate(y, {x: xv})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    q = te.compute((5, 9), lambda i, j: te.clip(te.round_(x[i, j] * 10.0).astype("int32"), -128, 127).astype("int8"))
    np.testing.assert_array_equal(te.evaluate(q, {x: xv}), np.clip(np.rint(xv * 10), -128, 127).astype(np.int8))
    z = te.compute((5,), lambda i: te.erf(x[i, 0]) + x[i, 1] // 2.0 + te.min(x[i, 2], axis=None, b=0.0))
    want = np.array([math.erf(v) for v in xv[:, 0]]) + np.floor(xv[:, 1] / 2) + np.minimum(xv[:, 2], 0)
    np.testing.assert_allclose(te.evaluate(z, {x: xv}), want, rtol=1e-6, atol=1e-6)
