"""Import-time rewrites: QLinearConv/QLinearMatMul -> DQ/op/Q, auto_pad -> explicit pads, ReduceMean -> pooling,
Instance/GroupNormalization -> LayerNormalization."""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node


def expand_qlinear(g: Graph, n: Node) -> list[Node]:
    """Rewrite a QLinear op as DequantizeLinear -> float op -> QuantizeLinear (the QDQ form)."""
    ins = list(n.inputs) + [""] * (9 - len(n.inputs))
    x, xs, xz, w, ws, wz, ys, yz = ins[:8]
    xf, wf, yf = g.fresh_name(f"{n.name}/x"), g.fresh_name(f"{n.name}/w"), g.fresh_name(f"{n.name}/y")
    w_axis = 0 if n.op == "QLinearConv" else 1
    for src, dst in ((x, xf), (w, wf), (n.outputs[0], yf)):
        if src in g.tensors:
            g.set_info(dst, g.tensors[src].shape, np.float32)
    nodes = [Node("DequantizeLinear", [x, xs, xz], [xf], {}, f"{n.name}/dq_x"),
             Node("DequantizeLinear", [w, ws, wz], [wf], {"axis": w_axis}, f"{n.name}/dq_w")]
    if n.op == "QLinearConv":
        conv_in = [xf, wf]
        if ins[8]:
            bs = g.fresh_name(f"{n.name}/bias_scale")
            g.add_constant(bs, (np.asarray(g.constants[xs], np.float32) * np.asarray(g.constants[ws], np.float32)).reshape(-1))
            bf = g.fresh_name(f"{n.name}/b")
            nodes.append(Node("DequantizeLinear", [ins[8], bs], [bf], {"axis": 0}, f"{n.name}/dq_b"))
            conv_in.append(bf)
        nodes.append(Node("Conv", conv_in, [yf], dict(n.attrs), n.name))
    else:
        nodes.append(Node("MatMul", [xf, wf], [yf], {}, n.name))
    nodes.append(Node("QuantizeLinear", [yf, ys, yz], n.outputs, {}, f"{n.name}/q_y"))
    return nodes


