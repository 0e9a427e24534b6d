"""Linear layers over tokens (3-D/4-D MatMul + bias) run as accelerator dense layers, PTQ and ORT QDQ."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from compiler import build
from compiler.frontend.onnx_import import onnx_to_graph
from compiler.graph.evaluate import evaluate_graph
from compiler.graph.token_matmul import flatten_token_matmuls
from compiler.quant.ort_tools import ort_quantize_static, ort_run

RNG = np.random.default_rng(5)


def _f(*s):
    return (RNG.standard_normal(s) * 0.2).astype(np.float32)


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def ffn(shape=(2, 8, 32), hidden=64):
    """x [.., T, H] -> MatMul + b -> Relu -> MatMul + b (bias Add first operand) -> y."""
    d = shape[-1]
    nodes = [h.make_node("MatMul", ["x", "w1"], ["m1"]), h.make_node("Add", ["m1", "b1"], ["a1"]),
             h.make_node("Relu", ["a1"], ["r"]), h.make_node("MatMul", ["r", "w2"], ["m2"]),
             h.make_node("Add", ["b2", "m2"], ["y"])]
    g = h.make_graph(nodes, "ffn", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(_f(d, hidden), "w1"), nh.from_array(_f(hidden), "b1"),
                      nh.from_array(_f(hidden, d), "w2"), nh.from_array(_f(d), "b2")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("shape", [(2, 8, 32), (1, 2, 5, 16), (3, 16)])
def test_rewrite_is_exact_in_float(shape):
    m = ffn(shape)
    g = onnx_to_graph(m)
    x = _f(*shape) * 5
    want = evaluate_graph(g, {"x": x})["y"]
    assert flatten_token_matmuls(g) == 2
    assert [n.op for n in g.nodes].count("Gemm") == 2 and "MatMul" not in [n.op for n in g.nodes]
    assert "Relu" in [n.op for n in g.nodes]
    np.testing.assert_allclose(evaluate_graph(g, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_token_linear_layers_run_on_the_accelerator_with_builtin_ptq_and_ort_qdq():
    m = ffn()
    cal = [{"x": _f(2, 8, 32) * 5} for _ in range(4)]
    x = _f(2, 8, 32) * 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no HostFallbackWarning
        mod = build(m, target="sim", calibration=cal)
    y = mod.run({"x": x})[0]
    s = mod.profile_summary()
    assert s["accel_mac_fraction"] == 1.0 and "Relu" not in s["host_ops"]  # the Relu rides in the epilogue
    assert cosine(y, ort_run(m, {"x": x})[0]) > 0.999
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(m, cal)
    qmod = build(q, target="sim")
    yq = qmod.run({"x": x})[0]
    assert qmod.profile_summary()["accel_mac_fraction"] == 1.0
    assert cosine(yq, ort_run(q, {"x": x})[0]) > 0.99
    np.testing.assert_array_equal(build(q, target="ref").run({"x": x})[0], yq)  # sim == ref bit for bit


def attention(b=1, s=8, hid=32, heads=4):
    """A BERT-style self-attention block: Q/K/V projections over tokens, heads split by Reshape/Transpose,
    scores = Q K^T (two activations), scaled Softmax, context = P V, output projection."""
    d = hid // heads
    nodes, inits = [], {}
    for t in "qkv":
        inits[f"w{t}"], inits[f"b{t}"] = _f(hid, hid), _f(hid)
        nodes += [h.make_node("MatMul", ["x", f"w{t}"], [f"{t}m"]), h.make_node("Add", [f"{t}m", f"b{t}"], [f"{t}a"]),
                  h.make_node("Reshape", [f"{t}a", "heads"], [f"{t}r"]),
                  h.make_node("Transpose", [f"{t}r"], [f"{t}t"], perm=[0, 2, 3, 1] if t == "k" else [0, 2, 1, 3])]
    nodes += [h.make_node("MatMul", ["qt", "kt"], ["sc"]), h.make_node("Mul", ["sc", "scale"], ["scs"]),
              h.make_node("Softmax", ["scs"], ["p"], axis=-1), h.make_node("MatMul", ["p", "vt"], ["ctx"]),
              h.make_node("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]), h.make_node("Reshape", ["ct", "tokens"], ["cr"]),
              h.make_node("MatMul", ["cr", "wo"], ["om"]), h.make_node("Add", ["om", "bo"], ["y"])]
    inits.update(heads=np.array([b, s, heads, d], np.int64), tokens=np.array([b, s, hid], np.int64),
                 scale=np.float32(1 / np.sqrt(d)), wo=_f(hid, hid), bo=_f(hid))
    g = h.make_graph(nodes, "attn", [h.make_tensor_value_info("x", T.FLOAT, [b, s, hid])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_attention_matmuls_of_two_activations_run_on_the_accelerator():
    """Q K^T and P V (both operands computed at run time, 4 heads as a batch loop) are int8 dense layers on the
    accelerator under the built-in PTQ: MAC fraction 1.0, sim == ref bit for bit, close to float."""
    m = attention()
    cal = [{"x": _f(1, 8, 32) * 5} for _ in range(4)]
    x = _f(1, 8, 32) * 5
    outs = {}
    for target in ("ref", "sim"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mod = build(m, target=target, calibration=cal)
        outs[target] = mod.run({"x": x})[0]
        assert mod.compiled.stats["act_matmuls_unrolled"] == 2
        assert mod.profile_summary()["accel_mac_fraction"] == 1.0
    np.testing.assert_array_equal(outs["sim"], outs["ref"])
    assert cosine(outs["sim"], ort_run(m, {"x": x})[0]) > 0.995


def test_qmatmul_kernel_is_the_exact_integer_product():
    from jit_runtime.host_ops.kernels import KERNELS
    from compiler.quant.requant_params import choose_requant

    a = RNG.integers(-128, 128, (2, 3, 5, 16)).astype(np.int8)
    b = RNG.integers(-128, 128, (2, 3, 16, 7)).astype(np.int8)
    rq = choose_requant(1 / 700.0, 16 * 128 * 128)
    got = KERNELS["QMatMul"]({"requant": rq}, a, b)
    want = np.clip(np.rint((a.astype(np.int64) @ b.astype(np.int64)) / 700.0), -128, 127)
    assert got.dtype == np.int8
    assert np.abs(got.astype(np.int64) - want).max() <= 1  # ties may round either way


def test_attention_int8_on_the_llvm_target_equals_ref():
    """The llvm target runs the unrolled attention dense layers (run-time weights packed by numpy glue) bit for
    bit like the ref executor."""
    m = attention()
    cal = [{"x": _f(1, 8, 32) * 5} for _ in range(2)]
    x = _f(1, 8, 32) * 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = build(m, target="llvm", calibration=cal, progress=False).run({"x": x})[0]
        want = build(m, target="ref", calibration=cal, progress=False).run({"x": x})[0]
    np.testing.assert_array_equal(got, want)
