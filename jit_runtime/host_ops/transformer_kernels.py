"""Numpy kernels of the operators transformer, detector and segmentation exports add (ONNX semantics).

LayerNormalization, Instance/GroupNormalization, Erf/Tanh (GELU), Pow/Sqrt (decomposed LayerNorm), the mask and index plumbing
around attention and embeddings (Where, IsNaN, Equal, And, Expand, Range, GatherND, GatherElements),
ConvTranspose (any spatial rank, every attribute) and onnxruntime ``quantize_dynamic``'s integer ops
(MatMulInteger, ConvInteger, DynamicQuantizeLinear). Registered into :data:`jit_runtime.host_ops.registry.KERNELS`.
"""
from __future__ import annotations

import itertools

import numpy as np

from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from jit_runtime.host_ops.registry import kernel


def _f32(x):
    return np.asarray(x, dtype=np.float32)


# ---- normalization / activations ------------------------------------------------------------
@kernel("LayerNormalization", n_outputs=True)
def layer_norm(a, x, scale, bias=None, n_outputs: int = 1):
    """Normalize over axes ``axis..rank-1`` in float32 (``stash_type`` 1), then ``* scale + bias``;
    the optional outputs are the mean and the inverse standard deviation (reduced axes kept as 1)."""
    x = np.asarray(x)
    axis = int(a.get("axis", -1)) % x.ndim
    eps = np.float32(a.get("epsilon", 1e-5))
    red = tuple(range(axis, x.ndim))
    xf = x.astype(np.float32)
    mean = xf.mean(axis=red, keepdims=True, dtype=np.float32)
    d = xf - mean
    inv = (np.float32(1) / np.sqrt((d * d).mean(axis=red, keepdims=True, dtype=np.float32) + eps)).astype(np.float32)
    y = d * inv * _f32(scale)
    if bias is not None:
        y = y + _f32(bias)
    outs = (y.astype(x.dtype), mean.astype(np.float32), inv)
    return outs[:max(1, n_outputs)] if n_outputs > 1 else outs[0]


@kernel("RMSNormalization")
def rms_norm(a, x, scale):
    """``x / sqrt(mean(x^2) + epsilon) * scale`` over axes ``axis..rank-1``, in float32 (``stash_type`` 1)."""
    x = np.asarray(x)
    axis = int(a.get("axis", -1)) % x.ndim
    xf = x.astype(np.float32)
    ms = (xf * xf).mean(axis=tuple(range(axis, x.ndim)), keepdims=True, dtype=np.float32)
    return (xf / np.sqrt(ms + np.float32(a.get("epsilon", 1e-5))) * _f32(scale)).astype(x.dtype)


def _channel(v, c: int, ndim: int) -> np.ndarray:
    """A per-channel parameter shaped to broadcast over (N, C, ...)."""
    return _f32(v).reshape((c,) + (1,) * (ndim - 2))


@kernel("InstanceNormalization", "GroupNormalization")
def group_norm(a, x, scale, bias):
    """Normalize each (sample, group) over its channels and spatial positions in float32, then ``* scale + bias``
    per channel; InstanceNormalization is one group per channel. (GroupNormalization-18's per-group scale is
    deprecated: onnx's checker refuses it.)"""
    x = np.asarray(x)
    n, c = x.shape[:2]
    groups = int(a.get("num_groups", c))
    eps = np.float32(a.get("epsilon", 1e-5))
    xf = x.astype(np.float32).reshape(n, groups, -1)
    mean = xf.mean(axis=2, keepdims=True, dtype=np.float32)
    d = xf - mean
    y = (d / np.sqrt((d * d).mean(axis=2, keepdims=True, dtype=np.float32) + eps)).reshape(x.shape)
    return (y * _channel(scale, c, x.ndim) + _channel(bias, c, x.ndim)).astype(x.dtype)


@kernel("Erf")
def erf(a, x):
    from scipy.special import erf as _erf  # scipy comes with scikit-learn (a dependency)

    x = np.asarray(x)
    return _erf(x.astype(np.float64)).astype(x.dtype)


@kernel("Tanh")
def tanh(a, x):
    x = np.asarray(x)
    return np.tanh(x).astype(x.dtype)


@kernel("Sqrt")
def sqrt(a, x):
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        return np.sqrt(x).astype(x.dtype)


