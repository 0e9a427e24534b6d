"""ONNX elementwise math, Min/Max, Pow, the Reduce* family and LogSoftmax: compiled on llvm and run by the numpy
kernels (ref), each against a float64 numpy reference over a range with special values (0, -0, NaN, +-inf); mask
ops as numpy glue on llvm; the refusals (bad axes, shapes that do not broadcast, what llvm's library lacks)."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compiler.backend.plans.plans import UnsupportedOnTarget
from compiler.executor import build
from compiler.frontend.errors import ModelError

SPECIAL = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30, -1e-30, 88.0, -104.0], np.float32)


def _x(shape=(4, 250), scale=4.0) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * scale
    x.reshape(-1)[:SPECIAL.size] = SPECIAL
    x.reshape(-1)[SPECIAL.size:SPECIAL.size + 200] = np.linspace(-30, 30, 200)
    return x


def _model(op: str, x_shape, consts: dict | None = None, opset: int = 18, **attrs) -> onnx.ModelProto:
    consts = consts or {}
    node = helper.make_node(op, ["x"] + list(consts), ["y"], **attrs)
    g = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
        ir_version=max(8, helper.find_min_ir_version_for([helper.make_opsetid("", opset)])))


def _close(got, want, rtol: float, atol: float) -> None:
    want = np.asarray(want, np.float64)
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want)
    np.testing.assert_allclose(got[fin].astype(np.float64), want[fin], rtol=rtol, atol=atol)


def _erf(v):
    from scipy.special import erf

    return erf(v)


def _sp(v):
    return np.logaddexp(v, 0.0)


# op, attributes, float64 reference, (rtol, atol), opset
UNARY = [
    ("Exp", {}, np.exp, (1e-6, 0), 18),
    ("Log", {}, np.log, (1e-6, 0), 18),
    ("Neg", {}, np.negative, (0, 0), 18),
    ("Reciprocal", {}, lambda v: 1 / v, (1e-7, 0), 18),
    ("Abs", {}, np.abs, (0, 0), 18),
    ("Floor", {}, np.floor, (0, 0), 18),
    ("Ceil", {}, np.ceil, (0, 0), 18),
    ("Round", {}, np.rint, (0, 0), 18),
    ("Sign", {}, np.sign, (0, 0), 18),
    ("Sin", {}, np.sin, (1e-6, 1e-7), 18),
    ("Cos", {}, np.cos, (1e-6, 1e-7), 18),
    ("Softplus", {}, _sp, (1e-6, 0), 18),
    ("Softsign", {}, lambda v: v / (1 + np.abs(v)), (1e-6, 0), 18),
    ("Elu", {"alpha": 0.7}, lambda v: np.where(v >= 0, v, 0.7 * np.expm1(v)), (1e-6, 1e-7), 18),
    ("Selu", {}, lambda v: 1.0507009873554805 * np.where(v > 0, v, 1.6732632423543772 * np.expm1(v)), (1e-6, 1e-7), 18),
    ("Celu", {"alpha": 2.0}, lambda v: np.maximum(v, 0) + np.minimum(0, 2.0 * np.expm1(v / 2.0)), (1e-6, 1e-7), 18),
    ("ThresholdedRelu", {"alpha": 0.5}, lambda v: np.where(v > 0.5, v, 0.0), (0, 0), 18),
    ("Mish", {}, lambda v: v * np.tanh(_sp(v)), (1e-6, 1e-6), 18),
    ("Gelu", {}, lambda v: 0.5 * v * (1 + _erf(v / np.sqrt(2))), (1e-6, 1e-6), 20),
    ("Gelu", {"approximate": "tanh"}, lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))),
     (1e-6, 1e-6), 20),
]


@pytest.mark.parametrize("target", ["llvm", "ref"])
@pytest.mark.parametrize("op,attrs,ref,tol,opset", UNARY, ids=[f"{u[0]}{'-' + str(u[1].get('approximate', '')) if u[1] else ''}"
                                                              for u in UNARY])
def test_unary_math_matches_float64(op, attrs, ref, tol, opset, target):
    x = _x()
    if op == "Log":
        x = np.abs(x)
    mod = build(_model(op, x.shape, opset=opset, **attrs), target=target, progress=False,
                **({"quantize": False} if target == "ref" else {}))
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    rtol, atol = tol  # against the reference rounded to float32; subnormal results may flush to 0
    _close(mod(x=x), want.astype(np.float32).astype(np.float64), rtol, max(atol, 1.2e-38) if rtol else 0)


@pytest.mark.parametrize("p", [2.0, 3.0, -2.0, 0.0, 0.5, -0.5, 2.5, -1.5, 7.0])
def test_pow_constant_exponent_matches_c_pow(p):
    """numpy's float32 power is C's powf: the signs of negative bases, -inf, 0 ** negative, x ** 0 = 1 for NaN."""
    x = _x()
    mod = build(_model("Pow", x.shape, {"p": np.float32(p)}), target="llvm", progress=False)
    with np.errstate(all="ignore"):
        want = np.power(x, np.float32(p)).astype(np.float64)
    _close(mod(x=x), want, 4e-6, 1.2e-38)  # e^(p log|x|): error ~ |p log x| ulp (88 ** 7: 2e-6)


def test_pow_tensor_exponent_broadcasts():
    x = _x((4, 250))
    p = (np.arange(250) % 9 - 4).astype(np.float32) * 0.75  # integers (odd, even) and fractions
    mod = build(_model("Pow", x.shape, {"p": p}), target="llvm", progress=False)
    with np.errstate(all="ignore"):
        want = np.power(x, p).astype(np.float64)
    _close(mod(x=x), want, 4e-6, 1.2e-38)


@pytest.mark.parametrize("op,fn", [("Min", np.fmin), ("Max", np.fmax)])
def test_min_max_of_three_broadcast_operands_propagate_nan(op, fn):
    x = _x((4, 250))
    b = np.linspace(-2, 2, 250).astype(np.float32)
    c = np.float32(0.25)
    mod = build(_model(op, x.shape, {"b": b, "c": c}), target="llvm", progress=False)
    want = fn(fn(x.astype(np.float64), b), c)
    want[np.isnan(x)] = np.nan  # ONNX (numpy's minimum/maximum): NaN wins
    _close(mod(x=x), want, 0, 0)


REDUCE = [
    ("ReduceSum", np.sum), ("ReduceMax", np.max), ("ReduceMin", np.min),
    ("ReduceSumSquare", lambda v, axis, keepdims: np.sum(v * v, axis=axis, keepdims=keepdims)),
    ("ReduceL1", lambda v, axis, keepdims: np.sum(np.abs(v), axis=axis, keepdims=keepdims)),
    ("ReduceL2", lambda v, axis, keepdims: np.sqrt(np.sum(v * v, axis=axis, keepdims=keepdims))),
    ("ReduceLogSumExp", lambda v, axis, keepdims: np.log(np.sum(np.exp(v), axis=axis, keepdims=keepdims))),
    ("ReduceMean", np.mean),
]


@pytest.mark.parametrize("target", ["llvm", "ref"])
@pytest.mark.parametrize("axes,keepdims", [([-1], 1), ([0, 2], 0), ([1], 0), (None, 1)])
@pytest.mark.parametrize("op,fn", REDUCE, ids=[r[0] for r in REDUCE])
def test_reductions_over_any_axes(op, fn, axes, keepdims, target):
    x = np.random.default_rng(1).standard_normal((3, 5, 7)).astype(np.float32) * 3
    attrs = {"keepdims": keepdims}
    consts = {}
    if axes is not None:  # opset 18: axes as an input
        consts["axes"] = np.asarray(axes, np.int64)
    mod = build(_model(op, x.shape, consts, **attrs), target=target, progress=False,
                **({"quantize": False} if target == "ref" else {}))
    ax = None if axes is None else tuple(a % 3 for a in axes)
    want = fn(x.astype(np.float64), axis=ax, keepdims=bool(keepdims))
    _close(mod(x=x), want, 2e-6, 1e-6)


def test_log_sum_exp_of_large_values_does_not_overflow():
    x = np.full((2, 6), 100.0, np.float32)
    x[1] = -np.inf
    mod = build(_model("ReduceLogSumExp", x.shape, {"axes": np.asarray([1], np.int64)}), target="llvm",
                progress=False)
    got = mod(x=x)
    np.testing.assert_allclose(got[0], 100 + np.log(6), rtol=1e-6)
    assert got[1, 0] == -np.inf


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax(axis):
    x = _x((6, 40), scale=10.0)[:, :] * 1
    x[~np.isfinite(x)] = 3.0
    mod = build(_model("LogSoftmax", x.shape, axis=axis), target="llvm", progress=False)
    v = x.astype(np.float64)
    d = v - v.max(axis=axis, keepdims=True)
    _close(mod(x=x), d - np.log(np.exp(d).sum(axis=axis, keepdims=True)), 1e-6, 1e-5)


def test_masks_and_arg_max_run_as_numpy_glue_on_llvm():
    """Greater -> Not -> Where and an ArgMax: comparisons, logic and indices are numpy glue (exact)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])
    nodes = [helper.make_node("Greater", ["x", "t"], ["g"]), helper.make_node("Not", ["g"], ["n"]),
             helper.make_node("Where", ["n", "x", "z"], ["y"]),
             helper.make_node("ArgMax", ["x"], ["i"], axis=1, keepdims=0, select_last_index=1)]
    g = helper.make_graph(nodes, "m", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                          [onnx.numpy_helper.from_array(np.float32(0.5), "t"),
                           onnx.numpy_helper.from_array(np.float32(-1.0), "z")])
    mod = build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), target="llvm",
                progress=False)
    v = np.round(np.random.default_rng(2).standard_normal((3, 8)), 0).astype(np.float32)  # ties for the last index
    y, i = mod.run({"x": v})
    np.testing.assert_array_equal(y, np.where(v > 0.5, -1.0, v))
    np.testing.assert_array_equal(i, 7 - np.argmax(v[:, ::-1], axis=1))
    assert {r["op"]: r["cpu_backend"] for r in mod.profile()}.get("ArgMax") == "numpy"


