"""Numpy kernels for the operators that run on the CPU, keyed by IR op type.

Each kernel is ``fn(attrs: dict, *inputs) -> array | tuple[array, ...]``; absent optional
inputs arrive as ``None``. Float math is float32 like onnxruntime; integer ops are exact.
"""
from __future__ import annotations


import numpy as np
from jit_runtime.host_ops import pooling
from jit_runtime.host_ops.conv_kernels import conv2d_nchw, qconv2d, qdense
from jit_runtime.host_ops.dtypes import onnx_np_dtype
from jit_runtime.host_ops.int_elementwise import qadd, qavgpool, qgap, qlookup, qmul
from jit_runtime.host_ops.layout import fold_taps, pack_activation, pack_weight, rebase_uint8_array, unpack_activation, zero_insert
from jit_runtime.host_ops.pool_kernels import packed_max_pool
from jit_runtime.host_ops.requant import qmatmul
from jit_runtime.host_ops.pooling import pool_pads  # noqa: F401  (re-exported: the LLVM pool kernels use it)
from jit_runtime.host_ops.registry import KERNELS, TAKES_N_OUTPUTS, Kernel, kernel  # noqa: F401  (re-exported)
from jit_runtime.host_ops.resize import resize


def _f32(x):
    return np.asarray(x, dtype=np.float32)


# ---- convolution / matmul ---------------------------------------------------------------
def _float_type(*xs) -> np.dtype:
    """The float type an op computing in float32 returns: its operands' when float16, bfloat16 or float64 (ONNX
    keeps the type), else float32."""
    t = np.result_type(*[np.asarray(x).dtype for x in xs])
    return t if t.kind == "f" or t.name == "bfloat16" else np.dtype(np.float32)


@kernel("Conv")
def conv(a, x, w, b=None):
    """2-D convolution; 1-D runs as 2-D over a unit height."""
    out_type = _float_type(x, w)
    x, w = _f32(x), _f32(w)
    strides, pads, dil = list(a.get("strides", (1, 1))), list(a.get("pads", (0, 0, 0, 0))), list(a.get("dilations", (1, 1)))
    one_d = x.ndim == 3
    if one_d:
        x, w = x[:, :, None, :], w[:, :, None, :]
        strides, dil, pads = [1, strides[0]], [1, dil[0]], [0, pads[0], 0, pads[1]]
    y = conv2d_nchw(x, w, stride=tuple(strides), pads=tuple(pads), dilations=tuple(dil), groups=int(a.get("group", 1)))
    if b is not None:
        y = y + _f32(b).reshape(1, -1, 1, 1)
    return (y[:, :, 0] if one_d else y).astype(out_type)


@kernel("Gemm")
def gemm(a, x, w, c=None):
    out_type = _float_type(x, w)
    x = _f32(x).T if a.get("transA", 0) else _f32(x)
    w = _f32(w).T if a.get("transB", 0) else _f32(w)
    y = np.float32(a.get("alpha", 1.0)) * (x @ w)
    if c is not None:
        y = y + np.float32(a.get("beta", 1.0)) * _f32(c)
    return y.astype(out_type)


@kernel("MatMul")
def matmul(a, x, w):
    """float32 (the float64 and float16 types of the operands are kept: computed in float64 / float32)."""
    x, w = np.asarray(x), np.asarray(w)
    t = np.result_type(x.dtype, w.dtype)
    if t == np.float64:
        return np.matmul(x.astype(np.float64), w.astype(np.float64))
    if t.itemsize == 2 and (t.kind == "f" or t.name == "bfloat16"):
        return np.matmul(_f32(x), _f32(w)).astype(t)
    return np.matmul(_f32(x), _f32(w))


@kernel("QConv2D")
def qconv(a, x, w, b=None):
    return qconv2d(x, w, b, a["requant"], stride=tuple(a["strides"]), pads=tuple(a["pads"]),
                   groups=int(a.get("group", 1)), dilations=tuple(a.get("dilations", (1, 1))),
                   pad_value=int(a.get("pad_value", 0)))


kernel("PackedMaxPool")(packed_max_pool)


