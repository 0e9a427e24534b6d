"""Transformers, text recognizers and detectors with ConvTranspose on the llvm target (and compiled for cuda): the
zoo's models against onnxruntime, and each new library op (layer norm over any trailing axes, products of two
activations with broadcast batches, N-D MatMul with a constant weight, erf/tanh/sqrt, ConvTranspose as zero
insertion + conv) against onnxruntime on single-node models, with the refusals of what the library lacks."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compiler.backend.plans.plans import UnsupportedOnTarget
from compiler.executor import build
from compiler.quant.ort_tools import ort_run
from compiler.zoo import modern


def _rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def _model(op: str, inputs: dict, out_shape, consts: dict | None = None, **attrs) -> onnx.ModelProto:
    """One ``op`` node: graph inputs ``inputs`` (name -> shape, float32), constants ``consts`` (name -> array)."""
    consts = consts or {}
    names = list(inputs) + list(consts)
    node = helper.make_node(op, names, ["y"], **attrs)
    g = helper.make_graph([node], op.lower(),
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in inputs.items()],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [onnx.numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _check(model, feeds, tol: float = 1e-5):
    mod = build(model, target="llvm", progress=False)
    got = mod.run(feeds)
    for a, b in zip(got, ort_run(model, feeds)):
        assert a.shape == b.shape and _rel_err(a, b) < tol
    return mod


@pytest.mark.parametrize("name", ["bert", "vit", "recognizer", "dbnet"])
def test_zoo_models_run_on_llvm(name):
    model = getattr(modern, name)()
    mod = None
    for feeds in modern.sample_inputs(model, 2, seed=3):
        mod = mod or build(model, target="llvm", progress=False)
        got, want = mod.run(feeds), ort_run(model, feeds)
        assert all(_rel_err(a, b) < 1e-5 for a, b in zip(got, want))
    backends = {r["cpu_backend"] for r in mod.profile()}
    assert "llvm" in backends and backends <= {"llvm", "numpy", "view"}
    heavy = [r for r in mod.profile() if r["op"] in ("Conv", "FusedConv", "Gemm", "FusedDense", "MatMul",
                                                       "LayerNormalization", "Softmax")]
    assert heavy and all(r["cpu_backend"] == "llvm" for r in heavy)  # the arithmetic is compiled, not numpy


@pytest.mark.parametrize("name", ["bert", "vit", "recognizer", "dbnet"])
def test_zoo_models_compile_for_cuda(name):
    mod = build(getattr(modern, name)(), target="cuda", progress=False)  # PTX for every kernel; runs need a GPU
    assert mod.cpu._plans


@pytest.mark.parametrize("shape,axis,scale_shape,bias", [((2, 5, 64), -1, (64,), True), ((3, 4, 6), 1, (4, 6), True),
                                                         ((2, 7, 33), 2, (1,), False), ((4, 16), 0, (4, 16), True)])
def test_layer_norm(shape, axis, scale_shape, bias):
    rng = np.random.default_rng(1)
    consts = {"scale": rng.standard_normal(scale_shape), **({"bias": rng.standard_normal(scale_shape)} if bias else {})}
    model = _model("LayerNormalization", {"x": shape}, shape, consts, axis=axis, epsilon=1e-3)
    _check(model, {"x": (3 * rng.standard_normal(shape) + 1).astype(np.float32)})


def test_layer_norm_refusals():
    m = _model("LayerNormalization", {"x": (2, 8), "scale": (8,)}, (2, 8))
    with pytest.raises(UnsupportedOnTarget, match="the scale must be a constant initializer"):
        build(m, target="llvm", progress=False)
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y", "mean"], axis=-1)
    g = helper.make_graph([node], "ln2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 8))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 8)),
                           helper.make_tensor_value_info("mean", TensorProto.FLOAT, (2, 1))],
                          [onnx.numpy_helper.from_array(np.ones(8, np.float32), "scale")])
    with pytest.raises(UnsupportedOnTarget, match="first output only"):
        build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), target="llvm",
              progress=False)


@pytest.mark.parametrize("sa,sb", [((1, 4, 17, 16), (1, 4, 16, 17)), ((2, 1, 5, 3), (4, 3, 7)), ((6, 24), (24, 9)),
                                   ((3, 1, 8, 16), (1, 2, 16, 32))])
def test_matmul_of_two_activations(sa, sb):
    rng = np.random.default_rng(2)
    out = np.matmul(np.zeros(sa), np.zeros(sb)).shape
    mod = _check(_model("MatMul", {"a": sa, "b": sb}, out),
                 {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)})
    assert [r["cpu_backend"] for r in mod.profile() if r["op"] == "MatMul"] == ["llvm"]


def test_matmul_nd_input_constant_weight():
    rng = np.random.default_rng(3)
    model = _model("MatMul", {"x": (2, 3, 5, 16)}, (2, 3, 5, 24), {"w": rng.standard_normal((16, 24))})
    _check(model, {"x": rng.standard_normal((2, 3, 5, 16)).astype(np.float32)})


@pytest.mark.parametrize("sa,sb", [((3, 8), (8,)), ((8,), (2, 8, 5)), ((7,), (7,))])
def test_matmul_with_a_vector_operand(sa, sb):
    rng = np.random.default_rng(6)
    out = np.matmul(np.zeros(sa), np.zeros(sb)).shape
    _check(_model("MatMul", {"a": sa, "b": sb}, out),
           {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)})


def test_matmul_refusals():
    """The planner's own checks (a model's shapes are checked before by onnx's shape inference)."""
    from compiler.backend.plans.plans import plan_node
    from compiler.graph.ir import Node, TensorInfo

    def plan(sa, sb, db="float32"):
        node = Node("MatMul", ["a", "b"], ["y"], {}, name="mm")
        return plan_node(node, [TensorInfo(sa, np.float32), TensorInfo(sb, np.dtype(db))], {}, "llvm")
    with pytest.raises(UnsupportedOnTarget, match=r"batch axes of \(2, 3, 4\) and \(5, 4, 2\) do not broadcast"):
        plan((2, 3, 4), (5, 4, 2))
    with pytest.raises(UnsupportedOnTarget, match=r"inner sizes 4 and 3 differ"):
        plan((2, 4), (3, 2))
    with pytest.raises(UnsupportedOnTarget, match=r"operands float32/int32; the library multiplies float32"):
        plan((2, 4), (4, 2), "int32")
    with pytest.raises(UnsupportedOnTarget, match=r"scalar operand"):
        plan((), (4, 2))


