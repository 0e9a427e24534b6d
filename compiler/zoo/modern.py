"""Today's model families, built with onnx.helper from their public definitions, seeded weights (no downloads).

* :func:`bert` - BERT-style encoder: token + position embeddings (positions from ``Shape -> Range``), an
  attention mask from ``Equal -> Where``, post-norm layers of multi-head self-attention (``Q K^T``, ``P V``)
  and a GELU (erf) MLP; LayerNorm as the opset-17 op in one place and exporter-decomposed elsewhere.
* :func:`vit` - ViT-style image encoder: patch-embedding conv, class token, position embedding, pre-norm
  layers, a linear head on the class token.
* :func:`yolo` - YOLOv8-style detector: SiLU convs, C2f blocks, SPPF, nearest upsample + Concat, a DFL box
  head (``Softmax`` over 16 bins, a 1x1 conv) with anchor points from ``Shape -> Range -> Expand``.
* :func:`dbnet` - DBNet-style text detector: conv backbone, FPN (upsample + Add), probability head with two
  ``ConvTranspose`` upsamplings and a Sigmoid.
* :func:`recognizer` - CRNN/SVTR-style text recognizer: conv backbone that collapses the height, a transformer
  neck over the width (decomposed LayerNorm), a CTC linear head with Softmax.

``scale`` picks the size (1: the benchmark's; the tests use small ones). All opset 17.
"""
from __future__ import annotations

import numpy as np
import onnx

from compiler.zoo.builder import OnnxBuilder


class _B(OnnxBuilder):
    def f(self, *shape, std: float = 0.02) -> str:
        return self.const((self.rng.standard_normal(shape) * std).astype(np.float32), "p")

    def i64(self, v) -> str:
        return self.const(np.asarray(v, np.int64), "i")

    def f32(self, v) -> str:
        return self.const(np.asarray(v, np.float32), "s")

    def linear(self, x: str, k: int, m: int) -> str:
        w = (self.rng.standard_normal((k, m)) * np.sqrt(1.0 / k)).astype(np.float32)
        return self.op("Add", [self.op("MatMul", [x, self.const(w, "w")]), self.f(m)])

    def layer_norm(self, x: str, c: int, decomposed: bool) -> str:
        g = self.const((1 + 0.1 * self.rng.standard_normal(c)).astype(np.float32), "ln_g")
        b = self.f(c, std=0.05)
        if not decomposed:
            return self.op("LayerNormalization", [x, g, b], "ln", axis=-1, epsilon=1e-5)
        m = self.op("ReduceMean", [x], "ln_mean", axes=[-1])
        d = self.op("Sub", [x, m], "ln_sub")
        v = self.op("ReduceMean", [self.op("Pow", [d, self.f32(2.0)], "ln_pow")], "ln_var", axes=[-1])
        s = self.op("Sqrt", [self.op("Add", [v, self.f32(1e-5)], "ln_eps")], "ln_sqrt")
        return self.op("Add", [self.op("Mul", [self.op("Div", [d, s], "ln_div"), g], "ln_mul"), b], "ln_add")

    def gelu(self, x: str) -> str:
        e = self.op("Erf", [self.op("Div", [x, self.f32(np.sqrt(2.0))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.f32(1.0)])]), self.f32(0.5)], "gelu")

    def silu(self, x: str) -> str:
        return self.op("Mul", [x, self.op("Sigmoid", [x])], "silu")

    def attention(self, x: str, t: int, h: int, heads: int, mask: str | None = None) -> str:
        d = h // heads
        q, k, v = (self.linear(x, h, h) for _ in range(3))
        split = self.i64([1, t, heads, d])
        qh = self.op("Transpose", [self.op("Reshape", [q, split])], perm=[0, 2, 1, 3])
        kh = self.op("Transpose", [self.op("Reshape", [k, split])], perm=[0, 2, 3, 1])
        vh = self.op("Transpose", [self.op("Reshape", [v, split])], perm=[0, 2, 1, 3])
        s = self.op("Mul", [self.op("MatMul", [qh, kh], "scores"), self.f32(1.0 / np.sqrt(d))])
        if mask is not None:
            s = self.op("Add", [s, mask], "masked")
        p = self.op("Softmax", [s], "softmax", axis=-1)
        ctx = self.op("Transpose", [self.op("MatMul", [p, vh], "context")], perm=[0, 2, 1, 3])
        return self.linear(self.op("Reshape", [ctx, self.i64([1, t, h])]), h, h)

    def encoder_layer(self, x: str, t: int, h: int, heads: int, pre_norm: bool, decomposed: bool,
                      mask: str | None = None) -> str:
        if pre_norm:
            a = self.op("Add", [x, self.attention(self.layer_norm(x, h, decomposed), t, h, heads, mask)])
            m = self.linear(self.gelu(self.linear(self.layer_norm(a, h, decomposed), h, 4 * h)), 4 * h, h)
            return self.op("Add", [a, m])
        a = self.layer_norm(self.op("Add", [x, self.attention(x, t, h, heads, mask)]), h, decomposed)
        m = self.linear(self.gelu(self.linear(a, h, 4 * h)), 4 * h, h)
        return self.layer_norm(self.op("Add", [a, m]), h, decomposed)

    def conv_silu(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1) -> str:
        return self.silu(self.conv(x, cin, cout, k, stride))

    def finish(self, name: str, inputs: list[tuple[str, int, tuple[int, ...]]], out: str) -> onnx.ModelProto:
        graph = onnx.helper.make_graph(self.nodes, name, [onnx.helper.make_tensor_value_info(n, t, list(s))
                                                          for n, t, s in inputs], [], self.inits)
        m = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8,
                                   producer_name="vta-stack.zoo.modern")
        inferred = onnx.shape_inference.infer_shapes(m)
        m.graph.output.append(next(v for v in inferred.graph.value_info if v.name == out))
        onnx.checker.check_model(m)
        return m


