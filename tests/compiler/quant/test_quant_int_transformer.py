"""Integer Softmax / LayerNorm / GELU (I-BERT-style) against plain-Python integer references, their PTQ
lowering, and the built-in PTQ's calibration options (percentile, entropy, keep_float).

The references below restate each algorithm with Python ints, one row/element at a time (``math.isqrt`` for
the square root, ``//`` and ``>>`` on unbounded ints): the kernels (int64 numpy, vectorized, integer Newton)
must equal them exactly, and stay within a few output steps of float32 math.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from scipy.special import erf

from compiler.executor import build
from compiler.frontend.errors import ModelInputError
from compiler.quant.calibrate import Calibration, calibrate_ranges, entropy_threshold
from jit_runtime.host_ops.int_transformer import (choose_qgelu, choose_qlayernorm, choose_qsoftmax, isqrt_newton,
                                                  qgelu, qlayernorm, qsoftmax)
from tests.compiler.helpers import cosine

RNG = np.random.default_rng(23)
LN2 = math.log(2.0)


def _widen(s):  # the widened grid: scale at most 2**-10, an integer factor finer than the input's
    return max(1, math.ceil(s / 2.0 ** -10))


def _fixed(ratio, bits, max_shift):
    k = min(max(math.floor(math.log2((2 ** bits - 1) / abs(ratio))), 0), max_shift)
    return round(ratio * 2.0 ** k), k


def ref_softmax_row(row, sx, sy, zy):
    """I-BERT i-exp: exp(t) ~ a (t^2 + b t + c) on (-ln 2, 0], t = r*s, times 2**-k; then integer division."""
    m = _widen(sx)
    s = sx / m
    L, B, C = math.floor(-LN2 / s), math.floor((0.96963238 / 0.35815147) / s), math.floor((1 / 0.35815147) / s ** 2)
    xs = [int(v) * m for v in row]
    es = []
    for v in xs:
        d = v - max(xs)
        k = min(d // L, 30)
        r = max(d - k * L, L + 1)
        es.append(((r + B) * r + C) >> k)
    mult, sh = _fixed(1.0 / sy, 16, 40)
    den = sum(es) << sh
    return [min(127, max(-128, (2 * e * mult + den) // (2 * den) + zy)) for e in es]


def ref_layernorm_row(row, sx, zx, gamma, beta, eps, sy, zy):
    n = len(row)
    c = [int(v) - zx for v in row]
    d = [n * v - sum(c) for v in c]
    e_int = round(eps * n ** 3 / sx ** 2)
    h = max(0, (62 - (n * (n * 255) ** 2 + e_int).bit_length()) // 2)
    r = max(math.isqrt((sum(v * v for v in d) + e_int) << (2 * h)), 1)
    g = [gm * math.sqrt(n) / (2.0 ** 16 * sy) for gm in gamma]
    top = max(max(abs(v) for v in g) * 2.0 ** 16 * math.sqrt(n), max(abs(b) for b in beta) / sy)
    sh = min(max(math.floor(math.log2(2.0 ** 40 / top)), 0), 62)
    out = []
    for v, gi, bi in zip(d, g, beta):
        u = (v << (16 + h)) // r
        y = ((u * round(gi * 2.0 ** sh) + round(bi / sy * 2.0 ** sh) + (1 << (sh - 1))) >> sh) + zy
        out.append(min(127, max(-128, y)))
    return out


def ref_gelu(v, sx, zx, sy, zy):
    """I-BERT i-erf on x / sqrt 2: erf ~ sign(x) (-0.2888 (min(|x|, 1.769) - 1.769)^2 + 1)."""
    m = _widen(sx)
    s = sx / m
    se = s / math.sqrt(2.0)
    s_erf = -0.2888 * se ** 2
    B, C = math.floor(-1.769 / se), math.floor(1.0 / s_erf)
    x = (int(v) - zx) * m
    sign = (x > 0) - (x < 0)
    e = sign * ((min(abs(x), -B) + B) ** 2 + C)
    mult, sh = _fixed(s * s_erf / (2.0 * sy), 20, 62)
    return min(127, max(-128, (((x * (e + C)) * mult + (1 << (sh - 1))) >> sh) + zy))


@pytest.mark.parametrize("sx", [0.004, 0.05, 0.3, 1.7])
def test_qsoftmax_equals_the_integer_reference_and_float_within_a_step(sx):
    q = RNG.integers(-128, 128, (6, 24)).astype(np.int8)
    sy, zy = 1 / 255, -128  # probabilities in [0, 1] on the full int8 range
    got = qsoftmax(q, choose_qsoftmax(sx, sy, zy))
    assert got.tolist() == [ref_softmax_row(r, sx, sy, zy) for r in q]
    x = q.astype(np.float64) * sx
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert np.abs((got.astype(np.int64) - zy) * sy - p).max() <= 1.01 * sy
    # another axis: the same as moving that axis last
    got0 = qsoftmax(q.T.copy(), choose_qsoftmax(sx, sy, zy, axis=0))
    assert np.array_equal(got0.T, got)


@pytest.mark.parametrize("sx,zx", [(0.02, 0), (0.11, -9), (1.3, 40)])
def test_qlayernorm_equals_the_integer_reference_and_float_within_a_step(sx, zx):
    n = 48
    q = RNG.integers(-128, 128, (5, n)).astype(np.int8)
    gamma, beta = 1 + 0.3 * RNG.standard_normal(n), 0.2 * RNG.standard_normal(n)
    x = (q.astype(np.float64) - zx) * sx
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * gamma + beta
    sy, zy = float(np.abs(ref).max()) / 120, 3
    got = qlayernorm(q, choose_qlayernorm(sx, zx, gamma, beta, 1e-5, sy, zy))
    assert got.tolist() == [ref_layernorm_row(r, sx, zx, gamma, beta, 1e-5, sy, zy) for r in q]
    assert np.abs(got.astype(np.int64) - zy - ref / sy).max() <= 0.51
    # a constant row is all (beta) with the eps term keeping the division finite
    const = qlayernorm(np.full((1, n), 7, np.int8), choose_qlayernorm(sx, zx, gamma, beta, 1e-5, sy, zy))
    assert np.abs(const[0].astype(np.int64) - zy - beta / sy).max() <= 0.51


@pytest.mark.parametrize("sx,zx", [(0.01, 0), (0.04, 5), (0.25, -3)])
def test_qgelu_equals_the_integer_reference_and_float_within_two_steps(sx, zx):
    q = np.arange(-128, 128).astype(np.int8)
    x = (q.astype(np.float64) - zx) * sx
    ref = x * 0.5 * (1 + erf(x / np.sqrt(2)))
    sy, zy = float(np.abs(ref).max()) / 127, -4
    got = qgelu(q, choose_qgelu(sx, zx, sy, zy))
    assert got.tolist() == [ref_gelu(v, sx, zx, sy, zy) for v in q]
    assert np.abs(got.astype(np.int64) - zy - ref / sy).max() <= 2.0  # I-BERT's erf polynomial: |err| < 0.02


def test_isqrt_newton_is_the_floor_square_root():
    v = np.concatenate([np.arange(0, 2000), RNG.integers(0, 2 ** 62, 3000), [2 ** 62 - 1, 4 ** 30, 4 ** 30 - 1]])
    assert isqrt_newton(v.astype(np.int64)).tolist() == [math.isqrt(int(i)) for i in v]


def test_int_transformer_params_reject_bad_scales():
    with pytest.raises(ValueError, match="QSoftmax scales must be finite and > 0"):
        choose_qsoftmax(0.0, 0.1, 0)
    with pytest.raises(ValueError, match="QGelu scales"):
        choose_qgelu(0.1, 0, float("nan"), 0)


# ---- the built-in PTQ on a small encoder block ----------------------------------------------------------------
def _block(t=8, h=32, seed=0):
    """x -> LayerNormalization -> MatMul -> erf GELU (torch.onnx's form) -> MatMul -> q k^T -> Softmax -> p v."""
    rng = np.random.default_rng(seed)
    init = []

    def c(name, v):
        init.append(numpy_helper.from_array(np.asarray(v, np.float32), name))
        return name

    nodes = [
        helper.make_node("LayerNormalization", ["x", c("g", 1 + 0.2 * rng.standard_normal(h)),
                                                c("b", 0.1 * rng.standard_normal(h))], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["ln", c("w1", rng.standard_normal((h, 2 * h)) / np.sqrt(h))], ["f1"]),
        helper.make_node("Div", ["f1", c("sqrt2", np.sqrt(2.0))], ["fd"]),
        helper.make_node("Erf", ["fd"], ["fe"]),
        helper.make_node("Add", ["fe", c("one", 1.0)], ["fa"]),
        helper.make_node("Mul", ["f1", "fa"], ["fm"]),
        helper.make_node("Mul", ["fm", c("half", 0.5)], ["gelu"]),
        helper.make_node("MatMul", ["gelu", c("w2", rng.standard_normal((2 * h, h)) / np.sqrt(2 * h))], ["f2"]),
        helper.make_node("Transpose", ["f2"], ["f2t"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["f2", "f2t"], ["scores"]),
        helper.make_node("Mul", ["scores", c("inv_sqrt_h", 1 / np.sqrt(h))], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "f2"], ["y"]),
    ]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, t, h))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, t, h))], init)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feeds(n, seed, t=8, h=32):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, t, h)).astype(np.float32)} for _ in range(n)]