def test_bad_reduce_axes_are_refused_at_the_input():
    with pytest.raises(ModelError, match=r"axes \[3\] out of range for input rank 3"):
        build(_model("ReduceMax", (2, 3, 4), axes=[3], opset=17), target="llvm", progress=False)
    with pytest.raises(ModelError, match="repeat an axis"):
        build(_model("ReduceSum", (2, 3, 4), {"axes": np.asarray([1, -2], np.int64)}), target="llvm", progress=False)


def test_min_of_shapes_that_do_not_broadcast_is_refused():
    with pytest.raises(ModelError, match="do not broadcast together"):
        build(_model("Min", (2, 3), {"b": np.zeros(4, np.float32)}), target="llvm", progress=False)


def test_gelu_approximation_outside_the_spec_is_refused():
    with pytest.raises(Exception, match="approximate"):
        build(_model("Gelu", (2, 3), opset=20, approximate="fast"), target="llvm", progress=False)


@pytest.mark.parametrize("op,consts", [("Tan", {}), ("ReduceProd", {"axes": np.asarray([1], np.int64)})])
def test_what_the_llvm_library_lacks_is_refused_by_name_and_runs_on_ref(op, consts):
    model = _model(op, (2, 5), consts)
    with pytest.raises(UnsupportedOnTarget, match=op):
        build(model, target="llvm", progress=False)
    x = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)
    got = build(model, target="ref", quantize=False, progress=False)(x=x)
    want = np.tan(x) if op == "Tan" else np.prod(x, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_shape_set_by_input_values_runs_on_ref_and_is_refused_by_llvm():
    """Pad sized by an input tensor: no memory-plan slot on ref (the value as the kernel returns it); llvm, which
    compiles kernels for static shapes, refuses it naming the tensor."""
    nodes = [helper.make_node("Concat", ["p", "p"], ["pads"], axis=0), helper.make_node("Pad", ["x", "pads"], ["y"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                       helper.make_tensor_value_info("p", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    mod = build(model, target="ref", quantize=False, progress=False)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for p in ([0, 0], [2, 1], [5, 9]):
        np.testing.assert_array_equal(mod.run({"x": x, "p": np.asarray(p, np.int64)})[0], np.pad(x, [(p[0],) * 2, (p[1],) * 2]))
    g.node.append(helper.make_node("Relu", ["y"], ["r"], name="relu_of_pad"))  # a compiled kernel reads it
    g.output[0].name = "r"
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    with pytest.raises(UnsupportedOnTarget, match=r"node 'relu_of_pad' \(Relu\) reads tensor 'y', whose shape"):
        build(model, target="llvm", progress=False)


def test_a_quantized_cnn_keeps_the_new_ops_in_float_between_accelerator_convs():
    """Conv -> Mish -> Conv -> Softplus -> ReduceMax quantized with calibration: the convs offload (sim), the math
    runs in float between them; llvm's int8 path and float kernels agree with sim; both near onnxruntime's float."""
    from compiler.quant.ort_tools import ort_run

    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((8, 16, 3, 3)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Mish", ["c1"], ["m"]),
             helper.make_node("Conv", ["m", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Softplus", ["c2"], ["s"]), helper.make_node("ReduceMax", ["s", "ax"], ["y"], keepdims=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2"),
                           onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "ax")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    cal = rng.standard_normal((8, 3, 16, 16)).astype(np.float32)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    sim = build(model, target="sim", calibration=cal, progress=False)
    y_sim = sim(x=x)
    ran = {r["op"]: r["ran_on"] for r in sim.profile()}
    assert ran["AccelConv2D"] == "accel:sim" and ran["Mish"].startswith("cpu")
    np.testing.assert_allclose(build(model, target="llvm", calibration=cal, progress=False)(x=x), y_sim, rtol=1e-5,
                               atol=1e-6)
    want = ort_run(model, {"x": x})[0]
    assert np.abs(y_sim - want).max() < 0.02 * np.abs(want).max()


def test_rearrangement_and_index_ops_on_llvm_match_onnxruntime():
    """A decoder-style head: position ids by CumSum, a causal Trilu mask, DepthToSpace, Tile, TopK, ScatterND,
    Mean: glue on numpy, Mean a library kernel; every output equal to onnxruntime's."""
    from compiler.quant.ort_tools import ort_run

    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [helper.make_node("CumSum", ["ones", "ax1"], ["pos"], exclusive=1),
             helper.make_node("Trilu", ["sq", "k1"], ["causal"], upper=0),
             helper.make_node("DepthToSpace", ["x"], ["d2s"], blocksize=2, mode="CRD"),
             helper.make_node("Tile", ["d2s", "reps"], ["tiled"]),
             helper.make_node("TopK", ["row", "k3"], ["top", "top_i"], axis=-1),
             helper.make_node("ScatterND", ["row", "where", "upd"], ["scat"], reduction="add"),
             helper.make_node("Mean", ["row", "row2", "bias"], ["avg"])]
    ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in
           (("ones", i64, [2, 6]), ("sq", f, [3, 5, 5]), ("x", f, [1, 8, 3, 3]), ("row", f, [2, 7]), ("row2", f, [2, 7]))]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in
            (("pos", i64), ("causal", f), ("tiled", f), ("top", f), ("top_i", i64), ("scat", f), ("avg", f))]
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in
             (("ax1", np.array(1, np.int64)), ("k1", np.array(1, np.int64)), ("reps", np.array([1, 2, 1, 3], np.int64)),
              ("k3", np.array([3], np.int64)), ("where", np.array([[0, 1], [1, 6], [0, 1]], np.int64)),
              ("upd", np.array([1.5, -2.0, 4.0], np.float32)), ("bias", np.linspace(0, 1, 7).astype(np.float32)))]
    model = helper.make_model(helper.make_graph(nodes, "m", ins, outs, inits),
                              opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    rng = np.random.default_rng(4)
    feeds = {"ones": np.ones((2, 6), np.int64), "sq": rng.standard_normal((3, 5, 5)).astype(np.float32),
             "x": rng.standard_normal((1, 8, 3, 3)).astype(np.float32),
             "row": rng.standard_normal((2, 7)).astype(np.float32), "row2": rng.standard_normal((2, 7)).astype(np.float32)}
    mod = build(model, target="llvm", progress=False)
    for got, want in zip(mod.run(feeds), ort_run(model, feeds)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    ran = {r["op"]: r["cpu_backend"] for r in mod.profile()}
    assert ran["Mean"] != "numpy" and ran["Tile"] == "numpy"


@pytest.mark.parametrize("op,attrs,shape,message", [
    ("DepthToSpace", {"blocksize": 3}, (1, 8, 2, 2), "multiple of blocksize"),
    ("SpaceToDepth", {"blocksize": 2}, (1, 3, 5, 4), "multiples of blocksize"),
    ("Trilu", {}, (5,), "rank >= 2"),
    ("CumSum", {}, (2, 3), r"\(axis\) = \[2\]"),
    ("TopK", {}, (2, 3), r"\(k\) = 4; allowed 0..3"),
])
def test_bad_rearrangements_are_refused_at_the_input(op, attrs, shape, message):
    consts = {"CumSum": {"a": np.array(2, np.int64)}, "TopK": {"k": np.array([4], np.int64)}}.get(op, {})
    model = _model(op, shape, consts, **attrs)
    if op == "TopK":
        model.graph.node[0].output.append("idx")
        model.graph.output.append(helper.make_tensor_value_info("idx", TensorProto.INT64, None))
    with pytest.raises(ModelError, match=message):
        build(model, target="llvm", progress=False)


@pytest.mark.parametrize("op,attrs", [("InstanceNormalization", {"epsilon": 1e-3}),
                                      ("GroupNormalization", {"num_groups": 3})])
@pytest.mark.parametrize("target", ["llvm", "ref"])
def test_instance_and_group_norm_match_float64(op, attrs, target):
    """Rewritten at import onto LayerNormalization (a library kernel on llvm); scale and bias per channel."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 6, 5, 7)) * 3 + 1).astype(np.float32)
    per = 6
    scale, bias = rng.standard_normal(per).astype(np.float32), rng.standard_normal(per).astype(np.float32)
    mod = build(_model(op, x.shape, {"s": scale, "b": bias}, opset=21, **attrs), target=target, progress=False,
                **({"quantize": False} if target == "ref" else {}))
    g = attrs.get("num_groups", 6)
    v = x.astype(np.float64).reshape(2, g, -1)
    eps = attrs.get("epsilon", 1e-5)
    y = ((v - v.mean(2, keepdims=True)) / np.sqrt(v.var(2, keepdims=True) + eps)).reshape(x.shape)
    _close(mod(x=x), y * scale.reshape(1, 6, 1, 1) + bias.reshape(1, 6, 1, 1), 1e-5, 1e-5)
    if target == "llvm":
        assert "LayerNormalization" in {r["op"] for r in mod.profile()}


def test_group_norm_groups_must_divide_the_channels():
    with pytest.raises(ModelError, match="must divide the 6 channels"):
        build(_model("GroupNormalization", (1, 6, 4, 4), {"s": np.ones(6, np.float32), "b": np.zeros(6, np.float32)},
                     opset=21, num_groups=4), target="llvm", progress=False)


def test_integer_index_math_runs_on_numpy_and_float_refusals_stay():
    """HF-style position ids in int64: CumSum(mask) * mask + 1, their row sums, a Max: the library's kernels are
    float32/int8/int32, so these integer nodes run on numpy (exact) instead of refusing the model."""
    from compiler.quant.ort_tools import ort_run

    i64 = TensorProto.INT64
    nodes = [helper.make_node("CumSum", ["mask", "ax"], ["cs"]), helper.make_node("Mul", ["cs", "mask"], ["m"]),
             helper.make_node("Add", ["m", "one"], ["pos"]), helper.make_node("ReduceSum", ["mask", "ax1"], ["len"]),
             helper.make_node("Max", ["len", "one"], ["y"]), helper.make_node("Neg", ["pos"], ["npos"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("mask", i64, [2, 6])],
                          [helper.make_tensor_value_info(n, i64, None) for n in ("pos", "y", "npos")],
                          [onnx.numpy_helper.from_array(v, n) for n, v in
                           (("ax", np.array(1, np.int64)), ("one", np.array(1, np.int64)),
                            ("ax1", np.array([1], np.int64)))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    mod = build(model, target="llvm", progress=False)
    mask = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]], np.int64)
    for got, want in zip(mod.run({"mask": mask}), ort_run(model, {"mask": mask})):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    assert {r["op"]: r["cpu_backend"] for r in mod.profile()}["ReduceSum"] == "numpy"
    with pytest.raises(UnsupportedOnTarget, match="ReduceProd"):  # float math the library lacks: still refused
        build(_model("ReduceProd", (2, 5), {"axes": np.asarray([1], np.int64)}), target="llvm", progress=False)


def test_a_value_probe_the_graph_cannot_run_is_skipped():
    """Token ids into a 10-row embedding, then a Pad sized by another input: the 64s probe indexes past the table
    (the probe is skipped, the build goes on); the pad's shape still moves with the ones/7s probes, so ref runs it
    unplanned and returns the right shapes."""
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"]), helper.make_node("Concat", ["p", "p"], ["pads"], axis=0),
             helper.make_node("Pad", ["emb", "pads"], ["y"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("ids", TensorProto.INT64, [3]),
                                       helper.make_tensor_value_info("p", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    mod = build(model, target="ref", quantize=False, progress=False)
    ids, p = np.array([9, 0, 4], np.int64), np.array([1, 2], np.int64)
    want = np.pad(np.arange(40, dtype=np.float32).reshape(10, 4)[ids], [(1, 1), (2, 2)])
    np.testing.assert_array_equal(mod.run({"ids": ids, "p": p})[0], want)


def test_nms_selection_feeds_glue_on_llvm():
    """Detector post-processing: NonMaxSuppression's (selected, 3) rows (a value-set shape) -> Gather of the box
    index -> Gather of the boxes: glue and views only, so llvm runs it; equal to onnxruntime's."""
    from compiler.quant.ort_tools import ort_run

    f = TensorProto.FLOAT
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "maxn", "iou", "thr"], ["sel"]),
             helper.make_node("Gather", ["sel", "col2"], ["idx"], axis=1),
             helper.make_node("Gather", ["flat", "idx"], ["picked"], axis=0),
             helper.make_node("Reshape", ["boxes", "flat_shape"], ["flat"])]
    nodes = [nodes[3]] + nodes[:3]
    g = helper.make_graph(nodes, "nms", [helper.make_tensor_value_info("boxes", f, [1, 20, 4]),
                                         helper.make_tensor_value_info("scores", f, [1, 2, 20])],
                          [helper.make_tensor_value_info("sel", TensorProto.INT64, None),
                           helper.make_tensor_value_info("picked", f, None)],
                          [onnx.numpy_helper.from_array(v, n) for n, v in
                           (("maxn", np.array([5], np.int64)), ("iou", np.array([0.4], np.float32)),
                            ("thr", np.array([0.2], np.float32)), ("col2", np.array(2, np.int64)),
                            ("flat_shape", np.array([20, 4], np.int64)))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    rng = np.random.default_rng(6)
    xy = rng.uniform(0, 10, (1, 20, 2)).astype(np.float32)
    feeds = {"boxes": np.concatenate([xy, xy + rng.uniform(1, 4, (1, 20, 2)).astype(np.float32)], -1),
             "scores": rng.uniform(0, 1, (1, 2, 20)).astype(np.float32)}
    mod = build(model, target="llvm", progress=False)
    for got, want in zip(mod.run(feeds), ort_run(model, feeds)):
        np.testing.assert_array_equal(got, want)
    feeds["scores"] = feeds["scores"] * 0.5  # fewer above the threshold: another selection size
    for got, want in zip(mod.run(feeds), ort_run(model, feeds)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("center", [0, 1])
def test_nms_of_many_overlapping_boxes_equals_onnxruntime(center):
    """The NMS host kernel at detector scale (2 images, 6 classes, 500 boxes in overlapping clusters, corner or
    centre boxes, tied scores): the same selection, in the same order, as onnxruntime's."""
    from compiler.quant.ort_tools import ort_run

    rng = np.random.default_rng(center)
    n = 500
    centres = rng.uniform(0, 50, (2, 25, 2))[:, rng.integers(0, 25, n)] + rng.normal(0, 1.5, (2, n, 2))
    size = rng.uniform(2, 8, (2, n, 2))
    boxes = np.concatenate([centres, size] if center else [centres - size / 2, centres + size / 2], -1)
    scores = np.round(rng.uniform(0, 1, (2, 6, n)), 2)  # ties
    feeds = {"boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32)}
    f = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("NonMaxSuppression", ["boxes", "scores", "maxn", "iou", "thr"], ["sel"],
                                            center_point_box=center)], "nms",
                          [helper.make_tensor_value_info("boxes", f, [2, n, 4]),
                           helper.make_tensor_value_info("scores", f, [2, 6, n])],
                          [helper.make_tensor_value_info("sel", TensorProto.INT64, None)],
                          [onnx.numpy_helper.from_array(v, k) for k, v in
                           (("maxn", np.array([60], np.int64)), ("iou", np.array([0.45], np.float32)),
                            ("thr", np.array([0.1], np.float32)))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    got = build(model, target="ref", quantize=False, progress=False).run(feeds)[0]
    want = ort_run(model, feeds)[0]
    assert len(want) > 300
    np.testing.assert_array_equal(got, want)


def test_einsum_matches_numpy():
    a = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32)
    b = np.random.default_rng(8).standard_normal((2, 4, 5)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij, bjk -> bik")], "e",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3, 4]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    got = build(model, target="ref", quantize=False, progress=False).run({"a": a, "b": b})[0]
    np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", a.astype(np.float64), b), rtol=1e-5, atol=1e-6)
    bad = helper.make_model(helper.make_graph([helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
                                              "e", list(g.input), list(g.output)),
                            opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    with pytest.raises(ModelError, match="does not fit input 0"):
        build(bad, target="ref", quantize=False, progress=False)


def test_opset_23_24_transformer_ops_on_llvm():
    """RMSNormalization (opset 23; a library kernel on llvm) and Swish (opset 24) against float64 numpy."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((3, 7, 32)) * 2).astype(np.float32)
    scale = rng.standard_normal(32).astype(np.float32)
    mod = build(_model("RMSNormalization", x.shape, {"s": scale}, opset=23, epsilon=1e-6), target="llvm",
                progress=False)
    v = x.astype(np.float64)
    _close(mod(x=x), v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * scale, 1e-5, 1e-6)
    assert {r["op"]: r["cpu_backend"] for r in mod.profile()}["RMSNormalization"] == "llvm"
    sw = _x()
    mod = build(_model("Swish", sw.shape, opset=24, alpha=1.5), target="llvm", progress=False)
    with np.errstate(all="ignore"):
        want = sw.astype(np.float64) / (1 + np.exp(-1.5 * sw.astype(np.float64)))
    _close(mod(x=sw), want, 5e-6, 1e-30)  # e^(1.5 x) for x ~ -30: the product's rounding is ~|1.5 x| ulp


def test_reduce_log_sum_and_bit_ops_on_llvm():
    x = np.abs(np.random.default_rng(10).standard_normal((4, 9)).astype(np.float32)) + 0.1
    mod = build(_model("ReduceLogSum", x.shape, {"a": np.array([1], np.int64)}), target="llvm", progress=False)
    _close(mod(x=x), np.log(x.astype(np.float64).sum(1, keepdims=True)), 1e-6, 0)
    u = TensorProto.UINT8
    g = helper.make_graph([helper.make_node("BitShift", ["a", "n"], ["s"], direction="LEFT"),
                           helper.make_node("BitwiseXor", ["s", "a"], ["y"])], "b",
                          [helper.make_tensor_value_info("a", u, [6])], [helper.make_tensor_value_info("y", u, None)],
                          [onnx.numpy_helper.from_array(np.array([0, 1, 2, 3, 7, 8], np.uint8), "n")])
    mod = build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), target="llvm",
                progress=False)
    a = np.array([255, 3, 17, 129, 1, 200], np.uint8)
    np.testing.assert_array_equal(mod.run({"a": a})[0], np.left_shift(a, [0, 1, 2, 3, 7, 8]).astype(np.uint8) ^ a)


def _attention_model(q_shape, k_shape, **attrs) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("Attention", ["q", "k", "v"], ["y"], **attrs)], "att",
                          [helper.make_tensor_value_info("q", f, list(q_shape)),
                           helper.make_tensor_value_info("k", f, list(k_shape)),
                           helper.make_tensor_value_info("v", f, list(k_shape))],
                          [helper.make_tensor_value_info("y", f, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)], ir_version=12)


def _safe_softmax_rows(s: np.ndarray) -> np.ndarray:
    """float64 softmax over the last axis; a row of only -inf gives zeros (ONNX Attention's rule)."""
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(top), 0, top))
    total = e.sum(-1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0)


def test_attention_gqa_matches_a_float64_reference_on_ref_and_llvm():
    """Opset-24 Attention, 3-D inputs with 4 query heads over 2 key/value heads, causal: the host kernel (ref) and,
    rewritten at import into MatMul/SafeSoftmax, llvm's kernels (onnx's own node tests check the rest on ref, sim and
    llvm: masks, caches, windows, softcap, QK outputs)."""
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((2, 5, 4 * 8)).astype(np.float32), rng.standard_normal((2, 5, 2 * 8)).astype(np.float32),
               rng.standard_normal((2, 5, 2 * 8)).astype(np.float32))
    model = _attention_model(q.shape, k.shape, q_num_heads=4, kv_num_heads=2, is_causal=1)
    got = build(model, target="ref", quantize=False, progress=False).run({"q": q, "k": k, "v": v})[0]
    qh = q.astype(np.float64).reshape(2, 5, 4, 8).transpose(0, 2, 1, 3)
    kh = np.repeat(k.astype(np.float64).reshape(2, 5, 2, 8).transpose(0, 2, 1, 3), 2, axis=1)
    vh = np.repeat(v.astype(np.float64).reshape(2, 5, 2, 8).transpose(0, 2, 1, 3), 2, axis=1)
    s = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(8) + np.triu(np.full((5, 5), -np.inf), 1)
    want = (_safe_softmax_rows(s) @ vh).transpose(0, 2, 1, 3).reshape(2, 5, 32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    llvm = build(model, target="llvm", progress=False)
    np.testing.assert_allclose(llvm.run({"q": q, "k": k, "v": v})[0], want, rtol=1e-5, atol=1e-6)
    assert {r["op"] for r in llvm.profile()} >= {"MatMul", "SafeSoftmax"}


@pytest.mark.parametrize("mask_type", ["bool", "float"])
def test_attention_short_mask_cache_and_dead_rows_on_llvm(mask_type):
    """4-D Attention with a KV cache (present outputs), a mask shorter than the keys (the rest masked) in which
    one query row masks every key: llvm (the import rewrite: Concat, Pad, Where/Add, SafeSoftmax) equals ref's host
    kernel and a float64 numpy reference, the dead row gives zeros (not NaN) and the present outputs are the
    cache with the new keys/values appended."""
    rng = np.random.default_rng(5)
    b, h, sq, new, past, d = 2, 2, 3, 4, 5, 8
    skv, short = past + new, past + new - 2
    f = TensorProto.FLOAT
    allowed = rng.random((sq, short)) > 0.3
    allowed[1] = False  # query 1 attends nothing
    if mask_type == "bool":
        mask, mtype = allowed, TensorProto.BOOL
    else:
        mask, mtype = np.where(allowed, rng.standard_normal((sq, short)), -np.inf).astype(np.float32), f
    feeds = {"q": rng.standard_normal((b, h, sq, d)), "k": rng.standard_normal((b, h, new, d)),
             "v": rng.standard_normal((b, h, new, d)), "pk": rng.standard_normal((b, h, past, d)),
             "pv": rng.standard_normal((b, h, past, d))}
    feeds = {n: x.astype(np.float32) for n, x in feeds.items()} | {"m": mask}
    ins = [helper.make_tensor_value_info(n, f, list(x.shape)) for n, x in feeds.items() if n != "m"]
    ins.append(helper.make_tensor_value_info("m", mtype, [sq, short]))
    node = helper.make_node("Attention", ["q", "k", "v", "m", "pk", "pv"], ["y", "present_k", "present_v"])
    g = helper.make_graph([node], "att", ins, [helper.make_tensor_value_info(n, f, None)
                                               for n in ("y", "present_k", "present_v")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)], ir_version=12)
    kk = np.concatenate([feeds["pk"], feeds["k"]], 2).astype(np.float64)
    vv = np.concatenate([feeds["pv"], feeds["v"]], 2).astype(np.float64)
    bias = np.full((sq, skv), -np.inf)
    bias[:, :short] = np.where(allowed, 0, -np.inf) if mask_type == "bool" else mask
    s = feeds["q"].astype(np.float64) @ kk.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
    want = _safe_softmax_rows(s) @ vv
    assert np.all(want[:, :, 1] == 0)
    for target in ("ref", "llvm"):
        kw = {"quantize": False} if target == "ref" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the float mask's -inf: a NonFiniteInputWarning
            y, pk, pv = build(model, target=target, progress=False, **kw).run(feeds)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6, err_msg=target)
        assert np.all(y[:, :, 1] == 0)
        np.testing.assert_array_equal(pk, kk.astype(np.float32))
        np.testing.assert_array_equal(pv, vv.astype(np.float32))


@pytest.mark.parametrize("q_shape,k_shape,attrs,message", [
    ((2, 5, 32), (2, 5, 16), {}, "need the attributes q_num_heads and kv_num_heads"),
    ((2, 5, 24), (2, 5, 16), {"q_num_heads": 3, "kv_num_heads": 2}, "3 query heads must be a multiple of the 2"),
    ((2, 5), (2, 5), {}, "must be 3-D"),
])
def test_bad_attention_is_refused_at_the_input(q_shape, k_shape, attrs, message):
    with pytest.raises(ModelError, match=message):
        build(_attention_model(q_shape, k_shape, **attrs), target="ref", quantize=False, progress=False)


def test_safe_softmax_zeroes_only_dead_rows_and_keeps_nan():
    """SafeSoftmax (the Attention rewrite's softmax) on ref and llvm: a row of only -inf gives zeros, a row with a
    NaN stays NaN, a row with some -inf is an ordinary softmax (float64 reference)."""
    from compiler.backend.build import build_op
    from compiler.schedule import create_schedule
    from compiler.topi import softmax as sm
    from jit_runtime.host_ops.kernels import safe_softmax

    x = np.array([[-np.inf] * 4, [1.0, np.nan, 0.0, 2.0], [0.5, -np.inf, 1.5, -1.0]], np.float32)
    e = np.exp(np.array([0.5, -np.inf, 1.5, -1.0]) - 1.5)
    want = np.array([[0.0] * 4, [np.nan] * 4, e / e.sum()])
    np.testing.assert_allclose(safe_softmax({"axis": -1}, x), want, rtol=1e-6)
    ins, stages = sm.softmax(x.shape, -1, safe=True)
    s = create_schedule(stages[-1])
    sm.schedule_cpu(s, stages)
    got = np.asarray(build_op(s, args=ins + [stages[-1]])(x))
    np.testing.assert_allclose(got, want, rtol=1e-6)
