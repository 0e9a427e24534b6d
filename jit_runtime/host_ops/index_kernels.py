"""Numpy kernels of ONNX's rearrangement and indexing operators (ONNX semantics, exact: no arithmetic on values
beyond CumSum's running sum and Mod).

Tile, DepthToSpace, SpaceToDepth, Trilu (causal masks), ScatterND and ScatterElements (``reduction``), OneHot,
TopK, NonZero, CumSum (``exclusive``, ``reverse``: a transformer's position ids), CastLike, Size, Mod (``fmod``) and
Mean. Registered into :data:`jit_runtime.host_ops.registry.KERNELS`.
"""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.registry import kernel


@kernel("Tile")
def tile(a, x, repeats):
    return np.tile(np.asarray(x), [int(r) for r in np.ravel(repeats)])


@kernel("DepthToSpace")
def depth_to_space(a, x):
    """(N, C, H, W) -> (N, C / b^2, H b, W b); ``mode`` DCR (depth, column, row: the default) or CRD."""
    x = np.asarray(x)
    b = int(a["blocksize"])
    n, c, h, w = x.shape
    if a.get("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))


@kernel("SpaceToDepth")
def space_to_depth(a, x):
    """DepthToSpace's inverse in either mode (DCR: the block offset outermost in the channels; CRD: innermost)."""
    x = np.asarray(x)
    b = int(a["blocksize"])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 3, 5, 1, 2, 4) if a.get("mode", "DCR") == "DCR" else y.transpose(0, 1, 3, 5, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))


@kernel("Trilu")
def trilu(a, x, k=None):
    """The upper (``upper=1``, default) or lower triangle of the last two axes, from diagonal ``k``."""
    x = np.asarray(x)
    k = 0 if k is None else int(np.ravel(k)[0])
    return (np.triu if a.get("upper", 1) else np.tril)(x, k)


def _scatter(out: np.ndarray, at: tuple, upd: np.ndarray, reduction: str) -> np.ndarray:
    """``out[at] = upd`` (``reduction="none"``) or combined with add/mul/max/min, vectorized; a reduction applies
    once per repeated index (numpy's unbuffered ``ufunc.at``)."""
    fn = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction]
    if fn is None:
        out[at] = upd
    else:
        fn.at(out, at, upd)
    return out


@kernel("ScatterND")
def scatter_nd(a, data, indices, updates):
    out = np.array(data, copy=True)
    idx = np.asarray(indices, np.int64)
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    flat_upd = np.asarray(updates).reshape((flat_idx.shape[0],) + out.shape[k:])
    return _scatter(out, tuple(flat_idx.T), flat_upd, a.get("reduction", "none"))


@kernel("ScatterElements")
def scatter_elements(a, data, indices, updates):
    out = np.array(data, copy=True)
    idx = np.asarray(indices, np.int64)
    axis = int(a.get("axis", 0)) % out.ndim
    at = list(np.indices(idx.shape, sparse=True))
    at[axis] = np.where(idx < 0, idx + out.shape[axis], idx)
    return _scatter(out, tuple(at), np.asarray(updates), a.get("reduction", "none"))


@kernel("OneHot")
def one_hot(a, indices, depth, values):
    idx = np.asarray(indices).astype(np.int64)
    d = int(np.ravel(depth)[0])
    off, on = np.ravel(values)[:2]
    idx = np.where(idx < 0, idx + d, idx)
    axis = int(a.get("axis", -1))
    out = np.where(idx[..., None] == np.arange(d), on, off).astype(np.asarray(values).dtype)
    return np.moveaxis(out, -1, axis % out.ndim)