def _float_ref(model, feed):
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]


def _run(mod, feed):
    y = mod.run(feed)[0]
    return y, set(mod.profile_summary()["host_ops"])


def test_ptq_runs_softmax_layernorm_gelu_as_integer_ops_and_keep_float_opts_out():
    model, feed = _block(), _feeds(1, 9)[0]
    ref = _float_ref(model, feed)
    y, ops = _run(build(model, None, target="ref", calibration=_feeds(3, 1), progress=False), feed)
    assert {"QSoftmax", "QLayerNorm", "QGelu"} <= ops and not {"Softmax", "LayerNormalization", "Erf"} & ops
    assert cosine(y, ref) > 0.99
    kept = build(model, None, target="ref", progress=False,
                 calibration=Calibration(_feeds(3, 1), keep_float=("Softmax", "LayerNormalization", "Gelu")))
    y, ops = _run(kept, feed)
    assert {"Softmax", "LayerNormalization", "Erf"} <= ops and not {"QSoftmax", "QLayerNorm", "QGelu"} & ops
    assert cosine(y, ref) > 0.99
    # a tensor name: the Softmax input stays float32, so the softmax runs in float
    named = build(model, None, target="ref", progress=False, calibration=Calibration(_feeds(3, 1), keep_float=["scaled"]))
    y, ops = _run(named, feed)
    assert "Softmax" in ops and "QSoftmax" not in ops and cosine(y, ref) > 0.99


