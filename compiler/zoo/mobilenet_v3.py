"""A MobileNetV3-style classifier (HardSwish, squeeze-excite, inverted residuals) with seeded random weights.

Blocks follow MobileNetV3-Small's table (kernel, expansion, output channels, squeeze-excite,
activation, stride). Squeeze-excite is ``x * HardSigmoid(conv(relu(conv(GlobalAveragePool(x)))))``
(the gate is broadcast by ``Mul``); residual ``Add`` where stride is 1 and channels match.
Opset 14 (``HardSwish``).
"""
from __future__ import annotations

import onnx

from compiler.zoo.builder import OnnxBuilder
from compiler.zoo.mobilenet import PROJECTION_GAMMA, _divisible

# (kernel, expansion channels, output channels, squeeze-excite, activation, stride): MobileNetV3-Small
V3_SMALL = ((3, 16, 16, True, "Relu", 2), (3, 72, 24, False, "Relu", 2), (3, 88, 24, False, "Relu", 1),
            (5, 96, 40, True, "HardSwish", 2), (5, 240, 40, True, "HardSwish", 1), (5, 240, 40, True, "HardSwish", 1),
            (5, 120, 48, True, "HardSwish", 1), (5, 144, 48, True, "HardSwish", 1), (5, 288, 96, True, "HardSwish", 2),
            (5, 576, 96, True, "HardSwish", 1), (5, 576, 96, True, "HardSwish", 1))


def _act(b: OnnxBuilder, y: str, act: str | None) -> str:
    return y if act is None else b.op(act, [y])


def _conv_bn_act(b: OnnxBuilder, x: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
                 act: str | None = "Relu", gamma_scale: float = 1.0) -> str:
    return _act(b, b.bn(b.conv(x, cin, cout, k, stride, groups, bias=False), cout, gamma_scale), act)


def _squeeze_excite(b: OnnxBuilder, x: str, c: int) -> str:
    mid = _divisible(c / 4)
    s = b.op("GlobalAveragePool", [x], "se_pool")
    s = b.op("Relu", [b.conv(s, c, mid, 1)])
    gate = b.op("HardSigmoid", [b.conv(s, mid, c, 1)], "se_gate", alpha=1.0 / 6, beta=0.5)
    return b.op("Mul", [x, gate], "se_scale")


def _bneck(b: OnnxBuilder, x: str, cin: int, k: int, exp: int, cout: int, se: bool, act: str, stride: int) -> str:
    y = _conv_bn_act(b, x, cin, exp, 1, act=act) if exp != cin else x
    y = _conv_bn_act(b, y, exp, exp, k, stride, groups=exp, act=act)
    if se:
        y = _squeeze_excite(b, y, exp)
    y = _conv_bn_act(b, y, exp, cout, 1, act=None, gamma_scale=PROJECTION_GAMMA)
    return b.op("Add", [x, y], "add") if stride == 1 and cin == cout else y


def mobilenet_v3_style(batch: int = 1, image_size: int = 224, num_classes: int = 1000, width: float = 1.0,
                       settings=V3_SMALL, last_channels: int = 576, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV3-Small-style model: input ``input`` (batch, 3, image_size, image_size) float32, output logits."""
    b = OnnxBuilder(seed)
    cin = _divisible(16 * width)
    y = _conv_bn_act(b, "input", 3, cin, 3, 2, act="HardSwish")
    for k, exp, c, se, act, s in settings:
        exp, cout = _divisible(exp * width), _divisible(c * width)
        y = _bneck(b, y, cin, k, exp, cout, se, act, s)
        cin = cout
    last = _divisible(last_channels * width)
    y = _conv_bn_act(b, y, cin, last, 1, act="HardSwish")
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y], "gap")], "flatten")
    return b.model("mobilenet_v3_style", "input", (batch, 3, image_size, image_size), b.gemm(y, last, num_classes),
                   opset=14)


def mobilenet_v3_small(batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """A fast-test variant: width 0.5, 32x32 input, the first five blocks, 10 classes."""
    return mobilenet_v3_style(batch, image_size=32, num_classes=10, width=0.5, settings=V3_SMALL[:5],
                              last_channels=128, seed=seed)