def bert(tokens: int = 16, hidden: int = 64, heads: int = 4, layers: int = 2, vocab: int = 128,
         seed: int = 0) -> onnx.ModelProto:
    """Input ``input_ids`` int64 (1, tokens); output the last hidden state (1, tokens, hidden)."""
    b = _B(seed)
    emb = b.op("Gather", [b.f(vocab, hidden, std=0.5), "input_ids"], "word_emb", axis=0)
    n = b.op("Gather", [b.op("Shape", ["input_ids"]), b.i64(1)], "seq_len", axis=0)
    pos = b.op("Range", [b.i64(0), n, b.i64(1)], "position_ids")
    x = b.op("Add", [emb, b.op("Gather", [b.f(tokens, hidden, std=0.5), pos], "pos_emb", axis=0)])
    x = b.layer_norm(x, hidden, decomposed=False)
    ids4 = b.op("Unsqueeze", [b.op("Unsqueeze", ["input_ids", b.i64([1])]), b.i64([1])])
    pad = b.op("Equal", [ids4, b.i64(0)], "is_pad")  # padding token 0 is masked out (run-time: from the ids)
    mask = b.op("Where", [pad, b.f32(-1e4), b.f32(0.0)], "mask")
    for i in range(layers):
        x = b.encoder_layer(x, tokens, hidden, heads, pre_norm=False, decomposed=i % 2 == 1, mask=mask)
    return b.finish("bert", [("input_ids", onnx.TensorProto.INT64, (1, tokens))], x)