def _masked_attention(t=8, h=16, seed=3):
    """q k^T + mask (-1e4 on the last two keys, as exporters write padding masks) -> Softmax -> p v."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((1, t, t), np.float32)
    mask[..., -2:] = -1e4
    init = [numpy_helper.from_array(v, n) for n, v in
            (("wq", (rng.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)), ("mask", mask))]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]),
             helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "xt"], ["scores"]),
             helper.make_node("Add", ["scores", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
             helper.make_node("MatMul", ["probs", "x"], ["y"])]
    g = helper.make_graph(nodes, "masked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, t, h))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, t, h))], init)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_ptq_keeps_a_masked_softmax_in_float_and_reports_it():
    model = _masked_attention()
    feeds = _feeds(3, 4, t=8, h=16)
    mod = build(model, None, target="ref", calibration=feeds, progress=False)
    y, ops = _run(mod, feeds[0])
    prec = mod.compiled.stats["precision"]
    # int8 over +-1e4 leaves the real scores (|s| < ~10) no steps: the integer softmax would be uniform
    assert "Softmax" in ops and "QSoftmax" not in ops and prec["host_float_ops"].get("Softmax") == 1
    assert len(prec["kept_float"]) == 1 and prec["accel_int8_layers"] >= 1
    assert cosine(y, _float_ref(model, feeds[0])) > 0.99


def test_percentile_and_entropy_ranges_clip_outliers():
    from compiler.frontend.onnx_import import onnx_to_graph

    g = onnx_to_graph(_block(), None)
    x = RNG.standard_normal((1, 8, 32)).astype(np.float32)
    x[0, 0, :2] = 60.0  # two outliers among 256 values
    feed = [{"x": x}]
    assert calibrate_ranges(g, ["x"], feed)["x"] == 60.0
    assert calibrate_ranges(g, ["x"], feed, "percentile", 99.0)["x"] == pytest.approx(np.percentile(np.abs(x), 99.0))
    vals = np.abs(np.concatenate([RNG.standard_normal(20000), [80.0, -90.0]]))
    t = entropy_threshold(vals)
    assert 2.5 < t < 20.0  # well inside the outliers, covering the bulk of N(0, 1)


def test_calibration_options_reject_bad_values_naming_what_is_allowed():
    with pytest.raises(ModelInputError, match=r"unknown calibration method 'minmax'; allowed: max, percentile, entropy"):
        Calibration([], method="minmax")
    with pytest.raises(ModelInputError, match=r"percentile must be in \(50, 100\]"):
        Calibration([], method="percentile", percentile=120)
    with pytest.raises(ModelInputError, match=r"keep_float names \['no_such_tensor'\].*Softmax, LayerNormalization, "
                                              r"Gelu.*'x'"):
        build(_block(), None, target="ref", progress=False,
              calibration=Calibration(_feeds(1, 1), keep_float=["no_such_tensor"]))


def test_exported_module_runs_the_integer_transformer_ops_bit_exact(tmp_path):
    from jit_runtime import load_module

    model, feed = _block(), _feeds(1, 9)[0]
    mod = build(model, None, target="sim", calibration=_feeds(2, 1), progress=False)
    want = mod.run(feed)[0]
    got = load_module(mod.export(tmp_path / "block.vtamod"))(**feed)
    np.testing.assert_array_equal(got, want)
