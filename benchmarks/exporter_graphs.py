"""Small CNNs written the way exporters (torch.onnx, tf2onnx, Caffe2 converters) write them, seeded.

Each builder takes a seed and returns a float ONNX model with one 1x3x32x32 input: shape subgraphs
before Reshape/Flatten, Gemm with transB, Constant nodes, Identity, Clip with min/max inputs, Pad as
an operator, BatchNormalization after Conv, ReduceMean for global pooling, Concat of branches,
AveragePool with count_include_pad, across opsets 11-17. Used by ``benchmarks/sweep_models.py``.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = (1, 3, 32, 32)


class _G:
    def __init__(self, seed: int, opset: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.opset = opset
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def name(self, b: str) -> str:
        self.n += 1
        return f"{b}.{self.n}"

    def init(self, v, b="p") -> str:
        n = self.name(b)
        self.inits.append(numpy_helper.from_array(np.asarray(v), n))
        return n

    def constant(self, v, b="Constant") -> str:
        out = self.name(b)
        self.nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(np.asarray(v))))
        return out

    def op(self, t: str, ins: list[str], nout: int = 1, **a):
        outs = [self.name(t) for _ in range(nout)]
        self.nodes.append(helper.make_node(t, ins, outs, name=outs[0], **a))
        return outs[0] if nout == 1 else outs

    def conv(self, x, cin, cout, k, stride=1, pad=None, groups=1, bias=True):
        fan = cin // groups * k * k
        w = self.init((self.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2 / fan)).astype(np.float32), "weight")
        ins = [x, w] + ([self.init((0.05 * self.rng.standard_normal(cout)).astype(np.float32), "bias")] if bias else [])
        p = k // 2 if pad is None else pad
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[p] * 4, group=groups,
                       dilations=[1, 1])

    def bn(self, x, c):
        r = self.rng
        ps = [1 + 0.1 * r.standard_normal(c), 0.05 * r.standard_normal(c), 0.05 * r.standard_normal(c), 0.5 + r.random(c)]
        return self.op("BatchNormalization", [x] + [self.init(p.astype(np.float32), "bn") for p in ps], epsilon=1e-5,
                       momentum=0.9)

    def clip(self, x, lo=0.0, hi=6.0):
        if self.opset >= 11:
            return self.op("Clip", [x, self.constant(np.float32(lo)), self.constant(np.float32(hi))])
        return self.op("Clip", [x], min=lo, max=hi)

    def flatten_by_shape(self, x):
        """torch's x.view(x.size(0), -1): Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape."""
        s = self.op("Shape", [x])
        b = self.op("Gather", [s, self.constant(np.int64(0))], axis=0)
        if self.opset >= 13:
            u = self.op("Unsqueeze", [b, self.constant(np.array([0], np.int64))])
        else:
            u = self.op("Unsqueeze", [b], axes=[0])
        shp = self.op("Concat", [u, self.constant(np.array([-1], np.int64))], axis=0)
        return self.op("Reshape", [x, shp])

    def reduce_mean_hw(self, x):
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.constant(np.array([2, 3], np.int64))], keepdims=1)
        return self.op("ReduceMean", [x], axes=[2, 3], keepdims=1)

    def gemm(self, x, k, m):
        w = self.init((self.rng.standard_normal((m, k)) * np.sqrt(1 / k)).astype(np.float32), "fc.weight")
        b = self.init((0.05 * self.rng.standard_normal(m)).astype(np.float32), "fc.bias")
        return self.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)

    def model(self, name, x, y, shape=SHAPE):
        g = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info(x, TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 10])], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=8,
                              producer_name="pytorch")
        onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
        onnx.checker.check_model(m)
        return m


