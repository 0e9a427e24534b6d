"""Model validation at the door: each mutation class gets ModelError (or UnsupportedOperatorError) naming the culprit."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import compiler
from compiler.executor import build
from compiler.frontend import ModelError as FrontendModelError
from compiler.frontend.errors import ModelError, UnsupportedOperatorError
from compiler.frontend.onnx_import import onnx_to_graph
from tests.fuzz.targets import BASE_MODELS, base_model, qdq_model, run_model, second_model


def _node(m: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.name == name)


def _set_attr(node: onnx.NodeProto, name: str, value) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    if value is not None:
        node.attribute.append(helper.make_attribute(name, value))


def _set_init(m: onnx.ModelProto, name: str, value: np.ndarray) -> None:
    t = next(t for t in m.graph.initializer if t.name == name)
    t.CopyFrom(numpy_helper.from_array(value, name))


def _problems(m: onnx.ModelProto) -> str:
    with pytest.raises(ModelError) as ei:
        onnx_to_graph(m)
    assert ei.type is ModelError
    return str(ei.value)


@pytest.mark.parametrize("name", sorted(BASE_MODELS))
def test_valid_models_pass_validation_and_run(name):
    run_model(BASE_MODELS[name]())  # no exception: validation accepts the unmutated models


def test_model_error_is_exported_where_users_import():
    assert compiler.ModelError is ModelError is FrontendModelError
    assert issubclass(ModelError, ValueError)


# ------------------------------------------------------------------------------ attribute
def test_missing_required_attribute_names_node_and_attribute():
    m = base_model()
    _set_attr(_node(m, "pool"), "kernel_shape", None)
    msg = _problems(m)
    assert "pool" in msg and "kernel_shape" in msg


@pytest.mark.parametrize("attr,value,words", [
    ("strides", [0, 1], ["conv", "strides", ">= 1"]),
    ("pads", [1, 1, -1, 1], ["conv", "pads", ">= 0"]),
    ("kernel_shape", [5, 5], ["conv", "kernel_shape", "[3, 3]"]),
    ("group", 3, ["conv"]),
    ("dilations", [1, 1, 1], ["conv", "dilations"]),
])
def test_conv_attribute_out_of_range(attr, value, words):
    m = base_model()
    _set_attr(_node(m, "conv"), attr, value)
    msg = _problems(m)
    for w in words:
        assert w in msg, (w, msg)


def test_pool_pads_and_flatten_axis_rules_name_allowed_values():
    m = base_model()
    # pool dilations are implemented now (support.OP_SPECS); pads as large as the kernel are not (nor in onnxruntime)
    _set_attr(_node(m, "pool"), "pads", [2, 2, 2, 2])
    _set_attr(_node(m, "flat"), "axis", 7)
    with pytest.raises(ModelError) as ei:
        onnx_to_graph(m)
    probs = ei.value.problems
    assert any("'pool'" in p and "pads" in p and "smaller than the kernel [2, 2]" in p for p in probs)
    assert any("'flat'" in p and "axis" in p and "[-4, 4]" in p for p in probs)
    # both problems at once (shape inference adds its own line about the axis)


def test_softmax_axis_out_of_range():
    m = second_model()
    _set_attr(_node(m, "softmax"), "axis", 5)
    msg = _problems(m)
    assert "softmax" in msg and "axis" in msg


# ------------------------------------------------------------------------ input dimension
def test_input_channels_mismatch_names_conv_and_shapes():
    m = base_model()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 3
    msg = _problems(m)
    assert "conv" in msg and "3" in msg


def test_input_too_small_for_the_window_names_node():
    m = base_model()
    for d in (2, 3):
        m.graph.input[0].type.tensor_type.shape.dim[d].dim_value = 1
    _set_attr(_node(m, "conv"), "pads", [0, 0, 0, 0])
    msg = _problems(m)
    assert "conv" in msg


# ---------------------------------------------------------------------------- initializer
def test_wrong_sized_gemm_weight_names_node_and_tensor():
    m = base_model()
    _set_init(m, "fw", np.ones((10, 50), np.float32))
    msg = _problems(m)
    assert "fc" in msg and ("fw" in msg or "72" in msg)


def test_wrong_bias_shape_names_input():
    m = base_model()
    _set_init(m, "b", np.ones(5, np.float32))
    msg = _problems(m)
    assert "'conv'" in msg and "'b'" in msg and "(8,)" in msg


def test_nan_initializer_is_reported():
    m = base_model()
    w = numpy_helper.to_array(m.graph.initializer[0]).copy()
    w[0, 0, 0, 0] = np.nan
    _set_init(m, "w", w)
    msg = _problems(m)
    assert "'w'" in msg and "NaN" in msg


def test_truncated_initializer_bytes_are_reported():
    m = base_model()
    t = m.graph.initializer[0]
    t.raw_data = t.raw_data[:-3]
    msg = _problems(m)
    assert "'w'" in msg and "cannot be read" in msg


def test_qdq_scale_of_wrong_size_names_node():
    m = qdq_model()
    t = next(t for t in m.graph.initializer if t.name == "fw_scale")
    _set_init(m, "fw_scale", np.ones(3, np.float32) * 0.01)
    dq = next(n for n in m.graph.node if t.name in n.input)
    msg = _problems(m)
    assert dq.name in msg and "fw_scale" in msg


def test_reshape_to_a_shape_of_another_size():
    m = second_model()
    const = _node(m, "shape_const")
    _set_attr(const, "value", numpy_helper.from_array(np.array([1, 3], np.int64)))
    msg = _problems(m)
    assert "reshape" in msg and "[1, 3]" in msg


# ----------------------------------------------------------------------------- node input
def test_dangling_input_names_node_and_tensor():
    m = base_model()
    _node(m, "relu").input[0] = "nowhere"
    msg = _problems(m)
    assert "'relu'" in msg and "'nowhere'" in msg


def test_every_dangling_input_is_listed_at_once():
    m = base_model()
    _node(m, "relu").input[0] = "a1"
    _node(m, "fc").input[1] = "a2"
    with pytest.raises(ModelError) as ei:
        onnx_to_graph(m)
    assert len(ei.value.problems) == 2
    assert "'a1'" in ei.value.problems[0] and "'a2'" in ei.value.problems[1]


def test_node_reading_a_later_output_is_rejected():
    m = base_model()
    _node(m, "relu").input[0] = "p"  # the pool's output, produced after relu
    msg = _problems(m)
    assert "'relu'" in msg and "'p'" in msg and "earlier node" in msg


def test_wrong_input_count_names_node():
    m = base_model()
    del _node(m, "pool").input[:]
    msg = _problems(m)
    assert "pool" in msg and "input" in msg


# -------------------------------------------------------------------------------- op type
def test_unknown_op_type_is_unsupported_with_node_name():
    m = base_model()
    _node(m, "relu").op_type = "Hardmax"
    with pytest.raises(UnsupportedOperatorError) as ei:
        onnx_to_graph(m)
    assert ei.value.unsupported == {"Hardmax": ["relu"]}


def test_supported_op_type_with_wrong_arity_names_node():
    m = base_model()
    _node(m, "conv").op_type = "LeakyRelu"
    msg = _problems(m)
    assert "conv" in msg and "LeakyRelu" in msg


def test_unsupported_opset():
    m = base_model()
    m.opset_import[0].version = 99
    msg = _problems(m)
    assert "opset 99" in msg and "allowed" in msg


# ----------------------------------------------------------------------------- file input
def test_build_from_a_file_raises_model_error_and_leaves_the_file_untouched(tmp_path):
    m = base_model()
    _set_attr(_node(m, "conv"), "strides", [0, 0])
    path = tmp_path / "bad.onnx"
    onnx.save(m, str(path))
    before = path.read_bytes()
    with pytest.raises(ModelError, match="strides"):
        build(path, "tiny", calibration=np.zeros((2, 1, 6, 6), np.float32))
    assert path.read_bytes() == before


# ------------------------------------------------------------------------- non-finite inputs
def _relu_model() -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_non_finite_model_input_is_reported_with_a_warning_and_runs():
    from compiler.frontend.errors import NonFiniteInputWarning

    mod = build(_relu_model(), target="ref", quantize=False)
    x = np.array([[np.nan, -np.inf, np.inf, -2.0]], np.float32)
    with pytest.warns(NonFiniteInputWarning, match=r"input 'x' holds 3 NaN/Inf value\(s\) \(first at index \(0, 0\)\)"):
        mod.set_input("x", x)
    np.testing.assert_array_equal(mod.run()[0], np.array([[np.nan, 0.0, np.inf, 0.0]], np.float32))


def test_non_finite_calibration_data_is_refused():
    from compiler.frontend.errors import ModelInputError

    m = base_model()
    cal = np.zeros((2,) + tuple(d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim)[1:], np.float32)
    cal[1, 0, 0, 0] = np.inf
    with pytest.raises(ModelInputError, match="calibration data .* NaN/Inf"):
        build(m, "tiny", target="ref", calibration=cal)


# ------------------------------------------------------- N-D windows and blocked Q/DQ (malformed vs implemented)
def _one_node(node: onnx.NodeProto, x_shape, inits=(), x_type=onnx.TensorProto.FLOAT, y_shape=None) -> onnx.ModelProto:
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", x_type, list(x_shape))],
                          [helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, y_shape)],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_3d_pool_with_dilations_and_indices_is_accepted():
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], name="p3", kernel_shape=[2, 2, 2], dilations=[2, 1, 1],
                            ceil_mode=1, storage_order=1)
    onnx_to_graph(_one_node(node, (1, 2, 6, 5, 4)))  # no error: implemented (support.OP_SPECS)


def test_window_attributes_must_match_the_inputs_spatial_rank():
    node = helper.make_node("AveragePool", ["x"], ["y"], name="p3", kernel_shape=[2, 2, 2], strides=[1, 1])
    msg = _problems(_one_node(node, (1, 2, 6, 5, 4), y_shape=[1, 2, 5, 4, 3]))
    assert "'p3'" in msg and "strides" in msg and "3 values" in msg


def test_blocked_dequantize_scale_shape_is_checked():
    x = np.zeros((2, 8), np.int8)
    good = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dq", axis=1, block_size=4)
    onnx_to_graph(_one_node(good, x.shape, [("s", np.ones((2, 2), np.float32))], onnx.TensorProto.INT8))
    msg = _problems(_one_node(good, x.shape, [("s", np.ones((2, 3), np.float32))], onnx.TensorProto.INT8))
    assert "'dq'" in msg and "(2, 2)" in msg
