"""Shapes first: subgraphs that the input shapes decide fold to constants before the operator check."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from compiler import build
from compiler.frontend.errors import ModelInputError, UnsupportedOperatorError
from compiler.frontend.onnx_import import fold_with_input_shapes
from compiler.quant.ort_tools import ort_run

RNG = np.random.default_rng(0)


def _model(nodes, inputs, inits, opset=17):
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)],
        ir_version=max(8, h.find_min_ir_version_for([h.make_opsetid("", opset)])))


def _reshape_by_computed_shape(op_in_chain: str = "Div"):
    """x [N, 8, 4, 6] -> Reshape to (N, 8, 6, 4) with N from Shape -> Gather -> Cast -> op -> Cast -> Concat -> Conv.
    onnx's shape inference cannot propagate the float chain: the Conv's input had no shape (a KeyError before)."""
    chain = ([h.make_node("Div", ["nf", "one"], ["nq"])] if op_in_chain == "Div" else
             [h.make_node(op_in_chain, ["nf"], ["nq"])])
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT), *chain,
             h.make_node("Cast", ["nq"], ["ni"], to=T.INT64), h.make_node("Unsqueeze", ["ni", "ax0"], ["n1"]),
             h.make_node("Concat", ["n1", "tail"], ["shp"], axis=0), h.make_node("Reshape", ["x", "shp"], ["r"]),
             h.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1])]
    inits = {"i0": np.array(0, np.int64), "ax0": np.array([0], np.int64), "one": np.array(1, np.float32),
             "tail": np.array([8, 6, 4], np.int64), "w": RNG.standard_normal((4, 8, 3, 3)).astype(np.float32)}
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 8, 4, 6])], inits)


@pytest.mark.parametrize("op", ["Div", "Round"])  # Round: an operator the compiler does not run, folded away
def test_reshape_target_from_shape_chain_folds(op):
    m = _reshape_by_computed_shape(op)
    x = RNG.standard_normal((2, 8, 4, 6)).astype(np.float32)
    mod = build(m, target="ref", quantize=False, input_shapes={"x": (2, 8, 4, 6)})
    np.testing.assert_allclose(mod.run({"x": x})[0], ort_run(m, {"x": x})[0], rtol=1e-5, atol=1e-5)
    folded = fold_with_input_shapes(m, {"x": (2, 8, 4, 6)})
    assert [n.op_type for n in folded.graph.node] == ["Constant", "Reshape", "Conv"]
    shp = next(n for n in folded.graph.node if n.output[0] == "shp")
    assert nh.to_array(shp.attribute[0].t).tolist() == [2, 8, 6, 4]


def test_anchor_grid_from_input_shape_folds():
    """A YOLO-style grid: Range over the input's width, Expand, Where on an Equal mask, Round - all from the
    shape, so none of it is refused and the result equals onnxruntime's."""
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i3"], ["w"], axis=0),
             h.make_node("Range", ["zero", "w", "one"], ["r"]), h.make_node("Cast", ["r"], ["rf"], to=T.FLOAT),
             h.make_node("Round", ["rf"], ["rr"]), h.make_node("Expand", ["rr", "s"], ["grid"]),
             h.make_node("Equal", ["r", "zero"], ["is0"]), h.make_node("Where", ["is0", "fone", "rr"], ["g2"]),
             h.make_node("Add", ["x", "grid"], ["a"]), h.make_node("Mul", ["a", "g2"], ["y"])]
    inits = {"i3": np.array(3, np.int64), "zero": np.array(0, np.int64), "one": np.array(1, np.int64),
             "fone": np.array(1, np.float32)}
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 3, 5])], inits)
    x = RNG.standard_normal((1, 2, 3, 5)).astype(np.float32)
    mod = build(m, target="ref", quantize=False)
    np.testing.assert_allclose(mod.run({"x": x})[0], ort_run(m, {"x": x})[0], rtol=1e-6)


def test_what_reads_data_is_still_refused():
    """Hardmax (not implemented) on the activation itself cannot fold: it is refused, named, before any other work."""
    nodes = [h.make_node("Hardmax", ["x"], ["y"], name="round_data")]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 4])], {})
    with pytest.raises(UnsupportedOperatorError, match="round_data"):
        build(m, target="ref", quantize=False)


def test_unknowable_shape_is_a_clear_error():
    nodes = [h.make_node("Reshape", ["x", "shp"], ["r"]), h.make_node("Conv", ["r", "w"], ["y"], name="conv")]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 4, 6]),
                       h.make_tensor_value_info("shp", T.INT64, [4])],
               {"w": RNG.standard_normal((4, 8, 3, 3)).astype(np.float32)})
    with pytest.raises(ModelInputError, match=r"shape of tensor 'r' \(input of node 'conv' \(Conv\)\) cannot be known"):
        build(m, target="ref", quantize=False)


def test_fold_keeps_quantized_weights_and_graph_outputs():
    """DequantizeLinear of an int8 weight stays (the QDQ lowering reads it); a folded graph output keeps a
    Constant producer."""
    nodes = [h.make_node("DequantizeLinear", ["wq", "sc"], ["wf"]), h.make_node("MatMul", ["x", "wf"], ["y"]),
             h.make_node("Shape", ["x"], ["xs"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("xs", T.INT64, None)],
                     [nh.from_array(np.ones((3, 2), np.int8), "wq"), nh.from_array(np.array(0.5, np.float32), "sc")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    folded = fold_with_input_shapes(m)
    assert [n.op_type for n in folded.graph.node] == ["DequantizeLinear", "MatMul", "Constant"]
    mod = build(m, target="ref", quantize=False)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    y, xs = mod.run({"x": x})
    np.testing.assert_allclose(y, x @ np.full((3, 2), 0.5, np.float32), rtol=1e-6)
    assert xs.tolist() == [2, 3]