@kernel("Pow")
def power(a, x, y):
    """``x ** y`` with the type of ``x``; integer bases with integer exponents stay exact."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        return np.power(x.astype(np.int64), y.astype(np.int64)).astype(x.dtype)
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f" and y.dtype.kind == "f" and x.dtype.itemsize <= 4:
            return np.power(x.astype(np.float32), y.astype(np.float32)).astype(x.dtype)
        return np.power(x.astype(np.float64), y.astype(np.float64)).astype(x.dtype)


# ---- masks and indices ---------------------------------------------------------------------------
@kernel("Where")
def where(a, c, x, y):
    return np.where(np.asarray(c, bool), x, y)


@kernel("IsNaN")
def isnan(a, x):
    return np.isnan(np.asarray(x))


@kernel("Equal")
def equal(a, x, y):
    return np.equal(x, y)


@kernel("And")
def logical_and(a, x, y):
    return np.logical_and(x, y)


@kernel("Expand")
def expand(a, x, shape):
    x = np.asarray(x)
    out = np.broadcast_shapes(x.shape, tuple(int(s) for s in np.ravel(shape)))
    return np.array(np.broadcast_to(x, out))


@kernel("Range")
def range_(a, start, limit, delta):
    """``start + i * delta`` for ``i < max(ceil((limit - start) / delta), 0)`` in the type of ``start``."""
    start, limit, delta = np.asarray(start), np.asarray(limit), np.asarray(delta)
    if float(delta) == 0:
        raise ValueError("Range: delta must not be 0")
    n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    if start.dtype.kind in "iu":
        return (int(start) + np.arange(n, dtype=np.int64) * int(delta)).astype(start.dtype)
    return (start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)


@kernel("GatherElements")
def gather_elements(a, x, idx):
    x, idx = np.asarray(x), np.asarray(idx, np.int64)
    axis = int(a.get("axis", 0)) % x.ndim
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ValueError(f"GatherElements: index out of range [-{n}, {n - 1}] on axis {axis}")
    grid = list(np.indices(idx.shape, sparse=True))  # indices may be smaller than the data on other axes
    grid[axis] = np.where(idx < 0, idx + n, idx)
    return x[tuple(grid)]


@kernel("GatherND")
def gather_nd(a, x, idx):
    x, idx = np.asarray(x), np.asarray(idx, np.int64)
    b = int(a.get("batch_dims", 0))
    k = idx.shape[-1]
    batch = x.shape[:b]
    nb = int(np.prod(batch, dtype=np.int64))
    xs = x.reshape((nb,) + x.shape[b:])
    ids = idx.reshape((nb, -1, k))
    dims = np.asarray(x.shape[b:b + k], np.int64)
    if ids.size and (np.any(ids < -dims) or np.any(ids >= dims)):
        raise ValueError(f"GatherND: index out of range of dims {tuple(dims)}")
    ids = np.where(ids < 0, ids + dims, ids)
    out = np.stack([xs[i][tuple(ids[i].T)] for i in range(nb)]) if nb else np.zeros((0,), x.dtype)
    return out.reshape(idx.shape[:-1] + x.shape[b + k:])


# ---- transposed convolution -----------------------------------------------------------------
def conv_transpose_geometry(a: dict, in_spatial, w_shape) -> tuple[list[int], list[int], list[int], list[int],
                                                                      list[int], list[int]]:
    """(kernel, strides, dilations, output_padding, crop start, output size) per spatial axis of a ConvTranspose.

    The full scatter has ``s * (in - 1) + output_padding + (k - 1) * d + 1`` positions; the output is the
    window of ``output size`` starting at ``crop start`` (zeros where it leaves the scatter). With
    ``output_shape`` (then ``pads`` are ignored, as the specification and onnxruntime have it) or ``auto_pad``
    SAME_* (target ``in * s``) the total padding is split: SAME_UPPER puts the smaller half first, otherwise
    the larger; else ``pads`` (default 0) give the window."""
    r = len(in_spatial)
    k = [int(v) for v in (a.get("kernel_shape") or w_shape[2:])]
    s = [int(v) for v in (a.get("strides") or [1] * r)]
    d = [int(v) for v in (a.get("dilations") or [1] * r)]
    op = [int(v) for v in (a.get("output_padding") or [0] * r)][:r]
    pads = a.get("pads")
    auto = a.get("auto_pad", "NOTSET")
    out_shape = a.get("output_shape")
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape][-r:]
    full = [s[i] * (in_spatial[i] - 1) + op[i] + (k[i] - 1) * d[i] + 1 for i in range(r)]
    if out_shape is not None or (pads is None and auto in ("SAME_UPPER", "SAME_LOWER")):
        target = out_shape if out_shape is not None else [in_spatial[i] * s[i] for i in range(r)]
        total = [full[i] - target[i] for i in range(r)]
        start = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        return k, s, d, op, start, list(target)
    pads = [0] * (2 * r) if pads is None or auto == "VALID" else [int(v) for v in pads]
    size = out_shape if out_shape is not None else [full[i] - pads[i] - pads[r + i] for i in range(r)]
    return k, s, d, op, pads[:r], list(size)


@kernel("ConvTranspose")
def conv_transpose(a, x, w, b=None):
    """Transposed convolution (any spatial rank): every input position scatters ``x * w`` onto the strided,
    dilated output grid; then the output window is cut out (see :func:`conv_transpose_geometry`)."""
    x, w = _f32(x), _f32(w)
    n, c = x.shape[:2]
    sp = x.shape[2:]
    g = int(a.get("group", 1))
    og = w.shape[1]
    k, s, d, op, start, size = conv_transpose_geometry(a, sp, w.shape)
    full = [s[i] * (sp[i] - 1) + op[i] + (k[i] - 1) * d[i] + 1 for i in range(len(sp))]
    y = np.zeros((n, g * og, *full), np.float32)
    xg = x.reshape(n, g, c // g, -1)
    wg = w.reshape(g, c // g, og, *w.shape[2:])
    for kpos in itertools.product(*(range(kk) for kk in k)):
        contrib = np.einsum("ngcp,gco->ngop", xg, wg[(slice(None), slice(None), slice(None)) + kpos])
        idx = tuple(slice(kpos[i] * d[i], kpos[i] * d[i] + s[i] * (sp[i] - 1) + 1, s[i]) for i in range(len(sp)))
        y[(slice(None), slice(None)) + idx] += contrib.reshape(n, g * og, *sp)
    before = [max(0, -start[i]) for i in range(len(sp))]
    after = [max(0, start[i] + size[i] - full[i]) for i in range(len(sp))]
    if any(before) or any(after):  # the window leaves the scatter: zeros there
        y = np.pad(y, [(0, 0), (0, 0)] + list(zip(before, after)))
    y = y[(slice(None), slice(None)) + tuple(slice(start[i] + before[i], start[i] + before[i] + size[i])
                                             for i in range(len(sp)))]
    if b is not None:
        y = y + _f32(b).reshape((1, -1) + (1,) * len(sp))
    return np.ascontiguousarray(y, dtype=np.float32)


# ---- onnxruntime quantize_dynamic's integer ops ----------------------------------------------------------
def _minus_zp(v, zp, axis_shape):
    v = np.asarray(v).astype(np.int32)
    if zp is None:
        return v
    z = np.asarray(zp).astype(np.int32)
    return v - (z.reshape(axis_shape) if z.ndim == 1 and z.size > 1 else z)


@kernel("MatMulInteger")
def matmul_integer(a, x, w, x_zp=None, w_zp=None):
    """``(x - x_zp) @ (w - w_zp)`` in int32 (x_zp per row of x, w_zp per column of w allowed)."""
    x = np.asarray(x)
    xa = _minus_zp(x, x_zp, (-1, 1))
    wa = _minus_zp(w, w_zp, (1, -1) if np.ndim(w) == 2 else (-1,))
    return np.matmul(xa.astype(np.int64), wa.astype(np.int64)).astype(np.int32)


@kernel("ConvInteger")
def conv_integer(a, x, w, x_zp=None, w_zp=None):
    """2-D ``conv(x - x_zp, w - w_zp)`` in int32 (exact: float64 sums of int8 products); w_zp per output channel."""
    xa = _minus_zp(x, x_zp, (1, -1, 1, 1))
    wa = _minus_zp(w, w_zp, (-1, 1, 1, 1))
    y = conv2d_nchw(xa.astype(np.float64), wa.astype(np.float64), stride=tuple(a.get("strides", (1, 1))),
                    pads=tuple(a.get("pads", (0, 0, 0, 0))), dilations=tuple(a.get("dilations", (1, 1))),
                    groups=int(a.get("group", 1)), dtype=np.float64)
    return np.rint(y).astype(np.int32)


@kernel("DynamicQuantizeLinear", n_outputs=True)
def dynamic_quantize_linear(a, x, n_outputs: int = 3):
    """uint8 quantization with the range of ``x`` (0 included): ``(y, scale, zero_point)``."""
    x = _f32(x)
    hi = np.float32(max(0.0, float(np.max(x)) if x.size else 0.0))
    lo = np.float32(min(0.0, float(np.min(x)) if x.size else 0.0))
    scale = np.float32(np.float32(1.0) if hi == lo else hi - lo) / np.float32(255)
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.asarray(scale, np.float32), np.asarray(zp, np.uint8)
