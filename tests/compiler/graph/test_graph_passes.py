"""Constant folding, BatchNorm folding, fusion, layout packing and memory planning."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend.onnx_import import onnx_to_graph
from compiler.graph.accel_interface import BlockConfig
from compiler.graph.bn_fold import fold_batchnorm
from compiler.graph.const_fold import fold_constants
from compiler.graph.evaluate import evaluate_graph
from compiler.graph.fusion import fuse_operators
from compiler.graph.ir import Graph, Node
from compiler.graph.layout import count_layout_transforms, pack_layouts
from compiler.graph.memory_plan import check_plan, plan_memory
from jit_runtime.host_ops.requant import Requant
from compiler.zoo.builder import OnnxBuilder

RNG = np.random.default_rng(2)


def test_constant_folding_removes_constant_subgraph():
    a = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "a")
    nodes = [helper.make_node("Transpose", ["a"], ["at"], perm=[1, 0]),
             helper.make_node("Relu", ["at"], ["ar"]),
             helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Reshape", ["ar", "xs"], ["c"]),
             helper.make_node("Add", ["x", "c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], [a])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    expected = x + np.arange(6, dtype=np.float32).reshape(2, 3).T
    g = onnx_to_graph(model)  # the import folds what the input shapes decide (compiler.frontend.shape_fold)
    assert [n.op for n in g.nodes] == ["Add"]
    np.testing.assert_allclose(evaluate_graph(g, {"x": x})["y"], expected)
    g = Graph("ir")  # the IR pass on its own: the same subgraph built directly
    g.set_info("x", (3, 2), np.float32)
    g.inputs, g.outputs = ["x"], ["y"]
    g.add_constant("a", numpy_helper.to_array(a))
    g.nodes = [Node(n.op_type, list(n.input), list(n.output), {"perm": [1, 0]} if n.op_type == "Transpose" else {},
                    n.output[0]) for n in nodes]
    assert fold_constants(g) == 4
    assert [n.op for n in g.nodes] == ["Add"]
    np.testing.assert_allclose(evaluate_graph(g, {"x": x})["y"], expected)


def _conv_bn_model():
    b = OnnxBuilder(3)
    y = b.conv_bn("input", 3, 8, 3, act="Relu")
    y = b.conv_bn(y, 8, 8, 3, stride=2, act=None)
    return b.model("cb", "input", (2, 3, 8, 8), y)


def test_batchnorm_folding_is_numerically_equal():
    g = onnx_to_graph(_conv_bn_model())
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    before = evaluate_graph(g, {"input": x})[g.outputs[0]]
    assert fold_batchnorm(g) == 2
    assert "BatchNormalization" not in g.op_counts()
    after = evaluate_graph(g, {"input": x})[g.outputs[0]]
    np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-5)


def test_fusion_groups_follow_op_patterns():
    g = onnx_to_graph(_conv_bn_model())
    fold_batchnorm(g)
    groups = fuse_operators(g)
    ops = [[next(n.op for n in g.nodes if n.name == m) for m in grp] for grp in groups]
    assert ops == [["Conv", "Relu"], ["Conv"]]


def test_fusion_injective_into_reduction_and_opaque_breaks():
    g = Graph()
    g.inputs, g.outputs = ["x"], ["z"]
    g.set_info("x", (1, 4, 2, 2), np.float32)
    g.nodes = [Node("Transpose", ["x"], ["t"], {"perm": [0, 1, 3, 2]}, "t"), Node("Relu", ["t"], ["r"], {}, "r"),
               Node("GlobalAveragePool", ["r"], ["p"], {}, "p"), Node("Softmax", ["p"], ["s"], {}, "s"),
               Node("Relu", ["s"], ["z"], {}, "z2")]
    assert fuse_operators(g) == [["t", "r", "p"], ["s"], ["z2"]]


def _int_chain_graph(n_convs=3, residual=True):
    """int8 graph: x -> QConv -> QConv -> ... (+ residual Add via DQ/Add/Q) -> output, all 16 channels."""
    g = Graph()
    g.inputs, g.outputs = ["x"], []
    g.set_info("x", (1, 16, 6, 6), np.int8)
    rq = Requant(pre_shift=0, multiplier=1, shift=7)
    cur = "x"
    for i in range(n_convs):
        w = g.add_constant(f"w{i}", RNG.integers(-3, 4, (16, 16, 3, 3)).astype(np.int8))
        out = f"c{i}"
        g.set_info(out, (1, 16, 6, 6), np.int8)
        g.nodes.append(Node("QConv2D", [cur, w, ""], [out], {"requant": rq, "strides": [1, 1], "pads": [1, 1, 1, 1],
                                                            "group": 1, "dilations": [1, 1]}, f"conv{i}"))
        cur = out
    if residual:
        g.nodes.append(Node("Add", ["c0", cur], ["sum"], {}, "add"))
        g.set_info("sum", (1, 16, 6, 6), np.int8)
        cur = "sum"
    g.outputs = [cur]
    return g


def test_layout_packing_inserts_minimal_transforms_and_keeps_results():
    g = _int_chain_graph()
    x = RNG.integers(-20, 20, (1, 16, 6, 6)).astype(np.int8)
    ref = evaluate_graph(g, {"x": x})[g.outputs[0]]
    n = pack_layouts(g, BlockConfig(batch=1, block_in=16, block_out=16))
    # one pack at the input, one unpack at the output; the residual add stays packed
    assert n == 2 == count_layout_transforms(g)
    assert g.op_counts()["AccelConv2D"] == 3
    from compiler.executor.module import Module
    from compiler.executor.pipeline import CompiledGraph
    from compiler.graph.ref_backend import RefAccelBackend
    cfg = BlockConfig(1, 16, 16)
    out = Module(CompiledGraph(g, cfg, [], [], plan_memory(g)), RefAccelBackend(cfg)).run({"x": x})[0]
    np.testing.assert_array_equal(out, ref)


def test_layout_repacks_when_block_sizes_differ():
    g = _int_chain_graph(n_convs=2, residual=False)
    assert pack_layouts(g, BlockConfig(batch=1, block_in=8, block_out=16)) == 3  # pack, repack 16->8, unpack


def test_memory_plan_reuses_buffers_without_overlap():
    g = onnx_to_graph(_conv_bn_model())
    plan = plan_memory(g)
    check_plan(plan)
    sizes = {t: g.tensors[t].nbytes for t in plan.allocations}
    assert plan.no_reuse_bytes >= sum(sizes.values())
    assert plan.peak_bytes < plan.no_reuse_bytes
    # hand check: the 4 intermediates of conv->bn->relu->conv->bn: only 2 need to be alive at once
    assert plan.peak_bytes == 2 * max(-(-s // 64) * 64 for s in sizes.values())
