"""ResNet-18 (BasicBlock, BatchNorm) as ONNX with seeded random weights."""
from __future__ import annotations

import onnx

from compiler.zoo.builder import OnnxBuilder


def _basic_block(b: OnnxBuilder, x: str, cin: int, cout: int, stride: int) -> str:
    y = b.conv_bn(x, cin, cout, 3, stride)
    y = b.conv_bn(y, cout, cout, 3, 1, act=None)
    skip = b.conv_bn(x, cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else x
    return b.op("Relu", [b.op("Add", [y, skip], "add")])


def resnet18(batch: int = 1, image_size: int = 224, num_classes: int = 1000, base_width: int = 64,
             seed: int = 0) -> onnx.ModelProto:
    """ResNet-18: input ``input`` (batch, 3, image_size, image_size) float32, output logits."""
    b = OnnxBuilder(seed)
    y = b.conv_bn("input", 3, base_width, 7, 2)
    y = b.op("MaxPool", [y], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = base_width
    for stage in range(4):
        cout = base_width * 2 ** stage
        for blk in range(2):
            y = _basic_block(b, y, cin, cout, 2 if stage > 0 and blk == 0 else 1)
            cin = cout
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y], "gap")], "flatten")
    y = b.gemm(y, cin, num_classes)
    return b.model("resnet18", "input", (batch, 3, image_size, image_size), y)


def resnet18_small(batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """A fast-test ResNet-18: same topology, 16 base channels, 32x32 input, 10 classes."""
    return resnet18(batch, image_size=32, num_classes=10, base_width=16, seed=seed)