@kernel("PackedSqueezeHW")
def packed_squeeze_hw(a, x):
    """Packed (N//B, C//BI, 1, 1, B, BI) -> packed (N//B, C//BI, B, BI): Flatten of a pooled tensor."""
    return x.reshape(x.shape[0], x.shape[1], x.shape[4], x.shape[5])


@kernel("FoldTaps")
def fold_taps_k(a, x):
    return fold_taps(x, kw=int(a["kw"]), sx=int(a["sx"]), pads=a["pads"], pad_value=int(a.get("pad_value", 0)),
                     kh=int(a.get("kh", 1)), sy=int(a.get("sy", 1)), batch=int(a.get("batch", 0)),
                     block=int(a.get("block", 0)))


@kernel("RebaseUint8")
def rebase_uint8_k(a, x):
    return rebase_uint8_array(x)


@kernel("QAdd")
def qadd_k(a, x, y):
    return qadd(x, y, a["qadd"])


@kernel("QMul")
def qmul_k(a, x, y):
    return qmul(x, y, a["qmul"])


@kernel("QLookup")
def qlookup_k(a, x):
    return qlookup(x, a["table"])


@kernel("QAveragePool")
def qavgpool_k(a, x):
    return qavgpool(x, a["qavgpool"])


@kernel("QGlobalAveragePool")
def qgap_k(a, x):
    return qgap(x, a["qgap"], packed=bool(a.get("packed")))


@kernel("QDense")
def qdense_k(a, x, w, b=None):
    return qdense(x, w, b, a["requant"])


@kernel("ZeroInsert")
def zero_insert_k(a, x):
    return zero_insert(np.asarray(x), a["strides"], a.get("fill", 0))


@kernel("QMatMul")
def qmatmul_k(a, x, y):
    za, zb = a.get("zero_points", (0, 0))
    return qmatmul(x, y, a["requant"], za, zb)


@kernel("PackDenseWeight")
def pack_dense_weight_k(a, w):
    """A dense weight computed at run time, (M, K) int8 -> the packed (M//BO, K//BI, BO, BI) layout."""
    return pack_weight(w, int(a["block_out"]), int(a["block_in"]))


# ---- elementwise -------------------------------------------------------------------------
@kernel("Relu")
def relu(a, x):
    return np.maximum(x, np.zeros((), x.dtype))


@kernel("Clip")
def clip(a, x, lo=None, hi=None):
    lo = a.get("min", None) if lo is None else lo
    hi = a.get("max", None) if hi is None else hi
    y = x if lo is None else np.maximum(x, np.asarray(lo, x.dtype))
    return y if hi is None else np.minimum(y, np.asarray(hi, x.dtype))


@kernel("Add")
def add(a, x, y):
    return np.add(x, y)


@kernel("Sub")
def sub(a, x, y):
    return np.subtract(x, y)


@kernel("Mul")
def mul(a, x, y):
    return np.multiply(x, y)


@kernel("Div")
def div(a, x, y):
    if np.result_type(x, y).kind not in "iub":  # floats, also ml_dtypes' bfloat16 (kind "V")
        return np.divide(x, y)
    q = np.floor_divide(x, y)  # integers: ONNX truncates toward zero (C semantics), numpy floors
    return q + ((q * y != x) & ((x < 0) != (y < 0))).astype(q.dtype)


@kernel("Sum")
def sum_(a, *xs):
    from jit_runtime.host_ops.math_kernels import fold

    return fold(np.add, xs)


@kernel("Sigmoid")
def sigmoid(a, x):
    x = _f32(x)
    e = np.exp(-np.abs(x))  # never overflows (exp(-x) does for x < -88: the warning every int8 table build printed)
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(np.float32)


@kernel("HardSigmoid")
def hard_sigmoid(a, x):
    alpha, beta = np.float32(a.get("alpha", 0.2)), np.float32(a.get("beta", 0.5))
    return np.clip(alpha * _f32(x) + beta, 0, 1).astype(np.float32)


@kernel("HardSwish")
def hard_swish(a, x):
    x = _f32(x)
    return (x * np.clip(x / np.float32(6) + np.float32(0.5), 0, 1)).astype(np.float32)


