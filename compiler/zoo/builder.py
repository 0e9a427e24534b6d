"""A tiny onnx.helper wrapper for building CNNs with seeded random weights."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8  # onnxruntime 1.31 accepts IR <= 13; 8 is what opset 13 needs


class OnnxBuilder:
    """Accumulates nodes/initializers; every op method returns its output tensor name."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def _name(self, base: str) -> str:
        self._n += 1
        return f"{base}_{self._n}"

    def const(self, value: np.ndarray, base: str = "c") -> str:
        name = self._name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], base: str | None = None, **attrs) -> str:
        out = self._name(base or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, bias: bool = True) -> str:
        fan_in = cin // groups * k * k
        w = (self.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        ins = [x, self.const(w, "w")] + ([self.const((self.rng.standard_normal(cout) * 0.05).astype(np.float32), "b")] if bias else [])
        p = k // 2
        return self.op("Conv", ins, "conv", kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p], group=groups)

    def bn(self, x: str, c: int, gamma_scale: float = 1.0) -> str:
        """BatchNormalization with random statistics; ``gamma_scale`` damps the output (residual branches)."""
        r = self.rng
        params = [(1.0 + 0.1 * r.standard_normal(c)) * gamma_scale, 0.05 * r.standard_normal(c), 0.05 * r.standard_normal(c),
                  0.5 + r.random(c)]
        return self.op("BatchNormalization", [x] + [self.const(p.astype(np.float32), n) for p, n in zip(params, ("g", "beta", "mean", "var"))],
                       "bn", epsilon=1e-5)

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: str | None = "Relu",
                gamma_scale: float = 1.0) -> str:
        y = self.bn(self.conv(x, cin, cout, k, stride, groups, bias=False), cout, gamma_scale)
        if act == "Relu":
            return self.op("Relu", [y])
        if act == "Relu6":
            return self.op("Clip", [y, self.const(np.float32(0.0), "lo"), self.const(np.float32(6.0), "hi")], "relu6")
        return y

    def gemm(self, x: str, k: int, m: int) -> str:
        w = (self.rng.standard_normal((m, k)) * np.sqrt(1.0 / k)).astype(np.float32)
        b = (self.rng.standard_normal(m) * 0.05).astype(np.float32)
        return self.op("Gemm", [x, self.const(w, "fc_w"), self.const(b, "fc_b")], "fc", transB=1)

    def model(self, name: str, inp: str, shape: tuple[int, ...], out: str, opset: int = 13) -> onnx.ModelProto:
        """Finish the model: one float input ``inp`` of ``shape``, one output ``out`` (shape inferred)."""
        graph = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info(inp, TensorProto.FLOAT, list(shape))],
                                  [], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION,
                              producer_name="vta-stack.zoo")
        inferred = onnx.shape_inference.infer_shapes(m)
        vi = next(v for v in inferred.graph.value_info if v.name == out)
        m.graph.output.append(vi)
        onnx.checker.check_model(m)
        return m
