"""MobileNetV2 (inverted residuals, ReLU6 as Clip, BatchNorm) as ONNX with seeded random weights."""
from __future__ import annotations

import onnx

from compiler.zoo.builder import OnnxBuilder

# (expansion t, channels c, repeats n, first stride s) from the MobileNetV2 paper
V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def _divisible(v: float, d: int = 8) -> int:
    new = max(d, int(v + d / 2) // d * d)
    return new + d if new < 0.9 * v else new


# Random weights make a deep residual stack chaotic (1-LSB rounding differences grow to a few %
# at the logits, even between onnxruntime's own int8 kernels). Damping the projection BatchNorm, as
# zero/small residual-branch init does, keeps the random model well-conditioned like a trained one.
PROJECTION_GAMMA = 0.3


def _inverted_residual(b: OnnxBuilder, x: str, cin: int, cout: int, stride: int, t: int) -> str:
    hidden = cin * t
    y = b.conv_bn(x, cin, hidden, 1, act="Relu6") if t != 1 else x
    y = b.conv_bn(y, hidden, hidden, 3, stride, groups=hidden, act="Relu6")
    y = b.conv_bn(y, hidden, cout, 1, act=None, gamma_scale=PROJECTION_GAMMA)
    return b.op("Add", [x, y], "add") if stride == 1 and cin == cout else y


def mobilenet_v2(batch: int = 1, image_size: int = 224, num_classes: int = 1000, width: float = 1.0,
                 settings=V2_SETTINGS, last_channels: int = 1280, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2: input ``input`` (batch, 3, image_size, image_size) float32, output logits."""
    b = OnnxBuilder(seed)
    cin = _divisible(32 * width)
    y = b.conv_bn("input", 3, cin, 3, 2, act="Relu6")
    for t, c, n, s in settings:
        cout = _divisible(c * width)
        for i in range(n):
            y = _inverted_residual(b, y, cin, cout, s if i == 0 else 1, t)
            cin = cout
    last = _divisible(last_channels * max(1.0, width))
    y = b.conv_bn(y, cin, last, 1, act="Relu6")
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y], "gap")], "flatten")
    y = b.gemm(y, last, num_classes)
    return b.model("mobilenet_v2", "input", (batch, 3, image_size, image_size), y)


def mobilenet_v2_small(batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """A fast-test MobileNetV2: width 0.25, 32x32 input, the first four stages, 10 classes."""
    return mobilenet_v2(batch, image_size=32, num_classes=10, width=0.25, settings=V2_SETTINGS[:4],
                        last_channels=128, seed=seed)