@kernel("LeakyRelu")
def leaky_relu(a, x):
    x = _f32(x)
    return np.where(x >= 0, x, np.float32(a.get("alpha", 0.01)) * x).astype(np.float32)


@kernel("PRelu")
def prelu(a, x, slope):
    x = _f32(x)
    return np.where(x >= 0, x, _f32(slope) * x).astype(np.float32)


@kernel("Identity")
def identity(a, x):
    return x


@kernel("Dropout", n_outputs=True)
def dropout(a, x, ratio=None, training_mode=None, *, n_outputs=1):
    """Inference (the default) passes ``x`` through with an all-true mask; training mode drops at ``ratio``
    with a generator seeded by the ``seed`` attribute and scales the kept values by 1 / (1 - ratio)."""
    r = 0.5 if ratio is None else float(np.asarray(ratio))
    if training_mode is None or not bool(np.asarray(training_mode)) or r == 0:
        return (x, np.ones(x.shape, bool)) if n_outputs > 1 else x
    mask = np.random.default_rng(a.get("seed")).uniform(size=x.shape) >= r
    return (x * mask / np.asarray(1 - r, x.dtype)).astype(x.dtype), mask


@kernel("Cast")
def cast(a, x):
    return np.asarray(x).astype(onnx_np_dtype(int(a["to"])))


# ---- quantization ------------------------------------------------------------------------
def _axis_param(p, x, axis, block: int = 0):
    """Broadcastable form of a scale / zero point: scalar, per-axis (1-D) or blocked (``block`` elements each)."""
    p = np.asarray(p)
    if p.ndim == 0 or p.size == 1 and x.ndim == 0:
        return p.reshape(())
    axis %= x.ndim
    if block:
        return np.repeat(p, block, axis=axis)[tuple(slice(0, d) for d in x.shape)]
    shape = [1] * x.ndim
    shape[axis] = p.size
    return p.reshape(shape)


@kernel("QuantizeLinear")
def quantize_linear(a, x, scale, zp=None):
    out_t = int(a.get("output_dtype", 0))
    dt = np.asarray(zp).dtype if zp is not None else np.dtype(
        onnx_np_dtype(out_t) if out_t else np.uint8)
    axis, block = int(a.get("axis", 1)), int(a.get("block_size", 0))
    xf = np.asarray(x).astype(np.float32)
    q = np.rint(xf / _axis_param(np.asarray(scale).astype(np.float32), xf, axis, block))
    if zp is not None:
        q = q + _axis_param(zp, xf, axis, block).astype(np.float32)
    info = np.iinfo(dt)
    return np.clip(q, info.min, info.max).astype(dt)


@kernel("DequantizeLinear")
def dequantize_linear(a, x, scale, zp=None):
    axis, block = int(a.get("axis", 1)), int(a.get("block_size", 0))
    xi = np.asarray(x).astype(np.int64)
    if zp is not None:
        xi = xi - _axis_param(zp, xi, axis, block).astype(np.int64)
    s = np.asarray(scale)
    ct = s.dtype if s.dtype in (np.float16, np.float64) else np.float32
    return (xi.astype(ct) * _axis_param(s.astype(ct), xi, axis, block)).astype(s.dtype if s.dtype.kind == "f" else np.float32)


# ---- pooling -----------------------------------------------------------------------------
@kernel("MaxPool", n_outputs=True)
def max_pool(a, x, *, n_outputs=1):
    return pooling.max_pool(a, x, want_indices=n_outputs > 1)


@kernel("AveragePool")
def avg_pool(a, x):
    return pooling.average_pool(a, x)


@kernel("GlobalAveragePool")
def global_avg_pool(a, x):
    return _f32(x).mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float32)