@pytest.mark.parametrize("op", ["Erf", "Tanh", "Sqrt"])
def test_math_functions(op):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 37)).astype(np.float32) * 3
    if op == "Sqrt":
        x = np.abs(x)
    x.flat[:4] = [0.0, 1e-4, -1e-4 if op != "Sqrt" else 2e-4, 5.0]
    mod = _check(_model(op, {"x": x.shape}, x.shape), {"x": x}, tol=2e-6)
    assert [r["cpu_backend"] for r in mod.profile()] == ["llvm"]


@pytest.mark.parametrize("attrs,c,o,group", [({"strides": [2, 2]}, 4, 6, 1),
                                             ({"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, 3, 5, 1),
                                             ({"strides": [3, 2], "pads": [0, 1, 2, 0], "dilations": [1, 2]}, 4, 4, 2),
                                             ({}, 2, 3, 1)])
def test_conv_transpose(attrs, c, o, group):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, c, 5, 6)).astype(np.float32)
    w = rng.standard_normal((c, o // group, 3, 3))
    b = rng.standard_normal(o)
    probe = _model("ConvTranspose", {"x": x.shape}, None, {"w": w, "b": b}, group=group, **attrs)
    out_shape = ort_run(probe, {"x": x})[0].shape
    mod = _check(_model("ConvTranspose", {"x": x.shape}, out_shape, {"w": w, "b": b}, group=group, **attrs), {"x": x})
    rows = [(r["op"], r["cpu_backend"]) for r in mod.profile()]
    convs = [b for op, b in rows if op in ("Conv", "FusedConv")]
    assert convs == ["llvm"] and ("ZeroInsert", "numpy") in rows, rows  # the MACs compiled; the zeros by numpy


NODE_CASES = r"^test_(erf|tanh|sqrt|matmul_|prelu|where|equal|and\d|expand|range|isnan|gather_elements|gathernd)"


def test_onnx_node_cases_of_the_new_ops(request):
    """onnx's own backend node tests of these ops (expected outputs from onnx's reference), compiled for llvm."""
    import re

    from tests.onnx_node.cases import load_cases, run_case, skip_reason

    cache = request.config.cache.mkdir("onnx_node") if getattr(request.config, "cache", None) else None
    cases = [c for c in load_cases(cache) if re.match(NODE_CASES, c.name) and not skip_reason(c.name)]
    names = {c.name for c in cases}
    assert {"test_erf", "test_tanh", "test_sqrt", "test_matmul_4d", "test_matmul_1d_3d", "test_where_example",
            "test_equal"} <= names
    for c in cases:
        run_case(c, "llvm")


@pytest.mark.parametrize("slope_shape", [(4, 1, 1), (1,), (4, 6, 6)])
def test_prelu(slope_shape):
    rng = np.random.default_rng(7)
    model = _model("PRelu", {"x": (2, 4, 6, 6)}, (2, 4, 6, 6), {"slope": rng.standard_normal(slope_shape)})
    mod = _check(model, {"x": rng.standard_normal((2, 4, 6, 6)).astype(np.float32)}, tol=1e-7)
    assert [r["cpu_backend"] for r in mod.profile()] == ["llvm"]


@pytest.mark.parametrize("rows,trans_b,relu", [(5, 1, True), (17, 0, False), (64, 1, False), (3, 1, True)])
def test_dense_over_many_rows(rows, trans_b, relu):
    """Gemm (-> Relu, fused) of many rows on the tiled GEMM (>= 4 rows; 3 rows: the one-row kernel per row)."""
    rng = np.random.default_rng(8)
    k, m = 48, 40
    w = rng.standard_normal((m, k) if trans_b else (k, m))
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h" if relu else "y"], transB=trans_b)]
    if relu:
        nodes.append(helper.make_node("Relu", ["h"], ["y"]))
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (rows, k))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (rows, m))],
                          [onnx.numpy_helper.from_array(w.astype(np.float32), "w"),
                           onnx.numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    mod = _check(model, {"x": rng.standard_normal((rows, k)).astype(np.float32)})
    kernels = [r["cpu_backend"] for r in mod.profile()]
    assert kernels == ["llvm"]


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("sa,sb", [((13, 37), (37, 50)), ((2, 1, 7, 5), (3, 5, 9)), ((1, 3), (3, 1)), ((6, 32), (32, 64))])
def test_gemm_tiles_any_size(lanes, sa, sb):
    """The GEMM at every tile width (SSE, AVX2, AVX-512 lanes) on ragged rows and columns, vs numpy (the tiles
    compile for any x86 CPU: narrower vectors than the host's are legal)."""
    import compiler
    from compiler.schedule import create_schedule
    from compiler.topi import gemm

    rng = np.random.default_rng(9)
    op = gemm.gemm(sa, sb, lanes, bias=True, act="relu")
    assert op.bm <= sa[-2] and op.bn <= sb[-1]
    s = create_schedule(op.out)
    gemm.schedule_cpu(op, s)
    f = compiler.build_op(s, args=op.inputs + [op.out])
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    bias = rng.standard_normal(sb[-1]).astype(np.float32)
    want = np.maximum(np.matmul(a.astype(np.float64), b) + bias, 0)
    np.testing.assert_allclose(f(a, b, bias), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,edge", [("Erf", 3.9), ("Tanh", 9.0)])
def test_odd_functions_accuracy_everywhere(op, edge):
    """The vectorized rational erf/tanh vs scipy's / numpy's float64 ones: a dense grid, the saturation edges, huge
    values, +-inf and NaN (kept NaN), as one llvm kernel."""
    from scipy.special import erf

    x = np.concatenate([np.linspace(-12, 12, 240001), [edge, -edge, edge - 1e-4, 1e-30, -1e-30, 0.0, 1e30, -1e30,
                                                       3e38, np.inf, -np.inf, np.nan]]).astype(np.float32)
    mod = build(_model(op, {"x": x.shape}, x.shape), target="llvm", progress=False)
    got = mod(x=x)
    want = (erf if op == "Erf" else np.tanh)(x.astype(np.float64))
    assert np.isnan(got[-1]) and np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.abs(got[ok] - want[ok]).max() < 5e-7 and np.abs(got[ok]).max() <= 1.0
    small = ok & (np.abs(x) < 1e-3) & (x != 0)
    assert np.abs(got[small] / want[small] - 1).max() < 1e-6  # relative near 0, where erf(x) ~ 2x / sqrt(pi)


@pytest.mark.parametrize("vector", [False, True])
def test_exp_accuracy_everywhere(vector):
    """llvm's exp (straight-line vector code, the same for scalars) vs float64 numpy: within 2 ulp over the whole
    normal range, inf above 88.7228, 0 below -87.3 (under the smallest normal), NaN kept."""
    import compiler
    from compiler.schedule import create_schedule

    x = np.concatenate([np.linspace(-100, 100, 200001), [88.7228, 88.7229, -87.3, -87.31, 0.0, 1e-30, 0.34657,
                                                         -0.34657, np.inf, -np.inf, np.nan]]).astype(np.float32)
    a = compiler.te.placeholder(x.shape, "float32", "a")
    y = compiler.te.compute(x.shape, lambda i: compiler.te.exp(a[i]), name="y")
    s = create_schedule(y)
    if vector:
        s[y].vectorize(s[y].split(s[y].leaf_iter_vars[0], 16)[1])
    got = compiler.build_op(s, args=[a, y])(x)
    want = np.exp(x.astype(np.float64))
    normal = (x >= -87.3) & (want < np.finfo(np.float32).max)
    assert np.abs(got[normal] / want[normal] - 1).max() < 2.5e-7
    assert (got[x > 88.7229] == np.inf).all() and (got[x < -87.3] == 0).all()
    assert np.isnan(got[-1]) and got[-3] == np.inf and got[-2] == 0 and got[-7] == 1