def torch_resnet_style(seed: int = 0, opset: int = 13) -> onnx.ModelProto:
    """Conv+BN+Relu stem, MaxPool, a basic residual block with a strided projection, ReduceMean, view, Gemm."""
    g = _G(seed, opset)
    x = "input.1"
    y = g.op("Relu", [g.bn(g.conv(x, 3, 16, 3, bias=False), 16)])
    y = g.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=0)
    z = g.op("Relu", [g.bn(g.conv(y, 16, 32, 3, stride=2, bias=False), 32)])
    z = g.bn(g.conv(z, 32, 32, 3, bias=False), 32)
    s = g.bn(g.conv(y, 16, 32, 1, stride=2, bias=False), 32)
    y = g.op("Relu", [g.op("Add", [z, s])])
    y = g.reduce_mean_hw(y)
    y = g.flatten_by_shape(y)
    return g.model(f"torch_resnet_o{opset}", x, g.gemm(y, 32, 10))


def torch_mobilenet_style(seed: int = 0, opset: int = 13) -> onnx.ModelProto:
    """Clip(0, 6) with Constant min/max inputs, depthwise conv, Identity, GlobalAveragePool + Flatten, Gemm."""
    g = _G(seed, opset)
    x = "input"
    y = g.clip(g.bn(g.conv(x, 3, 16, 3, stride=2, bias=False), 16))
    y = g.clip(g.bn(g.conv(y, 16, 16, 3, groups=16, bias=False), 16))
    y = g.op("Identity", [g.bn(g.conv(y, 16, 24, 1, bias=False), 24)])
    z = g.clip(g.bn(g.conv(y, 24, 48, 1, bias=False), 48))
    z = g.clip(g.bn(g.conv(z, 48, 48, 3, groups=48, bias=False), 48))
    z = g.bn(g.conv(z, 48, 24, 1, bias=False), 24)
    y = g.op("Add", [y, z])
    y = g.op("Flatten", [g.op("GlobalAveragePool", [y])], axis=1)
    return g.model(f"torch_mobilenet_o{opset}", x, g.gemm(y, 24, 10))


def inception_style(seed: int = 0, opset: int = 11) -> onnx.ModelProto:
    """Branches (1x1, Pad-op + 3x3, AveragePool count_include_pad + 1x1) joined by Concat, Reshape with a constant."""
    g = _G(seed, opset)
    x = "data"
    y = g.op("Relu", [g.conv(x, 3, 16, 3)])
    a = g.op("Relu", [g.conv(y, 16, 8, 1)])
    if opset >= 11:
        pads = g.constant(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
        p = g.op("Pad", [y, pads, g.constant(np.float32(0.0))], mode="constant")
    else:
        p = g.op("Pad", [y], pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="constant", value=0.0)
    b = g.op("Relu", [g.conv(p, 16, 16, 3, pad=0)])
    c = g.op("AveragePool", [y], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1)
    c = g.op("Relu", [g.conv(c, 16, 8, 1)])
    y = g.op("Concat", [a, b, c], axis=1)
    y = g.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = g.op("AveragePool", [y], kernel_shape=[16, 16], strides=[16, 16])
    y = g.op("Reshape", [y, g.init(np.array([1, 32], np.int64), "shape")])
    return g.model(f"inception_o{opset}", x, g.gemm(y, 32, 10))


def tf_style(seed: int = 0, opset: int = 13) -> onnx.ModelProto:
    """tf2onnx habits: asymmetric Pad before a stride-2 conv, Relu6 as Clip, Mul/Add for BN left unfused,
    Squeeze of a keepdims ReduceMean, MatMul + Add instead of Gemm."""
    g = _G(seed, opset)
    x = "input_1"
    pads = g.constant(np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64))
    y = g.op("Pad", [x, pads], mode="constant")
    y = g.conv(y, 3, 16, 3, stride=2, pad=0)
    y = g.op("Mul", [y, g.init((1 + 0.1 * g.rng.standard_normal((1, 16, 1, 1))).astype(np.float32), "mul")])
    y = g.op("Add", [y, g.init((0.05 * g.rng.standard_normal((1, 16, 1, 1))).astype(np.float32), "add")])
    y = g.clip(y)
    y = g.clip(g.conv(y, 16, 32, 3, stride=2))
    y = g.reduce_mean_hw(y)
    if opset >= 13:
        y = g.op("Squeeze", [y, g.constant(np.array([2, 3], np.int64))])
    else:
        y = g.op("Squeeze", [y], axes=[2, 3])
    w = g.init((g.rng.standard_normal((32, 10)) * np.sqrt(1 / 32)).astype(np.float32), "matmul")
    y = g.op("Add", [g.op("MatMul", [y, w]), g.init((0.05 * g.rng.standard_normal(10)).astype(np.float32), "b")])
    return g.model(f"tf_o{opset}", x, y)


