"""ONNX Resize (opset 11-19): nearest, linear and cubic, N-D, separable per resized axis.

Each resized axis gets a dense (out, in) weight matrix built from the source coordinate of every
output index (``coordinate_transformation_mode``) and the interpolation kernel; the tensor is
contracted with it axis by axis in float64 and cast back. Neighbours outside the input take the
edge value (or drop out and renormalize with ``exclude_outside``); ``antialias`` stretches the
linear/cubic kernel by 1/scale when downsampling; ``tf_crop_and_resize`` samples inside ``roi`` and
writes ``extrapolation_value`` outside the input.
"""
from __future__ import annotations

import numpy as np

COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coords(mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float] | None) -> np.ndarray:
    """Input coordinate of each output index along one axis."""
    y = np.arange(out_len, dtype=np.float64)
    out_f = scale * in_len
    if mode == "align_corners":
        return np.zeros_like(y) if out_f == 1 else y * (in_len - 1) / (out_f - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if out_f == 1:
            x = np.full_like(y, (hi - lo) * (in_len - 1) / 2)
        else:
            x = y * (hi - lo) * (in_len - 1) / (out_f - 1)
        return x + lo * (in_len - 1)
    if mode == "pytorch_half_pixel":
        return np.full_like(y, -0.5) if out_f == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_f)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5  # half_pixel


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def axis_weights(attrs: dict, x: np.ndarray, in_len: int, scale: float) -> np.ndarray:
    """(out, in) interpolation matrix for source coordinates ``x``."""
    mode = attrs.get("mode", "nearest")
    out = len(x)
    w = np.zeros((out, in_len), np.float64)
    rows = np.arange(out)
    if mode == "nearest":
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        rnd = {"floor": np.floor, "ceil": np.ceil, "round_prefer_ceil": lambda v: np.floor(v + 0.5),
               "round_prefer_floor": lambda v: np.ceil(v - 0.5)}[nm]
        idx = np.where(x == np.floor(x), x, rnd(x))
        w[rows, np.clip(idx, 0, in_len - 1).astype(np.int64)] = 1.0
        return w
    s = min(scale, 1.0) if attrs.get("antialias", 0) else 1.0
    reach = 1.0 if mode == "linear" else 2.0
    start = int(np.floor(-reach / s)) + 1
    taps = np.floor(x).astype(np.int64)[:, None] + start + np.arange(2 - 2 * start)[None, :]
    dist = (taps - x[:, None]) * s
    k = np.maximum(0.0, 1 - np.abs(dist)) if mode == "linear" else _cubic(dist, float(attrs.get("cubic_coeff_a", -0.75)))
    if attrs.get("exclude_outside", 0):
        k = np.where((taps < 0) | (taps >= in_len), 0.0, k)
    if s != 1.0 or attrs.get("exclude_outside", 0):
        tot = k.sum(axis=1, keepdims=True)
        k = k / np.where(tot == 0, 1.0, tot)
    np.add.at(w, (np.repeat(rows, taps.shape[1]), np.clip(taps, 0, in_len - 1).ravel()), k.ravel())
    return w


def output_geometry(attrs: dict, shape: tuple[int, ...], roi, scales, sizes) -> tuple[list[int], list[float], list]:
    """(output shape, per-axis scale, per-axis roi pair or None) from the Resize inputs and attributes."""
    r = len(shape)
    axes = [int(a) % r for a in attrs.get("axes") or range(r)]
    roi = None if roi is None or np.size(roi) == 0 else [float(v) for v in np.asarray(roi).ravel()]
    rois: list = [None] * r
    if roi is not None:
        n = len(axes)
        for i, ax in enumerate(axes):
            rois[ax] = (roi[i], roi[n + i])
    scl = [1.0] * r
    out = list(shape)
    if sizes is not None and np.size(sizes):
        sz = [int(v) for v in np.asarray(sizes).ravel()]
        for i, ax in enumerate(axes):
            scl[ax] = sz[i] / shape[ax]
            out[ax] = sz[i]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(scl[ax] for ax in axes)
            for ax in axes:
                scl[ax] = s
                out[ax] = int(s * shape[ax] + 0.5)
    else:
        sc = [float(v) for v in np.asarray(scales).ravel()]
        for i, ax in enumerate(axes):
            scl[ax] = sc[i]
            out[ax] = int(np.floor(shape[ax] * sc[i]))
    return out, scl, rois


def resize(attrs: dict, x: np.ndarray, roi=None, scales=None, sizes=None) -> np.ndarray:
    """The Resize operator on a numpy array (any rank, any numeric dtype)."""
    out, scl, rois = output_geometry(attrs, x.shape, roi, scales, sizes)
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest = attrs.get("mode", "nearest") == "nearest"
    y = x if nearest else x.astype(np.float64)
    outside = np.zeros((1,) * x.ndim, bool)
    for ax in range(x.ndim):
        if out[ax] == x.shape[ax] and scl[ax] == 1.0 and (ctm != "tf_crop_and_resize" or rois[ax] in (None, (0.0, 1.0))):
            continue
        if out[ax] == 0 or x.shape[ax] == 0:
            y = np.zeros(y.shape[:ax] + (out[ax],) + y.shape[ax + 1:], y.dtype)
            continue
        src = source_coords(ctm, out[ax], x.shape[ax], scl[ax], rois[ax])
        w = axis_weights(attrs, src, x.shape[ax], scl[ax])
        if nearest:
            y = np.take(y, w.argmax(axis=1), axis=ax)
        else:
            y = np.moveaxis(np.tensordot(y, w, axes=([ax], [1])), -1, ax)
        if ctm == "tf_crop_and_resize":
            bad = (src < 0) | (src > x.shape[ax] - 1)
            outside = outside | bad.reshape([-1 if i == ax else 1 for i in range(x.ndim)])
    if ctm == "tf_crop_and_resize" and outside.any():
        y = np.where(outside, np.float64(attrs.get("extrapolation_value", 0.0)), y)
    if nearest and not (ctm == "tf_crop_and_resize" and outside.any()):
        return y
    if np.issubdtype(x.dtype, np.integer):
        info = np.iinfo(x.dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(x.dtype)
    return np.asarray(y).astype(x.dtype)
