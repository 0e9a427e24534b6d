"""The onnx package's sample CNNs compile and run with the built-in PTQ (fast form: squeezenet at 64x64).

The full-size check of all eight (resnet50, squeezenet, shufflenet, vgg19, alexnet, inception_v1,
densenet121, inception_v2 at 224x224) is ``benchmarks/bench_node_tests.py``.
"""
from __future__ import annotations

import numpy as np
import onnx

from compiler import build
from compiler.quant.qdq_export import export_qdq_model
from tests.compiler.helpers import cosine
from tests.onnx_node.light_models import LIGHT_MODELS, seeded_model


def _ort_basic(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_every_sample_cnn_is_accepted_as_shipped():
    """All eight load, pass the support check and import (ConstantOfShape weights, Sum, LRN, opset 9)."""
    from compiler.frontend.onnx_import import onnx_to_graph
    from tests.onnx_node.light_models import light_model_path

    for name in LIGHT_MODELS:
        g = onnx_to_graph(str(light_model_path(name)))
        assert g.nodes and g.outputs, name


def test_squeezenet_small_input_ptq_matches_onnxruntime_on_the_same_qdq_model():
    model = seeded_model("squeezenet", seed=0)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = 64  # the graph ends in GlobalAveragePool: any size >= 64 works
    softmax = model.graph.node[-1]
    assert softmax.op_type == "Softmax"
    model.graph.output.extend([onnx.helper.make_tensor_value_info(softmax.input[0], onnx.TensorProto.FLOAT, None)])
    rng = np.random.default_rng(1)
    cal = rng.standard_normal((2, 3, 64, 64)).astype(np.float32)
    feeds = {model.graph.input[0].name: rng.standard_normal((1, 3, 64, 64)).astype(np.float32)}
    module = build(model, target="ref", calibration=cal, progress=False)
    assert module.compiled.stats["ops"].get("AccelConv2D") == 26
    ours = module.run(feeds)
    ref = _ort_basic(export_qdq_model(model, cal), feeds)
    assert ours[0].shape == ref[0].shape and ours[0].size == 1000
    assert cosine(ours[1], ref[1]) >= 0.999  # logits
    assert cosine(ours[0], ref[0]) >= 0.999  # probabilities
