"""Rejection of unsupported models and bad user inputs, with actionable messages."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.executor import build
from compiler.frontend.errors import ModelInputError, UnsupportedOperatorError
from compiler.frontend.onnx_import import onnx_to_graph


def _model_with(nodes, inits=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_unsupported_ops_all_listed_with_node_names():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok_relu"),
             helper.make_node("Hardmax", ["a"], ["b"], name="erf_1"),
             helper.make_node("LpNormalization", ["b"], ["c"], name="tanh_1"),
             helper.make_node("Hardmax", ["c"], ["d"], name="erf_2")]
    with pytest.raises(UnsupportedOperatorError) as ei:
        onnx_to_graph(_model_with(nodes))
    err = ei.value
    assert isinstance(err, ValueError)
    assert err.unsupported == {"Hardmax": ["erf_1", "erf_2"], "LpNormalization": ["tanh_1"]}
    msg = str(err)
    for word in ("Hardmax", "LpNormalization", "erf_1", "erf_2", "tanh_1"):
        assert word in msg
    assert "ok_relu" not in msg


def test_resize_unknown_mode_is_rejected_by_value():
    roi = numpy_helper.from_array(np.zeros(0, np.float32), "roi")
    sc = numpy_helper.from_array(np.array([1, 2], np.float32), "sc")
    nodes = [helper.make_node("Resize", ["x", "roi", "sc"], ["y"], name="up", mode="bicubic")]
    with pytest.raises(UnsupportedOperatorError, match=r"Resize\(mode='bicubic'; allowed \['nearest', 'linear', 'cubic'\]\).*up"):
        onnx_to_graph(_model_with(nodes, [roi, sc]))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.onnx"):
        onnx_to_graph(tmp_path / "nope.onnx")


def test_garbage_file(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\x00\xffnot a model")
    with pytest.raises(ValueError, match="bad.onnx"):
        onnx_to_graph(p)


def test_bad_user_inputs_name_shape_dtype():
    m = build(_model_with([helper.make_node("Relu", ["x"], ["y"])]), target="ref", quantize=False)
    with pytest.raises(ModelInputError, match=r"unknown input 'z'.*\['x'\]"):
        m.set_input("z", np.zeros((1, 4), np.float32))
    with pytest.raises(ModelInputError, match=r"shape \(2, 4\).*\(1, 4\)"):
        m.set_input("x", np.zeros((2, 4), np.float32))
    with pytest.raises(ModelInputError, match=r"int32; the model expects float32.*astype"):
        m.set_input("x", np.zeros((1, 4), np.int32))
    with pytest.raises(ModelInputError, match="inputs not set"):
        m.run()
    with pytest.raises(ModelInputError, match=r"float64; the model expects float32"):
        m(x=np.array([[-1, 2, -3, 4]], np.float64))  # nothing is cast silently (as onnxruntime)
    np.testing.assert_array_equal(m(x=np.array([[-1, 2, -3, 4]], np.float32)), [[0, 2, 0, 4]])


def test_input_shapes_unknown_name():
    with pytest.raises(ModelInputError, match="unknown input 'q'"):
        onnx_to_graph(_model_with([helper.make_node("Relu", ["x"], ["y"])]), {"q": (1, 4)})