def vit(image: int = 32, patch: int = 8, hidden: int = 64, heads: int = 4, layers: int = 2, classes: int = 10,
        seed: int = 1) -> onnx.ModelProto:
    """Input ``pixel_values`` (1, 3, image, image); output logits (1, classes)."""
    b = _B(seed)
    n = (image // patch) ** 2
    p = b.op("Conv", ["pixel_values", b.f(hidden, 3, patch, patch, std=0.1), b.f(hidden)], "patch_embed",
             kernel_shape=[patch, patch], strides=[patch, patch])
    t = b.op("Transpose", [b.op("Reshape", [p, b.i64([1, hidden, n])])], perm=[0, 2, 1])
    x = b.op("Add", [b.op("Concat", [b.f(1, 1, hidden, std=0.5), t], axis=1), b.f(1, n + 1, hidden, std=0.1)])
    for _ in range(layers):
        x = b.encoder_layer(x, n + 1, hidden, heads, pre_norm=True, decomposed=False)
    cls = b.op("Gather", [b.layer_norm(x, hidden, decomposed=False), b.i64(0)], "cls", axis=1)
    return b.finish("vit", [("pixel_values", onnx.TensorProto.FLOAT, (1, 3, image, image))], b.gemm(cls, hidden, classes))


def _c2f(b: _B, x: str, c: int, n: int = 1) -> str:
    """YOLOv8's C2f: 1x1 conv, Split in halves, ``n`` residual bottlenecks on the second, Concat of all, 1x1 conv."""
    y = b.conv_silu(x, c, c, 1)
    out0, out1 = b._name("c2f_a"), b._name("c2f_b")
    b.nodes.append(onnx.helper.make_node("Split", [y, b.i64([c // 2, c // 2])], [out0, out1], name=out0, axis=1))
    parts, cur = [out0, out1], out1
    for _ in range(n):
        cur = b.op("Add", [cur, b.conv_silu(b.conv_silu(cur, c // 2, c // 2), c // 2, c // 2)], "bottleneck")
        parts.append(cur)
    return b.conv_silu(b.op("Concat", parts, axis=1), c // 2 * (2 + n), c, 1)


def yolo(image: int = 64, width: int = 16, reg_max: int = 16, classes: int = 4, seed: int = 2) -> onnx.ModelProto:
    """Input ``images`` (1, 3, image, image); output (1, 4 + classes, anchors): boxes (xyxy, pixels) and scores."""
    b = _B(seed)
    c1, c2, c3 = width, 2 * width, 4 * width
    x = b.conv_silu("images", 3, c1, 3, 2)
    p3 = _c2f(b, b.conv_silu(x, c1, c2, 3, 2), c2)                     # stride 4
    p4 = _c2f(b, b.conv_silu(p3, c2, c3, 3, 2), c3)                    # stride 8
    s = b.conv_silu(p4, c3, c3 // 2, 1)                                # SPPF
    m1 = b.op("MaxPool", [s], kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    m2 = b.op("MaxPool", [m1], kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    m3 = b.op("MaxPool", [m2], kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    p4 = b.conv_silu(b.op("Concat", [s, m1, m2, m3], axis=1), 2 * c3, c3, 1)
    up = b.op("Resize", [p4, "", b.f32([1, 1, 2, 2])], "upsample", mode="nearest")
    p3 = _c2f(b, b.conv_silu(b.op("Concat", [up, p3], axis=1), c3 + c2, c2, 1), c2)
    outs = []
    for feat, c, stride in ((p3, c2, 4), (p4, c3, 8)):
        g = image // stride
        a = g * g
        box = b.conv(b.conv_silu(feat, c, c), c, 4 * reg_max, 1)
        cls = b.op("Sigmoid", [b.conv(b.conv_silu(feat, c, c), c, classes, 1)])
        d = b.op("Softmax", [b.op("Transpose", [b.op("Reshape", [box, b.i64([1, 4, reg_max, a])])], perm=[0, 2, 1, 3])],
                 axis=1)  # DFL: a distribution over reg_max bins per side
        proj = np.arange(reg_max, dtype=np.float32).reshape(1, reg_max, 1, 1)
        dist = b.op("Reshape", [b.op("Conv", [d, b.const(proj, "dfl_w")], "dfl"), b.i64([1, 4, a])])
        shp = b.op("Shape", [feat])  # anchor points from the feature map's shape: fold once shapes are known
        wn = b.op("Gather", [shp, b.i64(3)], axis=0)
        hn = b.op("Gather", [shp, b.i64(2)], axis=0)
        xs = b.op("Add", [b.op("Cast", [b.op("Range", [b.i64(0), wn, b.i64(1)])], to=onnx.TensorProto.FLOAT), b.f32(0.5)])
        ys = b.op("Add", [b.op("Cast", [b.op("Range", [b.i64(0), hn, b.i64(1)])], to=onnx.TensorProto.FLOAT), b.f32(0.5)])
        gx = b.op("Expand", [b.op("Unsqueeze", [xs, b.i64([0])]), b.op("Concat", [b.op("Unsqueeze", [hn, b.i64([0])]),
                                                                                  b.op("Unsqueeze", [wn, b.i64([0])])], axis=0)])
        gy = b.op("Expand", [b.op("Unsqueeze", [ys, b.i64([1])]), b.op("Concat", [b.op("Unsqueeze", [hn, b.i64([0])]),
                                                                                  b.op("Unsqueeze", [wn, b.i64([0])])], axis=0)])
        grid = b.op("Concat", [b.op("Unsqueeze", [gx, b.i64([0])]), b.op("Unsqueeze", [gy, b.i64([0])])], axis=0)
        anchors = b.op("Reshape", [grid, b.i64([1, 2, a])])
        lt, rb = b._name("lt"), b._name("rb")
        b.nodes.append(onnx.helper.make_node("Split", [dist, b.i64([2, 2])], [lt, rb], name=lt, axis=1))
        xyxy = b.op("Concat", [b.op("Sub", [anchors, lt]), b.op("Add", [anchors, rb])], axis=1)
        outs.append(b.op("Concat", [b.op("Mul", [xyxy, b.f32(float(stride))]), b.op("Reshape", [cls, b.i64([1, classes, a])])],
                         axis=1))
    return b.finish("yolo", [("images", onnx.TensorProto.FLOAT, (1, 3, image, image))], b.op("Concat", outs, axis=2))


def dbnet(image: int = 64, width: int = 16, seed: int = 3) -> onnx.ModelProto:
    """Input ``images`` (1, 3, image, image); output the text probability map (1, 1, image, image)."""
    b = _B(seed)
    c2 = b.conv_bn(b.conv_bn("images", 3, width, 3, 2), width, width, 3)                # stride 2
    c3 = b.conv_bn(c2, width, 2 * width, 3, 2)                                            # stride 4
    c4 = b.conv_bn(c3, 2 * width, 4 * width, 3, 2)                                        # stride 8
    c5 = b.conv_bn(c4, 4 * width, 8 * width, 3, 2)                                        # stride 16
    f = width
    up = lambda t: b.op("Resize", [t, "", b.f32([1, 1, 2, 2])], "up", mode="nearest")  # noqa: E731
    in5, in4, in3 = b.conv(c5, 8 * width, f, 1), b.conv(c4, 4 * width, f, 1), b.conv(c3, 2 * width, f, 1)
    o4 = b.op("Add", [in4, up(in5)])
    o3 = b.op("Add", [in3, up(o4)])
    p5 = b.op("Resize", [b.conv(in5, f, f // 4, 3), "", b.f32([1, 1, 4, 4])], mode="nearest")
    p4 = up(b.conv(o4, f, f // 4, 3))
    fuse = b.op("Concat", [p5, p4, b.conv(o3, f, f // 4, 3)], axis=1)
    h = b.conv_bn(fuse, 3 * f // 4, f // 4, 3)
    w1 = (b.rng.standard_normal((f // 4, f // 4, 2, 2)) * 0.3).astype(np.float32)
    h = b.op("Relu", [b.bn(b.op("ConvTranspose", [h, b.const(w1, "wt"), b.f(f // 4)], "deconv", strides=[2, 2]), f // 4)])
    w2 = (b.rng.standard_normal((f // 4, 1, 2, 2)) * 0.3).astype(np.float32)
    y = b.op("Sigmoid", [b.op("ConvTranspose", [h, b.const(w2, "wt"), b.f(1)], "deconv", strides=[2, 2])], "prob")
    return b.finish("dbnet", [("images", onnx.TensorProto.FLOAT, (1, 3, image, image))], y)


def recognizer(height: int = 32, width: int = 128, hidden: int = 64, heads: int = 4, classes: int = 37,
               seed: int = 4) -> onnx.ModelProto:
    """Input ``images`` (1, 3, height, width); output per-column class probabilities (1, width / 4, classes)."""
    b = _B(seed)
    x = b.conv_bn("images", 3, 32, 3, 2)                          # h/2, w/2
    x = b.conv_bn(x, 32, 64, 3, 2)                                # h/4, w/4
    x = b.op("MaxPool", [b.conv_bn(x, 64, hidden, 3)], kernel_shape=[2, 1], strides=[2, 1])   # h/8
    x = b.op("MaxPool", [b.conv_bn(x, hidden, hidden, 3)], kernel_shape=[height // 8, 1], strides=[height // 8, 1])
    t = width // 4
    seq = b.op("Transpose", [b.op("Reshape", [x, b.i64([1, hidden, t])])], perm=[0, 2, 1])
    seq = b.encoder_layer(seq, t, hidden, heads, pre_norm=True, decomposed=True)
    logits = b.linear(b.layer_norm(seq, hidden, decomposed=True), hidden, classes)
    return b.finish("recognizer", [("images", onnx.TensorProto.FLOAT, (1, 3, height, width))],
                    b.op("Softmax", [logits], axis=-1))


MODELS = {"bert": bert, "vit": vit, "yolo": yolo, "dbnet": dbnet, "recognizer": recognizer}


def sample_inputs(model: onnx.ModelProto, n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``n`` seeded feeds: token ids in 1..vocab-1 (vocab from the embedding table, at most 100; up to two
    trailing padding zeros), images ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in model.graph.initializer}
    tables = [inits[n.input[0]].dims[0] for n in model.graph.node
              if n.op_type == "Gather" and n.input[0] in inits and n.input[1] in {i.name for i in model.graph.input}]
    vocab = min([100] + [int(v) for v in tables])
    feeds = []
    for _ in range(n):
        feed = {}
        for vi in model.graph.input:
            shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
            if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
                ids = rng.integers(1, vocab, shape).astype(np.int64)
                pad = int(rng.integers(0, 3))
                if pad:
                    ids[..., -pad:] = 0
                feed[vi.name] = ids
            else:
                feed[vi.name] = rng.standard_normal(shape).astype(np.float32)
        feeds.append(feed)
    return feeds