@kernel("TopK", n_outputs=True)
def top_k(a, x, k, n_outputs: int = 2):
    """The ``k`` largest (``largest=1``) or smallest values along ``axis`` and their indices; ties keep the lower
    index first (a stable sort), as ONNX asks."""
    x = np.asarray(x)
    k = int(np.ravel(k)[0])
    axis = int(a.get("axis", -1)) % x.ndim
    key = x.astype(np.int64) if x.dtype.kind in "iub" else x
    order = np.argsort(-key if a.get("largest", 1) else key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    vals = np.take_along_axis(x, idx, axis=axis)
    return (vals, idx.astype(np.int64))[:max(n_outputs, 1)] if n_outputs > 1 else vals


@kernel("NonZero")
def non_zero(a, x):
    return np.array(np.nonzero(np.asarray(x)), dtype=np.int64).reshape(np.asarray(x).ndim, -1)


@kernel("CumSum")
def cum_sum(a, x, axis):
    x = np.asarray(x)
    ax = int(np.ravel(axis)[0]) % x.ndim
    y = np.flip(x, ax) if a.get("reverse", 0) else x
    s = np.cumsum(y, axis=ax, dtype=x.dtype)
    if a.get("exclusive", 0):
        s = s - y
    return np.ascontiguousarray(np.flip(s, ax) if a.get("reverse", 0) else s)


@kernel("CumProd")
def cum_prod(a, x, axis):
    x = np.asarray(x)
    ax = int(np.ravel(axis)[0]) % x.ndim
    y = np.flip(x, ax) if a.get("reverse", 0) else x
    if a.get("exclusive", 0):  # shift in a 1
        pad = np.ones_like(np.take(y, [0], axis=ax))
        y = np.concatenate([pad, np.delete(y, -1, axis=ax)], axis=ax)
    s = np.cumprod(y, axis=ax, dtype=x.dtype)
    return np.ascontiguousarray(np.flip(s, ax) if a.get("reverse", 0) else s)


@kernel("EyeLike")
def eye_like(a, x):
    """Ones on diagonal ``k`` of a 2-D tensor shaped as the input, in ``dtype`` (default: the input's)."""
    from jit_runtime.host_ops.dtypes import onnx_np_dtype

    x = np.asarray(x)
    dt = onnx_np_dtype(int(a["dtype"])) if a.get("dtype") is not None else x.dtype
    return np.eye(x.shape[0], x.shape[1], int(a.get("k", 0)), dtype=dt)


@kernel("CastLike")
def cast_like(a, x, like):
    return np.asarray(x).astype(np.asarray(like).dtype)


@kernel("Size")
def size(a, x):
    return np.array(np.asarray(x).size, np.int64)


@kernel("Mod")
def mod(a, x, y):
    """``fmod=1``: C's fmod (the dividend's sign); else Python's modulo (the divisor's sign; integers only)."""
    with np.errstate(all="ignore"):
        return (np.fmod(x, y) if a.get("fmod", 0) else np.mod(x, y)).astype(np.asarray(x).dtype)


@kernel("Mean")
def mean(a, *xs):
    out = np.asarray(xs[0])
    for x in xs[1:]:
        out = out + x
    return (out / len(xs)).astype(np.asarray(xs[0]).dtype)


NMS_BLOCK = 64  # candidates NMS tests together: one IoU block against the kept boxes, one within the block


def _iou_above(lo_a, hi_a, area_a, lo_b, hi_b, area_b, t: float) -> np.ndarray:
    """(len a, len b): IoU of each box pair above ``t`` (a zero union: IoU 0)."""
    inter = np.prod(np.clip(np.minimum(hi_a[:, None], hi_b[None]) - np.maximum(lo_a[:, None], lo_b[None]), 0, None),
                    axis=-1)
    union = area_a[:, None] + area_b[None] - inter
    with np.errstate(all="ignore"):
        return np.where(union > 0, inter / union, 0.0) > t


def _greedy_nms(lo, hi, area, t: float, limit: int, ids) -> list:
    """``ids`` of the boxes greedy NMS keeps, in order (boxes by descending score): a box is kept unless its IoU
    with a kept one exceeds ``t``, at most ``limit``. Blocks of :data:`NMS_BLOCK` candidates: one vector test
    against every kept box, then the greedy pass within the block on its pairwise IoUs (a Python step per
    candidate, a vector one per kept box: 80 classes x 3,000 boxes, 100 kept a class: 48-53 ms; 136-140 ms with
    numpy calls per candidate)."""
    kept: list[int] = []
    for j in range(0, len(ids), NMS_BLOCK):
        if len(kept) >= limit:
            break
        blk = slice(j, j + NMS_BLOCK)
        alive = np.ones(len(ids[blk]), bool)
        if kept:
            alive &= ~_iou_above(lo[blk], hi[blk], area[blk], lo[kept], hi[kept], area[kept], t).any(axis=1)
        within = _iou_above(lo[blk], hi[blk], area[blk], lo[blk], hi[blk], area[blk], t)
        for r in np.flatnonzero(alive):
            if not alive[r]:
                continue
            if len(kept) >= limit:
                break
            kept.append(j + int(r))
            alive[r + 1:] &= ~within[r, r + 1:]
    return [ids[k] for k in kept]


@kernel("NonMaxSuppression")
def non_max_suppression(a, boxes, scores, max_per_class=None, iou_threshold=None, score_threshold=None):
    """Greedy NMS per (batch, class): boxes above ``score_threshold`` by descending score (stable), each kept unless
    its IoU with a kept one exceeds ``iou_threshold``, at most ``max_per_class`` each; rows ``(batch, class, box)``.
    ``center_point_box=1``: boxes are (x centre, y centre, width, height), else two corners in any order."""
    boxes, scores = np.asarray(boxes, np.float32), np.asarray(scores, np.float32)
    limit = 0 if max_per_class is None or np.size(max_per_class) == 0 else int(np.ravel(max_per_class)[0])
    iou_t = 0.0 if iou_threshold is None or np.size(iou_threshold) == 0 else float(np.ravel(iou_threshold)[0])
    score_t = None if score_threshold is None or np.size(score_threshold) == 0 else float(np.ravel(score_threshold)[0])
    if a.get("center_point_box", 0):
        c, half = boxes[..., :2], boxes[..., 2:] / 2
        lo, hi = c - half, c + half
    else:
        lo, hi = np.minimum(boxes[..., :2], boxes[..., 2:]), np.maximum(boxes[..., :2], boxes[..., 2:])
    area = np.prod(hi - lo, axis=-1)
    rows = []
    for b in range(scores.shape[0]):
        for cl in range(scores.shape[1]):
            s = scores[b, cl]
            cand = np.argsort(-s, kind="stable")
            if score_t is not None:
                cand = cand[s[cand] > score_t]
            rows += [(b, cl, int(i)) for i in _greedy_nms(lo[b, cand], hi[b, cand], area[b, cand], iou_t, limit,
                                                          cand)]
    return np.asarray(rows, np.int64).reshape(-1, 3)
