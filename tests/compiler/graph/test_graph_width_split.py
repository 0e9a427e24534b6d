"""Convs whose row does not fit the scratchpads split along the width at build time (exact)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from compiler import build
from compiler.executor.config import resolve_config
from compiler.graph.evaluate import evaluate_graph
from compiler.graph.ir import Graph, Node
from compiler.graph.width_split import conv_width_chunk, split_wide_convs
from jit_runtime.host_ops.requant import Requant

RNG = np.random.default_rng(0)


def _qconv_graph(c, o, hgt, wid, k, stride, pads, group=1, pad_value=0):
    g = Graph("g")
    g.set_info("x", (1, c, hgt, wid), np.int8)
    g.inputs, g.outputs = ["x"], ["y"]
    g.add_constant("w", RNG.integers(-127, 128, (o, c // group, k, k)).astype(np.int8))
    g.add_constant("b", RNG.integers(-500, 500, o).astype(np.int32))
    oh = (hgt + pads[0] + pads[2] - k) // stride + 1
    ow = (wid + pads[1] + pads[3] - k) // stride + 1
    g.set_info("y", (1, o, oh, ow), np.int8)
    rq = Requant(pre_shift=0, multiplier=RNG.integers(1 << 14, 1 << 15, o), shift=np.full(o, 22), relu=True)
    g.nodes = [Node("QConv2D", ["x", "w", "b"], ["y"], {"strides": [stride, stride], "pads": list(pads),
                                                        "dilations": [1, 1], "group": group, "requant": rq,
                                                        "pad_value": pad_value}, "conv")]
    return g


@pytest.mark.parametrize("c,o,hgt,wid,k,stride,pads,group", [
    (16, 1, 4, 2100, 1, 1, (0, 0, 0, 0), 1),      # the YOLOv8 DFL head conv at 320x320
    (16, 16, 3, 1500, 3, 1, (1, 1, 1, 1), 1),     # a 3x3 conv: halos and border padding per stripe
    (16, 32, 4, 3001, 3, 2, (1, 0, 1, 2), 1),     # strided, asymmetric padding
    (16, 16, 2, 1800, 3, 1, (1, 1, 1, 1), 16),    # depthwise
])
def test_split_is_exact_and_fits(c, o, hgt, wid, k, stride, pads, group):
    cfg = resolve_config("pynq-z1")
    g = _qconv_graph(c, o, hgt, wid, k, stride, pads, group, pad_value=-3)
    x = RNG.integers(-128, 128, (1, c, hgt, wid)).astype(np.int8)
    want = evaluate_graph(g, {"x": x})["y"]
    assert split_wide_convs(g, cfg) == 1
    convs = [n for n in g.nodes if n.op == "QConv2D"]
    assert len(convs) > 1
    for n in convs:  # every stripe fits whole now
        chunk = conv_width_chunk(cfg, g.tensors[n.inputs[0]].shape, g.constants["w"].shape, n.attrs["strides"],
                                 n.attrs["pads"], group, -3, g.constants["b"], n.attrs["requant"])
        assert chunk is None
    np.testing.assert_array_equal(evaluate_graph(g, {"x": x})["y"], want)


def test_convs_that_fit_are_untouched():
    g = _qconv_graph(16, 16, 8, 8, 3, 1, (1, 1, 1, 1))
    assert split_wide_convs(g, resolve_config("pynq-z1")) == 0
    assert [n.op for n in g.nodes] == ["QConv2D"]


def test_wide_head_builds_and_runs_on_pynq_z1_sim():
    """Before: built with MAC fraction 1.0, then failed inside run() with 'no tiling fits'. Now sim == ref."""
    x = RNG.standard_normal((1, 16, 4, 2100)).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Relu", ["c"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 16, 4, 2100])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(RNG.standard_normal((1, 16, 1, 1)).astype(np.float32), "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    outs = {}
    for target in ("ref", "sim"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no host fallback, no overflow warning
            mod = build(m, "pynq-z1", target=target, calibration=x)
        assert mod.compiled.stats["convs_split_by_width"] == 1
        assert mod.compiled.stats["host_macs"] == 0
        outs[target] = mod.run({"x": x})[0]
    np.testing.assert_array_equal(outs["sim"], outs["ref"])
    want = np.maximum(0, np.einsum("oc,nchw->nohw", nh.to_array(m.graph.initializer[0])[:, :, 0, 0], x))
    assert np.corrcoef(outs["sim"].ravel(), want.ravel())[0, 1] > 0.999
