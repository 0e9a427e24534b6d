"""Numpy kernels for the operators that run on the CPU, keyed by IR op type.

Each kernel is ``fn(attrs: dict, *inputs) -> array | tuple[array, ...]``; absent optional
inputs arrive as ``None``. Float math is float32 like onnxruntime; integer ops are exact.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from compiler.cpu.conv_kernels import conv2d_nchw, qconv2d, qdense
from compiler.graph.accel_interface import pack_activation, unpack_activation
from compiler.cpu.pool_kernels import packed_max_pool
from compiler.graph.tap_fold import fold_taps
from compiler.quant.int_elementwise import qadd, qavgpool, qgap, qlookup, qmul
from compiler.quant.rebase import rebase_uint8_array

Kernel = Callable[..., object]
KERNELS: dict[str, Kernel] = {}


def kernel(*ops: str):
    def deco(fn):
        for op in ops:
            KERNELS[op] = fn
        return fn
    return deco


def _f32(x):
    return np.asarray(x, dtype=np.float32)


# ---- convolution / matmul ---------------------------------------------------------------
@kernel("Conv")
def conv(a, x, w, b=None):
    y = conv2d_nchw(_f32(x), _f32(w), stride=tuple(a.get("strides", (1, 1))), pads=tuple(a.get("pads", (0, 0, 0, 0))),
                    dilations=tuple(a.get("dilations", (1, 1))), groups=int(a.get("group", 1)))
    if b is not None:
        y = y + _f32(b).reshape(1, -1, 1, 1)
    return y.astype(np.float32)


@kernel("Gemm")
def gemm(a, x, w, c=None):
    x = _f32(x).T if a.get("transA", 0) else _f32(x)
    w = _f32(w).T if a.get("transB", 0) else _f32(w)
    y = np.float32(a.get("alpha", 1.0)) * (x @ w)
    if c is not None:
        y = y + np.float32(a.get("beta", 1.0)) * _f32(c)
    return y.astype(np.float32)


@kernel("MatMul")
def matmul(a, x, w):
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
    return np.divide(x, y) if np.issubdtype(np.result_type(x, y), np.floating) else np.floor_divide(x, y)


@kernel("Sigmoid")
def sigmoid(a, x):
    return (1.0 / (1.0 + np.exp(-_f32(x)))).astype(np.float32)


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


@kernel("Identity", "Dropout")
def identity(a, x, *rest):
    return x


@kernel("Cast")
def cast(a, x):
    return np.asarray(x).astype(onnx.helper.tensor_dtype_to_np_dtype(int(a["to"])))


# ---- quantization ------------------------------------------------------------------------
def _axis_param(p, x, axis):
    p = np.asarray(p)
    if p.ndim == 0 or p.size == 1 and x.ndim == 0:
        return p.reshape(())
    shape = [1] * x.ndim
    shape[axis % x.ndim] = p.size
    return p.reshape(shape)


@kernel("QuantizeLinear")
def quantize_linear(a, x, scale, zp=None):
    dt = np.dtype(np.uint8) if zp is None else np.asarray(zp).dtype
    axis = int(a.get("axis", 1))
    q = np.rint(_f32(x) / _axis_param(_f32(scale), x, axis))
    if zp is not None:
        q = q + _axis_param(zp, x, axis).astype(np.float32)
    info = np.iinfo(dt)
    return np.clip(q, info.min, info.max).astype(dt)


@kernel("DequantizeLinear")
def dequantize_linear(a, x, scale, zp=None):
    axis = int(a.get("axis", 1))
    xi = np.asarray(x).astype(np.int64)
    if zp is not None:
        xi = xi - _axis_param(zp, xi, axis).astype(np.int64)
    return (xi.astype(np.float32) * _axis_param(_f32(scale), xi, axis)).astype(np.float32)


# ---- pooling -----------------------------------------------------------------------------
def pool_pads(a: dict, h: int, w: int) -> tuple[int, ...]:
    """(kh, kw, sh, sw, top, left, bottom, right) of a 2-D pool on an h x w input; ``ceil_mode`` grows bottom/right."""
    kh, kw = (int(v) for v in a["kernel_shape"])
    sh, sw = (int(v) for v in a.get("strides", (1, 1)))
    t, l, b, r = (int(v) for v in a.get("pads", (0, 0, 0, 0)))
    if a.get("ceil_mode", 0):
        oh = -(-(h + t + b - kh) // sh) + 1
        ow = -(-(w + l + r - kw) // sw) + 1
        b += max(0, (oh - 1) * sh + kh - (h + t + b))
        r += max(0, (ow - 1) * sw + kw - (w + l + r))
    return kh, kw, sh, sw, t, l, b, r


def _pool_windows(x, a, pad_value):
    kh, kw, sh, sw, t, l, b, r = pool_pads(a, *x.shape[2:])
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=pad_value)
    return np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]


@kernel("MaxPool")
def max_pool(a, x):
    low = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    return _pool_windows(x, a, low).max(axis=(-2, -1))


@kernel("AveragePool")
def avg_pool(a, x):
    x = _f32(x)
    s = _pool_windows(x, a, 0).sum(axis=(-2, -1), dtype=np.float32)
    if a.get("count_include_pad", 0):
        kh, kw = a["kernel_shape"]
        return (s / np.float32(kh * kw)).astype(np.float32)
    cnt = _pool_windows(np.ones((1, 1) + x.shape[2:], np.float32), a, 0).sum(axis=(-2, -1))
    return (s / cnt).astype(np.float32)


@kernel("GlobalAveragePool")
def global_avg_pool(a, x):
    return _f32(x).mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float32)


# ---- normalization / softmax -------------------------------------------------------------
@kernel("BatchNormalization")
def batch_norm(a, x, scale, bias, mean, var):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = _f32(scale) / np.sqrt(_f32(var) + np.float32(a.get("epsilon", 1e-5)))
    return ((_f32(x) - _f32(mean).reshape(shape)) * inv.reshape(shape) + _f32(bias).reshape(shape)).astype(np.float32)


@kernel("Softmax")
def softmax(a, x):
    axis = int(a.get("axis", -1))
    e = np.exp(_f32(x) - _f32(x).max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


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


def _nearest_index(out_len, in_len, scale, ctm, nearest_mode):
    o = np.arange(out_len, dtype=np.float64)
    if ctm == "asymmetric":
        c = o / scale
    elif ctm == "align_corners":
        c = o * (in_len - 1) / (out_len - 1) if out_len > 1 else np.zeros_like(o)
    elif ctm == "tf_half_pixel_for_nn":
        c = (o + 0.5) / scale
    elif ctm == "pytorch_half_pixel":
        c = (o + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(o)
    else:  # half_pixel
        c = (o + 0.5) / scale - 0.5
    rnd = {"floor": np.floor, "ceil": np.ceil, "round_prefer_ceil": lambda v: np.floor(v + 0.5)}
    idx = rnd.get(nearest_mode, lambda v: np.ceil(v - 0.5))(c)
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


@kernel("Resize")
def resize(a, x, roi=None, scales=None, sizes=None):
    if sizes is not None and np.size(sizes):
        out_shape = [int(s) for s in np.asarray(sizes)]
        scl = [o / i for o, i in zip(out_shape, x.shape)]
    else:
        scl = [float(s) for s in np.asarray(scales)]
        out_shape = [int(np.floor(i * s)) for i, s in zip(x.shape, scl)]
    y = x
    for ax in range(x.ndim):
        if out_shape[ax] != x.shape[ax] or scl[ax] != 1.0:
            idx = _nearest_index(out_shape[ax], x.shape[ax], scl[ax], a.get("coordinate_transformation_mode", "half_pixel"),
                                 a.get("nearest_mode", "round_prefer_floor"))
            y = np.take(y, idx, axis=ax)
    return y


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
