"""The arrays a built operator is called with, checked against its loop-IR function (shared by the ``llvm``
and ``cuda`` ops of :mod:`compiler.backend.build`)."""
from __future__ import annotations

import numpy as np

from compiler.tir.errors import TirError
from compiler.tir.ir import PrimFunc

NP_DTYPES = {"bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
             "float32": np.float32}


class OpInputError(TirError):
    """Arrays passed to a built operator do not match its placeholders (count, shape or dtype)."""


def check_inputs(func: PrimFunc, arrays: tuple) -> list[np.ndarray]:
    """The input arrays as C-contiguous numpy arrays, after checking count, dtype and shape against ``func``."""
    bufs = func.args[:func.num_inputs]
    if len(arrays) != len(bufs):
        raise OpInputError(f"{func.name}: expected {len(bufs)} input arrays ({', '.join(b.name for b in bufs)}), "
                           f"got {len(arrays)}")
    out = []
    for buf, a in zip(bufs, arrays):
        if not isinstance(a, np.ndarray):
            raise OpInputError(f"{func.name}: input {buf.name} must be a numpy array, got {type(a).__name__}")
        want = np.dtype(NP_DTYPES[buf.dtype])
        if a.dtype != want:
            raise OpInputError(f"{func.name}: input {buf.name} must have dtype {want.name}, got {a.dtype.name} "
                               f"(convert with .astype(np.{want.name}))")
        if a.shape != tuple(buf.shape):
            raise OpInputError(f"{func.name}: input {buf.name} must have shape {tuple(buf.shape)}, got {a.shape}")
        out.append(np.ascontiguousarray(a))
    return out


def check_outputs(func: PrimFunc, out) -> list[np.ndarray]:
    bufs = func.args[func.num_inputs:]
    if out is None:
        return [np.empty(b.shape, NP_DTYPES[b.dtype]) for b in bufs]
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(outs) != len(bufs):
        raise OpInputError(f"{func.name}: out= needs {len(bufs)} arrays, got {len(outs)}")
    for b, a in zip(bufs, outs):
        want = np.dtype(NP_DTYPES[b.dtype])
        if not isinstance(a, np.ndarray) or a.dtype != want or a.shape != tuple(b.shape) or not a.flags.c_contiguous \
                or not a.flags.writeable:
            raise OpInputError(f"{func.name}: out array for {b.name} must be a writeable C-contiguous {want.name} array "
                               f"of shape {tuple(b.shape)}")
    return outs