def keras_style(seed: int = 0, opset: int = 12) -> onnx.ModelProto:
    """keras2onnx/tf2onnx habits: weights as Constant nodes, auto_pad SAME_UPPER with stride 2, Dropout left in,
    a Gemm without transB, Softmax at the end."""
    g = _G(seed, opset)
    x = "input_1"
    w1 = g.constant((g.rng.standard_normal((16, 3, 3, 3)) * np.sqrt(2 / 27)).astype(np.float32), "conv1/kernel")
    b1 = g.constant((0.05 * g.rng.standard_normal(16)).astype(np.float32), "conv1/bias")
    y = g.op("Relu", [g.op("Conv", [x, w1, b1], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")])
    w2 = g.constant((g.rng.standard_normal((32, 16, 3, 3)) * np.sqrt(2 / 144)).astype(np.float32), "conv2/kernel")
    y = g.op("Relu", [g.op("Conv", [y, w2], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")])
    y = g.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2], auto_pad="VALID")
    y = g.op("Dropout", [y])
    y = g.op("Flatten", [y], axis=1)
    wd = g.constant((g.rng.standard_normal((32 * 4 * 4, 10)) * np.sqrt(1 / 512)).astype(np.float32), "dense/kernel")
    y = g.op("Gemm", [y, wd, g.init((0.05 * g.rng.standard_normal(10)).astype(np.float32), "dense/bias")])
    return g.model(f"keras_o{opset}", x, g.op("Softmax", [y], axis=1))


def atrous_grouped_style(seed: int = 0, opset: int = 13) -> onnx.ModelProto:
    """A dilated 3x3 conv (DeepLab-style atrous), a ResNeXt-style grouped conv (4 groups of 8 channels),
    a pre-activation BatchNormalization, GlobalMaxPool (torch's adaptive_max_pool2d(x, 1)), Gemm."""
    g = _G(seed, opset)
    x = "input"
    y = g.op("Relu", [g.bn(g.conv(x, 3, 32, 3, stride=2, bias=False), 32)])
    w = g.init((g.rng.standard_normal((32, 32, 3, 3)) * np.sqrt(2 / 288)).astype(np.float32), "atrous.weight")
    y = g.op("Relu", [g.op("Conv", [y, w], kernel_shape=[3, 3], pads=[2, 2, 2, 2], dilations=[2, 2])])
    z = g.op("Relu", [g.bn(g.conv(y, 32, 32, 3, groups=4, bias=False), 32)])
    y = g.op("Relu", [g.bn(g.op("Add", [y, z]), 32)])  # pre-activation style: BN on a sum
    y = g.conv(y, 32, 32, 1)
    y = g.op("Flatten", [g.op("GlobalMaxPool", [y])], axis=1)
    return g.model(f"atrous_o{opset}", x, g.gemm(y, 32, 10))


EXPORTER_GRAPHS = {
    "torch_resnet_o11": lambda s: torch_resnet_style(s, 11),
    "torch_resnet_o13": lambda s: torch_resnet_style(s, 13),
    "torch_resnet_o17": lambda s: torch_resnet_style(s, 17),
    "torch_mobilenet_o11": lambda s: torch_mobilenet_style(s, 11),
    "torch_mobilenet_o17": lambda s: torch_mobilenet_style(s, 17),
    "inception_o11": lambda s: inception_style(s, 11),
    "inception_o13": lambda s: inception_style(s, 13),
    "tf_o13": lambda s: tf_style(s, 13),
    "tf_o11": lambda s: tf_style(s, 11),
    "keras_o12": lambda s: keras_style(s, 12),
    "keras_o17": lambda s: keras_style(s, 17),
    "atrous_grouped_o13": lambda s: atrous_grouped_style(s, 13),
}