# ---- normalization / softmax -------------------------------------------------------------
@kernel("BatchNormalization")
def batch_norm(a, x, scale, bias, mean, var):
    """Inference form; ``training_mode=1`` normalizes with the batch statistics and also returns the
    updated running mean and variance (``momentum``-weighted)."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    dt = np.asarray(x).dtype
    eps = a.get("epsilon", 1e-5)
    if a.get("training_mode", 0):
        red = (0,) + tuple(range(2, x.ndim))
        xf = np.asarray(x, np.float64)
        bm, bv = xf.mean(axis=red), xf.var(axis=red)
        y = (xf - bm.reshape(shape)) / np.sqrt(bv.reshape(shape) + eps) * np.asarray(scale, np.float64).reshape(shape) \
            + np.asarray(bias, np.float64).reshape(shape)
        mom = float(a.get("momentum", 0.9))
        return (y.astype(dt), (np.asarray(mean, np.float64) * mom + bm * (1 - mom)).astype(np.asarray(mean).dtype),
                (np.asarray(var, np.float64) * mom + bv * (1 - mom)).astype(np.asarray(var).dtype))
    ct = np.float64 if dt == np.float64 else np.float32
    c = [np.asarray(v, ct) for v in (scale, bias, mean, var)]
    inv = c[0] / np.sqrt(c[3] + ct(eps))
    y = (np.asarray(x, ct) - c[2].reshape(shape)) * inv.reshape(shape) + c[1].reshape(shape)
    return y.astype(dt)


@kernel("LRN")
def lrn(a, x):
    """Local response normalization across channels: x / (bias + alpha / size * sum of squares) ** beta."""
    size = int(a["size"])
    xf = np.asarray(x, np.float64)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.pad(xf * xf, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    csum = np.concatenate([np.zeros_like(sq[:, :1]), np.cumsum(sq, axis=1)], axis=1)
    win = csum[:, size:] - csum[:, :-size]
    y = xf / (float(a.get("bias", 1.0)) + float(a.get("alpha", 1e-4)) / size * win) ** float(a.get("beta", 0.75))
    return y.astype(np.asarray(x).dtype)


@kernel("Softmax")
def softmax(a, x):
    axis = int(a.get("axis", -1))
    e = np.exp(_f32(x) - _f32(x).max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(_float_type(x))


@kernel("SafeSoftmax")
def safe_softmax(a, x):
    """Softmax where a row of only -inf (a query with no key to attend) gives zeros, not NaN: ONNX Attention's
    rule, for the Attention rewrite (``compiler.frontend.expand.expand_attention``)."""
    axis = int(a.get("axis", -1))
    xf = _f32(x)
    top = xf.max(axis=axis, keepdims=True)
    dead = np.isneginf(top)  # every value -inf (a NaN elsewhere still propagates)
    e = np.exp(xf - np.where(dead, np.float32(0), top))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(dead, np.float32(0), e / e.sum(axis=axis, keepdims=True)).astype(_float_type(x))


# ---- shape / data movement -----------------------------------------------------------------
@kernel("Flatten")
def flatten(a, x):
    axis = int(a.get("axis", 1)) % max(x.ndim, 1) if x.ndim else 0
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)


@kernel("Reshape")
def reshape(a, x, shape):
    shape = [int(s) for s in np.asarray(shape)]
    if not a.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


@kernel("Concat")
def concat(a, *xs):
    return np.concatenate([x for x in xs if x is not None], axis=int(a["axis"]))


@kernel("Transpose")
def transpose(a, x):
    perm = a.get("perm")
    return np.ascontiguousarray(np.transpose(x, None if perm is None else tuple(perm)))


@kernel("Pad")
def pad(a, x, pads=None, value=None, axes=None):
    pads = np.asarray(a.get("pads") if pads is None else pads, dtype=np.int64)
    axes = list(range(x.ndim)) if axes is None else [int(v) % x.ndim for v in np.asarray(axes)]
    k = len(axes)
    width = [(0, 0)] * x.ndim
    for j, ax in enumerate(axes):
        width[ax] = (int(pads[j]), int(pads[j + k]))
    mode = a.get("mode", "constant")
    if mode == "constant":
        cv = a.get("value", 0.0) if value is None else np.asarray(value).item()
        return np.pad(x, width, mode="constant", constant_values=cv)
    return np.pad(x, width, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])


@kernel("Resize")
def resize_k(a, x, roi=None, scales=None, sizes=None):
    return resize(a, x, roi, scales, sizes)


@kernel("Slice")
def slice_(a, x, starts, ends, axes=None, steps=None):
    """ONNX Slice: negative starts/ends count from the end, then clamp (per step direction)."""
    starts, ends = np.asarray(starts, np.int64).ravel(), np.asarray(ends, np.int64).ravel()
    axes = range(len(starts)) if axes is None else [int(v) % x.ndim for v in np.asarray(axes).ravel()]
    steps = np.ones(len(starts), np.int64) if steps is None else np.asarray(steps, np.int64).ravel()
    sl = [slice(None)] * x.ndim
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        dim = x.shape[ax]
        st, en = (int(v) + dim if v < 0 else int(v) for v in (st, en))
        if sp > 0:
            st, en = min(max(st, 0), dim), min(max(en, 0), dim)
        else:
            st, en = min(max(st, 0), dim - 1), min(max(en, -1), dim - 1)
        sl[ax] = slice(st, None if en < 0 else en, int(sp))
    return np.array(x[tuple(sl)], copy=True)


@kernel("Split", n_outputs=True)
def split(a, x, sizes=None, *, n_outputs=1):
    """ONNX Split along ``axis``: explicit sizes, or ``num_outputs`` parts (ceil-sized, last smaller)."""
    axis = int(a.get("axis", 0)) % x.ndim
    if sizes is None:
        sizes = a.get("split")
    if sizes is None:
        parts = int(a.get("num_outputs", n_outputs))
        step = -(-x.shape[axis] // parts)
        sizes = [min(step, x.shape[axis] - i * step) for i in range(parts)]
    bounds = np.cumsum([int(v) for v in np.asarray(sizes).ravel()])[:-1]
    return tuple(np.array(p, copy=True) for p in np.split(x, bounds, axis=axis))


@kernel("ConstantOfShape")
def constant_of_shape(a, shape):
    v = a.get("value")
    v = np.zeros(1, np.float32) if v is None else np.asarray(v).reshape(-1)
    return np.full([int(d) for d in np.asarray(shape).ravel()], v[0], dtype=v.dtype)


@kernel("Shape")
def shape(a, x):
    return np.asarray(x.shape[a.get("start", 0): a.get("end", None)], dtype=np.int64)


@kernel("Gather")
def gather(a, x, idx):
    return np.take(x, np.asarray(idx, dtype=np.int64), axis=int(a.get("axis", 0)))


@kernel("Unsqueeze")
def unsqueeze(a, x, axes=None):
    axes = a.get("axes") if axes is None else axes
    out_rank = x.ndim + len(np.atleast_1d(axes))
    return np.expand_dims(x, tuple(sorted(int(v) % out_rank for v in np.atleast_1d(axes))))


@kernel("ReduceMean")
def reduce_mean(a, x, axes=None):
    """ReduceMean whose axes are a run-time input (constant axes are rewritten at import)."""
    axes = a.get("axes") if axes is None else axes
    axes = None if axes is None else [int(v) % max(x.ndim, 1) for v in np.atleast_1d(axes)]
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(x.ndim))
    return np.mean(x, axis=tuple(axes), keepdims=bool(a.get("keepdims", 1))).astype(x.dtype)


@kernel("Squeeze")
def squeeze(a, x, axes=None):
    axes = a.get("axes") if axes is None else axes
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(int(v) % x.ndim for v in np.atleast_1d(axes)))


# ---- layout transforms -------------------------------------------------------------------
@kernel("PackActivation")
def pack_k(a, x):
    return pack_activation(x, int(a["batch"]), int(a["block"]))


@kernel("UnpackActivation")
def unpack_k(a, x):
    return unpack_activation(x, int(a["n"]), int(a["c"]))


@kernel("Repack")
def repack_k(a, x):
    return pack_activation(unpack_activation(x), int(a["batch"]), int(a["block"]))


from jit_runtime.host_ops import transformer_kernels  # noqa: E402,F401  (registers its kernels here)
from jit_runtime.host_ops import math_kernels  # noqa: E402,F401  (registers its kernels here)
from jit_runtime.host_ops import index_kernels  # noqa: E402,F401  (registers its kernels here)
from jit_runtime.host_ops import attention_kernels  # noqa: E402,F401  (registers its kernels here)
from jit_runtime.host_ops import zero_point  # noqa: E402,F401  (registers its kernels here)