def _same_pads(in_size: int, k: int, s: int, d: int, upper: bool) -> tuple[int, int]:
    out = -(-in_size // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - in_size)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def explicit_pads(g: Graph, n: Node) -> None:
    """Normalize Conv/pool attrs: kernel_shape, strides, dilations and 4-value pads (t, l, b, r)."""
    x_shape = g.tensors[n.inputs[0]].shape
    if n.op in ("Conv", "ConvInteger"):
        n.attrs.setdefault("kernel_shape", list(g.tensors[n.inputs[1]].shape[2:]))
    k = list(n.attrs["kernel_shape"])
    s = list(n.attrs.get("strides", [1] * len(k)))
    d = list(n.attrs.get("dilations", [1] * len(k)))
    auto = n.attrs.pop("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pp = [_same_pads(x_shape[2 + i], k[i], s[i], d[i], auto == "SAME_UPPER") for i in range(len(k))]
        pads = [p[0] for p in pp] + [p[1] for p in pp]
    elif auto == "VALID":
        pads = [0] * (2 * len(k))
    else:
        pads = list(n.attrs.get("pads", [0] * (2 * len(k))))
    n.attrs.update(kernel_shape=k, strides=s, pads=pads)
    if n.op != "AveragePool" or "dilations" in n.attrs:  # AveragePool has dilations only from opset 19
        n.attrs["dilations"] = d


def _per_column(shape: tuple[int, ...], n_out: int) -> bool:
    return len(shape) <= 2 and int(np.prod(shape, dtype=np.int64)) in (1, n_out) and (len(shape) < 2 or shape[0] == 1)


def split_gemm_bias(g: Graph, n: Node) -> list[Node]:
    """``Gemm(A, B, C)`` with a C that is not one value per output column (an (M, N) or (M, 1) matrix)
    becomes ``Gemm(A, B) -> Add(beta * C)``, so the matrix product can still be quantized and
    offloaded; other Gemms (and those whose shapes are unknown) are returned unchanged."""
    if len(n.inputs) < 3 or not n.inputs[2]:
        return [n]
    c, y = n.inputs[2], n.outputs[0]
    y_info, c_info = g.tensors.get(y), g.tensors.get(c)
    if y_info is None or c_info is None or _per_column(c_info.shape, y_info.shape[-1]):
        return [n]
    beta = float(n.attrs.pop("beta", 1.0))
    prod = g.fresh_name(f"{n.name}/ab")
    if y_info is not None:
        g.set_info(prod, y_info.shape, y_info.dtype)
    nodes = [Node("Gemm", n.inputs[:2], [prod], dict(n.attrs), n.name)]
    if beta != 1.0:
        scaled = g.fresh_name(f"{n.name}/beta_c")
        if c in g.tensors:
            g.set_info(scaled, g.tensors[c].shape, g.tensors[c].dtype)
        nodes.append(Node("Mul", [c, g.add_constant(g.fresh_name(f"{n.name}/beta"), np.float32(beta))], [scaled], {},
                          f"{n.name}/beta"))
        c = scaled
    nodes.append(Node("Add", [prod, c], [y], {}, f"{n.name}/bias"))
    return nodes


def _namers(g: Graph, n: Node, dtype=np.float32):
    """``(tmp, const)`` for a rewrite of node ``n``: a fresh tensor name of ``dtype`` with its shape recorded, and a
    fresh constant holding a value, both named after ``n``."""
    def tmp(base: str, shp) -> str:
        name = g.fresh_name(f"{n.name}/{base}")
        g.set_info(name, shp, dtype)
        return name

    def const(base: str, v) -> str:
        return g.add_constant(g.fresh_name(f"{n.name}/{base}"), np.asarray(v))
    return tmp, const


def _builder(g: Graph, n: Node, dtype=np.float32):
    """``(nodes, add, const)`` for a rewrite of ``n`` into several nodes: ``add(op, inputs, shape, tag, out=None,
    name=None, **attrs)`` appends a node (named ``name``, default ``n``'s name/``tag``) writing a fresh tensor of
    ``dtype`` (or ``out``) and returns its name; ``const`` as in :func:`_namers`."""
    nodes: list[Node] = []
    tmp, const = _namers(g, n, dtype)

    def add(op: str, inputs: list[str], shp, tag: str, out: str | None = None, name: str | None = None,
            **attrs) -> str:
        out = out or tmp(tag, shp)
        nodes.append(Node(op, inputs, [out], attrs, name or f"{n.name}/{tag}"))
        return out
    return nodes, add, const


def reduce_mean_axes(g: Graph, n: Node) -> list[int] | None:
    """The sorted, non-negative axes a ``ReduceMean`` averages over (attribute before opset 18, input from 18);
    None when the axes input is not a constant."""
    rank = len(g.tensors[n.inputs[0]].shape)
    if "axes" in n.attrs:
        axes = list(n.attrs["axes"])
    elif len(n.inputs) > 1 and n.inputs[1]:
        if n.inputs[1] not in g.constants:
            return None
        axes = [int(a) for a in np.ravel(g.constants[n.inputs[1]])]
    else:
        axes = []
    if not axes:
        return [] if n.attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    return sorted({int(a) % rank for a in axes})


def expand_reduce_mean(g: Graph, n: Node) -> list[Node]:
    """``ReduceMean`` as ops the compiler lowers: a mean over all spatial axes (what exporters write for
    global pooling) becomes ``GlobalAveragePool`` (+ ``Reshape`` when ``keepdims=0``), so it quantizes and
    offloads like one; other axes become ``Transpose -> Reshape (1, kept, reduced) -> GlobalAveragePool ->
    Reshape``. Axes given as a run-time input (or an input of unknown shape) keep the ``ReduceMean`` node,
    a host kernel."""
    x, y = n.inputs[0], n.outputs[0]
    if x not in g.tensors or any(d is None for d in g.tensors[x].shape) or g.tensors[x].dtype.kind != "f":
        return [n]  # unknown shapes and integer means stay one ReduceMean (a host kernel)
    shape = tuple(g.tensors[x].shape)
    rank = len(shape)
    axes = reduce_mean_axes(g, n)
    if axes is None:
        return [n]
    if not axes:
        return [Node("Identity", [x], [y], {}, n.name)]
    keepdims = int(n.attrs.get("keepdims", 1))
    kept = [a for a in range(rank) if a not in axes]
    out_shape = [1 if a in axes else shape[a] for a in range(rank)] if keepdims else [shape[a] for a in kept]
    nodes, add, const = _builder(g, n, g.tensors[x].dtype)

    def reshape(src: str, shp, tag: str, out: str | None = None) -> str:
        return add("Reshape", [src, const(f"{tag}_shape", np.asarray(shp, np.int64))], tuple(shp), tag, out=out)

    if rank >= 3 and axes == list(range(2, rank)):
        pooled = add("GlobalAveragePool", [x], shape[:2] + (1,) * (rank - 2), "pool", out=y if keepdims else None,
                     name=n.name)
        if not keepdims:
            reshape(pooled, out_shape, "squeeze", out=y)
        return nodes
    perm = kept + axes
    src = x
    if perm != list(range(rank)):
        src = add("Transpose", [x], tuple(shape[a] for a in perm), "transpose", perm=perm)
    n_kept = int(np.prod([shape[a] for a in kept], dtype=np.int64))
    n_red = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    rows = reshape(src, (1, n_kept, n_red), "rows")
    pooled = add("GlobalAveragePool", [rows], (1, n_kept, 1), "pool", name=n.name)
    reshape(pooled, out_shape, "out", out=y)
    return nodes


def expand_sum(g: Graph, n: Node) -> list[Node]:
    """``Sum`` of one input is ``Identity`` and of two is ``Add``, so a quantized residual
    ``DQ, DQ -> Sum (-> Relu) -> Q`` (as Caffe2-era exports write it) lowers and offloads like ``Add``;
    three or more inputs stay one ``Sum`` (a host kernel)."""
    ins = [i for i in n.inputs if i]
    if len(ins) == 1:
        return [Node("Identity", ins, n.outputs, {}, n.name)]
    if len(ins) == 2:
        return [Node("Add", ins, n.outputs, {}, n.name)]
    return [n]


def global_max_as_window(g: Graph, n: Node) -> Node:
    """``GlobalMaxPool`` (torch's ``adaptive_max_pool2d(x, 1)``) as a ``MaxPool`` whose window is the whole
    (static) spatial extent: it then runs on int8 data like any max pool."""
    spatial = [int(d) for d in g.tensors[n.inputs[0]].shape[2:]]
    return Node("MaxPool", list(n.inputs), list(n.outputs),
                {"kernel_shape": spatial, "strides": [1] * len(spatial), "pads": [0] * (2 * len(spatial))}, n.name)


def expand_group_norm(g: Graph, n: Node) -> list[Node]:
    """InstanceNormalization / GroupNormalization with a static input and constant scale and bias as ops the
    targets have: ``Reshape (N * groups, rest) -> LayerNormalization (axis 1, unit scale) -> Reshape -> Mul
    (scale per channel) -> Add (bias per channel)`` (a style-transfer or diffusion network then runs on the layer-norm
    kernel). Anything else stays one node (a host kernel)."""
    x, y = n.inputs[0], n.outputs[0]
    info = g.tensors.get(x)
    if (info is None or any(d is None for d in info.shape) or len(info.shape) < 3 or info.dtype != np.float32
            or any(i not in g.constants for i in n.inputs[1:3]) or len(n.inputs) < 3):
        return [n]
    shape = tuple(info.shape)
    c = shape[1]
    groups = int(n.attrs.get("num_groups", c))
    rows, cols = shape[0] * groups, int(np.prod(shape, dtype=np.int64)) // (shape[0] * groups)
    per = [np.asarray(g.constants[i], np.float32).reshape(-1) for i in n.inputs[1:3]]
    chan = (c,) + (1,) * (len(shape) - 2)

    tmp, const = _namers(g, n)
    flat, normed = tmp("rows", (rows, cols)), tmp("ln", (rows, cols))
    back, scaled = tmp("back", shape), tmp("scaled", shape)
    unit = [const("one", np.ones(cols, np.float32)), const("zero", np.zeros(cols, np.float32))]
    return [Node("Reshape", [x, const("rows_shape", np.array([rows, cols], np.int64))], [flat], {}, f"{n.name}/rows"),
            Node("LayerNormalization", [flat] + unit, [normed], {"axis": 1, "epsilon": float(n.attrs.get("epsilon", 1e-5))},
                 n.name),
            Node("Reshape", [normed, const("shape", np.array(shape, np.int64))], [back], {}, f"{n.name}/back"),
            Node("Mul", [back, const("scale", per[0].reshape(chan))], [scaled], {}, f"{n.name}/scale"),
            Node("Add", [scaled, const("bias", per[1].reshape(chan))], [y], {}, f"{n.name}/bias")]


def _nonpad_allowed(g: Graph, a: dict, add, const, nonpad: str, b: int, sq: int, skv: int, past: int) -> str:
    """The (b, 1, sq, skv) bool tensor of the keys each query may attend given ``nonpad_kv_seqlen`` (int64, one
    length a batch), computed at run time as index glue: key < length, and without a cache the causal and window
    limits around the query's position ``i + length - sq`` (ONNX's offset; with a cache they are constants)."""
    i64 = np.int64
    length = add("Reshape", [nonpad, const("np_shape", np.array([b, 1, 1, 1], i64))], (b, 1, 1, 1), "np_len")
    g.set_info(length, (b, 1, 1, 1), i64)
    keys = const("np_keys", np.arange(skv, dtype=i64).reshape(1, 1, 1, skv))

    def bool_op(op: str, x: str, y: str, tag: str, shp=(b, 1, sq, skv)) -> str:
        out = add(op, [x, y], shp, tag)
        g.set_info(out, shp, np.bool_)
        return out
    ok = bool_op("Less", keys, length, "np_in", (b, 1, 1, skv))
    left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    if past == 0 and (int(a.get("is_causal", 0)) or left >= 0 or right >= 0):
        # key - position = (key - i + sq) - length
        rel = const("np_rel", (np.arange(skv, dtype=i64)[None, :] - np.arange(sq, dtype=i64)[:, None] + sq)
                    .reshape(1, 1, sq, skv))
        diff = add("Sub", [rel, length], (b, 1, sq, skv), "np_diff")
        g.set_info(diff, (b, 1, sq, skv), i64)
        if int(a.get("is_causal", 0)) or right >= 0:  # causal: diff <= 0 (tighter than any right window)
            hi = 0 if int(a.get("is_causal", 0)) else right
            ok = bool_op("And", ok, bool_op("LessOrEqual", diff, const("np_hi", np.array(hi, i64)), "np_before"),
                         "np_ok_hi")
        if left >= 0:
            ok = bool_op("And", ok, bool_op("GreaterOrEqual", diff, const("np_lo", np.array(-left, i64)), "np_after"),
                         "np_ok_lo")
    return ok


def expand_attention(g: Graph, n: Node) -> list[Node]:
    """A float32 Attention whose shapes are static and whose softmax is float32, as ops every target has:
    ``[Reshape -> Transpose] (3-D) -> [Concat(past, new)] (KV cache: the present outputs) -> [Expand] (grouped
    heads) -> MatMul(Q, K^T) -> Mul(scale) -> [Div -> Tanh -> Mul] (softcap) -> [Add(float mask) | Where(bool
    mask, ., -inf)] -> [Where(padding lengths' mask, ., -inf)] -> [Add(causal/window -inf bias)] -> SafeSoftmax ->
    MatMul(V) -> [Transpose -> Reshape]`` (and the mode's QK tensor as its output), so llvm runs it on its GEMM and
    softmax kernels; SafeSoftmax gives a row with no key to attend zeros, as ONNX's Attention does (a plain softmax
    gives NaN). Anything else stays one node (the host kernel)."""
    from jit_runtime.host_ops.attention_kernels import allowed_keys

    a = n.attrs
    ins = list(n.inputs) + [""] * (7 - len(n.inputs))
    q, k, v, mask = ins[:4]
    infos = [g.tensors.get(t) for t in (q, k, v)]
    past_k, past_v, nonpad = ins[4:7]
    outs = list(n.outputs) + [""] * (4 - len(n.outputs))
    if past_k or past_v:
        infos += [g.tensors.get(past_k), g.tensors.get(past_v)]
    np_info = g.tensors.get(nonpad) if nonpad else None
    if (nonpad and (np_info is None or np_info.dtype != np.int64 or np_info.shape != (infos[0].shape[0],))
            or bool(past_k) != bool(past_v) or int(a.get("softmax_precision", 1)) != 1
            or int(a.get("qk_matmul_output_mode", 0)) not in (0, 1, 2, 3)
            or any(i is None or i.dtype != np.float32 for i in infos)
            or any(d is None for i in infos for d in i.shape)):
        return [n]
    m_info = g.tensors.get(mask) if mask else None  # (constants have their info too: Graph.add_constant)
    if mask and (m_info is None or m_info.dtype not in (np.float32, np.bool_)):
        return [n]
    three_d = len(infos[0].shape) == 3
    if three_d:
        hq, hkv = int(a["q_num_heads"]), int(a["kv_num_heads"])
        b, sq, _ = infos[0].shape
        skv = infos[1].shape[1]
        d, dv = infos[0].shape[2] // hq, infos[2].shape[2] // hkv
    else:
        b, hq, sq, d = infos[0].shape
        hkv, skv, dv = infos[1].shape[1], infos[1].shape[2], infos[2].shape[3]
    new_kv, past = skv, (infos[3].shape[2] if past_k else 0)
    skv = past + new_kv  # keys attended: the cache's, then the new ones
    if mask and (len(m_info.shape) < 1 or m_info.shape[-1] > skv):
        return [n]
    nodes, add, const = _builder(g, n)

    def heads(t: str, h: int, s: int, size: int, tag: str) -> str:
        r = add("Reshape", [t, const(f"{tag}_shape", np.array([b, s, h, size], np.int64))], (b, s, h, size), f"{tag}_split")
        return add("Transpose", [r], (b, h, s, size), f"{tag}_heads", perm=[0, 2, 1, 3])

    def grouped(t: str, size: int, tag: str) -> str:  # (b, hkv, s, size) -> (b, hq, s, size), each kv head repeated
        if hq == hkv:
            return t
        rep = hq // hkv
        r = add("Reshape", [t, const(f"{tag}_g", np.array([b, hkv, 1, skv, size], np.int64))], (b, hkv, 1, skv, size),
                f"{tag}_g")
        e = add("Expand", [r, const(f"{tag}_rep", np.array([b, hkv, rep, skv, size], np.int64))],
                (b, hkv, rep, skv, size), f"{tag}_rep")
        return add("Reshape", [e, const(f"{tag}_all", np.array([b, hq, skv, size], np.int64))], (b, hq, skv, size),
                   f"{tag}_all")

    q4, k4, v4 = (heads(q, hq, sq, d, "q"), heads(k, hkv, new_kv, d, "k"), heads(v, hkv, new_kv, dv, "v")) \
        if three_d else (q, k, v)
    def present(cache: str, t: str, size: int, tag: str, out: str) -> str:
        """The keys/values attended: the cache with the new ones appended (the present output, when read)."""
        if cache:
            return add("Concat", [cache, t], (b, hkv, skv, size), f"present_{tag}", out=out or None, axis=2)
        if out:
            add("Identity", [t], (b, hkv, skv, size), f"present_{tag}", out=out)
        return t
    k4, v4 = present(past_k, k4, d, "key", outs[1]), present(past_v, v4, dv, "value", outs[2])
    k4, v4 = grouped(k4, d, "k"), grouped(v4, dv, "v")
    kt = add("Transpose", [k4], (b, hq, d, skv), "kt", perm=[0, 1, 3, 2])
    s = add("MatMul", [q4, kt], (b, hq, sq, skv), "qk")
    scale = a.get("scale")
    s = add("Mul", [s, const("scale", np.float32(1.0 / np.sqrt(d) if scale is None else scale))], (b, hq, sq, skv),
            "scaled")
    stage = [s]  # the QK output modes: 0 scaled, 1 soft-capped, 2 masked, 3 probabilities
    cap = float(a.get("softcap", 0.0))
    if cap > 0:  # cap * tanh(s / cap), before the masks (so -inf stays -inf)
        s = add("Div", [s, const("cap", np.float32(cap))], (b, hq, sq, skv), "capped_in")
        s = add("Tanh", [s], (b, hq, sq, skv), "capped_tanh")
        s = add("Mul", [s, const("cap_out", np.float32(cap))], (b, hq, sq, skv), "capped")
    stage.append(s)
    if mask and m_info.shape[-1] < skv:  # a mask shorter than the keys: the rest masked (-inf, or False)
        rank, fill = len(m_info.shape), np.asarray(-np.inf if m_info.dtype == np.float32 else False, m_info.dtype)
        padded = m_info.shape[:-1] + (skv,)
        pads = np.array([0] * (2 * rank - 1) + [skv - m_info.shape[-1]], np.int64)
        mask = add("Pad", [mask, const("mask_pads", pads), const("mask_fill", fill)], padded, "mask_padded")
        g.set_info(mask, padded, m_info.dtype)
    if mask and m_info.dtype == np.bool_:
        s = add("Where", [mask, s, const("neg_inf", np.float32(-np.inf))], (b, hq, sq, skv), "masked")
    elif mask:
        s = add("Add", [s, mask], (b, hq, sq, skv), "masked")
    if nonpad:  # keys past each batch's length masked; without a cache, its queries end at that length
        s = add("Where", [_nonpad_allowed(g, a, add, const, nonpad, b, sq, skv, past), s,
                          const("neg_inf_np", np.float32(-np.inf))], (b, hq, sq, skv), "nonpad_masked")
    ok = allowed_keys(a, 1, sq, skv, past, None)[0, 0]  # causal and window limits: constants (static cache length)
    if not ok.all() and not (nonpad and past == 0):  # (with padding lengths and no cache: in the mask above)
        s = add("Add", [s, const("limits", np.where(ok, np.float32(0), np.float32(-np.inf)))], (b, hq, sq, skv),
                "limits")
    stage.append(s)
    p = add("SafeSoftmax", [s], (b, hq, sq, skv), "softmax", axis=-1)
    stage.append(p)
    if outs[3]:
        add("Identity", [stage[int(a.get("qk_matmul_output_mode", 0))]], (b, hq, sq, skv), "qk_out", out=outs[3])
    if not three_d:
        add("MatMul", [p, v4], (b, hq, sq, dv), "pv", out=n.outputs[0])
        return nodes
    y4 = add("MatMul", [p, v4], (b, hq, sq, dv), "pv")
    yt = add("Transpose", [y4], (b, sq, hq, dv), "y_t", perm=[0, 2, 1, 3])
    add("Reshape", [yt, const("y_shape", np.array([b, sq, hq * dv], np.int64))], (b, sq, hq * dv), "y",
        out=n.outputs[0])
    return nodes


def expand_rotary(g: Graph, n: Node) -> list[Node]:
    """A float32 RotaryEmbedding with static shapes as ops every target has: ``[Reshape (batch, seq, heads, size)]
    (3-D input) -> Slice (the rotated features, and the pairs: halves, or even/odd with ``interleaved``) ->
    Mul/Sub/Add (x1 cos - x2 sin, x2 cos + x1 sin) -> Concat (re-interleaved through an Unsqueeze/Reshape) ->
    [Reshape]``, the caches gathered by ``position_ids`` (index glue) and broadcast over the heads, so llvm runs it
    on its elementwise kernels. Anything else stays one node (the host kernel)."""
    a = n.attrs
    ins = list(n.inputs) + [""] * (4 - len(n.inputs))
    x, cos_c, sin_c, pid = ins[:4]
    info = g.tensors.get(x)
    caches = [g.tensors.get(c) for c in (cos_c, sin_c)]
    if (info is None or info.dtype != np.float32 or any(d is None for d in info.shape) or len(info.shape) not in (3, 4)
            or any(c is None or c.dtype != np.float32 for c in caches)):
        return [n]
    three_d = len(info.shape) == 3
    if three_d:
        heads = int(a.get("num_heads", 0))
        if heads <= 0 or info.shape[2] % heads:
            return [n]
        b, sq, hidden = info.shape
        shape4 = (b, sq, heads, hidden // heads)  # heads on axis 2: the caches broadcast as (b, s, 1, rot/2)
    else:
        shape4 = tuple(info.shape)  # (b, heads, s, size): the caches broadcast as (b, 1, s, rot/2)
        b, _, sq, _ = shape4
    size = shape4[3]
    rot = int(a.get("rotary_embedding_dim", 0)) or size
    half = rot // 2
    if rot % 2 or rot > size or caches[0].shape[-1] < half:
        return [n]
    nodes, add, const = _builder(g, n)

    def last(t: str, shp, start: int, stop: int, tag: str, step: int = 1) -> str:
        size_out = len(range(start, stop, step))
        bounds = [const(f"{tag}_{k}", np.array([v], np.int64))
                  for k, v in (("s", start), ("e", stop), ("a", -1), ("st", step))]
        return add("Slice", [t] + bounds, shp[:-1] + (size_out,), tag)

    cache_shape = (b, sq, 1, half) if three_d else (b, 1, sq, half)
    angles = []
    for c, info_c, tag in ((cos_c, caches[0], "cos"), (sin_c, caches[1], "sin")):
        if pid:
            c = add("Gather", [c, pid], (b, sq, info_c.shape[-1]), f"{tag}_at", axis=0)
        if info_c.shape[-1] != half:
            c = last(c, (b, sq, info_c.shape[-1]), 0, half, f"{tag}_half")
        angles.append(add("Reshape", [c, const(f"{tag}_shape", np.array(cache_shape, np.int64))], cache_shape,
                          f"{tag}_b"))
    cos, sin = angles
    x4 = add("Reshape", [x, const("x_shape", np.array(shape4, np.int64))], shape4, "x4") if three_d else x
    part = last(x4, shape4, 0, rot, "part") if rot < size else x4
    pshape = shape4[:3] + (rot,)
    if a.get("interleaved", 0):
        x1, x2 = last(part, pshape, 0, rot, "x1", 2), last(part, pshape, 1, rot, "x2", 2)
    else:
        x1, x2 = last(part, pshape, 0, half, "x1"), last(part, pshape, half, rot, "x2")
    hshape = shape4[:3] + (half,)
    r1 = add("Sub", [add("Mul", [x1, cos], hshape, "x1c"), add("Mul", [x2, sin], hshape, "x2s")], hshape, "r1")
    r2 = add("Add", [add("Mul", [x2, cos], hshape, "x2c"), add("Mul", [x1, sin], hshape, "x1s")], hshape, "r2")
    if a.get("interleaved", 0):
        pairs = [add("Unsqueeze", [r, const(f"{t}_ax", np.array([-1], np.int64))], hshape + (1,), f"{t}_u")
                 for r, t in ((r1, "r1"), (r2, "r2"))]
        both = add("Concat", pairs, hshape + (2,), "pairs", axis=-1)
        rotated = add("Reshape", [both, const("pairs_shape", np.array(pshape, np.int64))], pshape, "rotated")
    else:
        rotated = add("Concat", [r1, r2], pshape, "rotated", axis=-1)
    if rot < size:
        rotated = add("Concat", [rotated, last(x4, shape4, rot, size, "rest")], shape4, "joined", axis=-1)
    if three_d:
        add("Reshape", [rotated, const("y_shape", np.array(info.shape, np.int64))], tuple(info.shape), "y",
            out=n.outputs[0])
    else:
        add("Identity", [rotated], shape4, "y", out=n.outputs[0])
    return nodes
