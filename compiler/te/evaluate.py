"""A numpy interpreter for tensor expressions (the reference the tests compare hardware against)."""
from __future__ import annotations

import numpy as np

from compiler.te.errors import TeError
from compiler.te.expr import (AluCall, Binary, Call, Cast, Const, Expr, Load, Reduce, Select, Var, _bits, is_float,
                              is_unsigned)
from compiler.te.tensor import Tensor
from isa.alu import alu_op, evaluate as alu_evaluate
from isa.requant import Record, unpack_records
from isa.alu import wrap

_NP = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "bool": np.bool_, "float32": np.float32}
_MATH = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs, "floor": np.floor, "round": np.rint,
         "sin": np.sin, "cos": np.cos}


def _wrap(v: np.ndarray, dtype: str) -> np.ndarray:
    if is_float(dtype):
        return np.asarray(v).astype(np.float32)
    if dtype == "bool":
        return v.astype(bool)
    if is_unsigned(dtype):
        return np.asarray(v).astype(_NP[dtype]).astype(np.int64)
    return wrap(v, _bits(dtype))


def _eval(e: Expr, env: dict, values: dict) -> np.ndarray:
    if isinstance(e, Const):
        return np.float32(e.value) if is_float(e.dtype) else np.int64(e.value)
    if isinstance(e, Var):
        if e not in env:
            raise TeError(f"variable {e.name} is unbound")
        return env[e]
    if isinstance(e, Cast):
        a = _eval(e.a, env, values)
        if is_float(e.a.dtype) and not is_float(e.dtype):
            a = np.trunc(a).astype(np.int64)
        return _wrap(a, e.dtype)
    if isinstance(e, Call):
        a = np.asarray(_eval(e.a, env, values), np.float32)
        if e.name == "erf":
            import math
            return np.vectorize(math.erf, otypes=[np.float32])(a)
        return _MATH[e.name](a).astype(np.float32)
    if isinstance(e, Select):
        return np.where(_eval(e.cond, env, values), _eval(e.a, env, values), _eval(e.b, env, values))
    if isinstance(e, Load):
        arr = values[e.tensor]
        idx = [np.asarray(_eval(i, env, values)) for i in e.indices]
        shape = np.broadcast_shapes(*[i.shape for i in idx])
        idx = [np.broadcast_to(i, shape) for i in idx]
        ok = np.ones(shape, bool)
        for i, n in zip(idx, arr.shape):
            ok &= (i >= 0) & (i < n)
        safe = [np.where(ok, i, 0) for i in idx]
        return np.where(ok, arr[tuple(safe)].astype(np.float32 if is_float(e.dtype) else np.int64), 0)
    if isinstance(e, Binary):
        a, b = _eval(e.a, env, values), _eval(e.b, env, values)
        r = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
             "shr": lambda: np.right_shift(a, b), "shl": lambda: np.left_shift(a, b),
             "min": lambda: np.minimum(a, b), "max": lambda: np.maximum(a, b),
             "and": lambda: np.logical_and(a, b), "or": lambda: np.logical_or(a, b),
             "lt": lambda: a < b, "le": lambda: a <= b, "gt": lambda: a > b, "ge": lambda: a >= b,
             "eq": lambda: a == b, "ne": lambda: a != b, "div": lambda: np.true_divide(a, b),
             "floordiv": lambda: np.floor_divide(a, b), "floormod": lambda: np.mod(a, b)}[e.op]()
        return r if e.dtype == "bool" else _wrap(r, e.dtype)
    if isinstance(e, AluCall) and alu_op(e.op).operand == "wgt":
        # a record op: b = rec[..., o, 0] names WGT row o of an element; the op reads that whole row
        if not isinstance(e.b, Load):
            raise TeError(f"{e.op} reads a parameter record: its second operand must be a tensor read, got {e.b!r}")
        arr = values[e.b.tensor]
        idx = [np.asarray(_eval(i, env, values)) for i in e.b.indices[:-1]]
        shape = np.broadcast_shapes(*[i.shape for i in idx])
        rows = arr[tuple(np.broadcast_to(i, shape) for i in idx)]
        rec = unpack_records(rows, _bits(e.b.tensor.dtype))
        a = np.asarray(_eval(e.a, env, values), np.int64)
        shape = np.broadcast_shapes(a.shape, shape)
        rec = Record(**{k: np.broadcast_to(v, shape) for k, v in vars(rec).items()})
        return alu_evaluate(e.op, np.broadcast_to(a, shape), rec, 32)
    if isinstance(e, AluCall):
        a, b = _eval(e.a, env, values), _eval(e.b, env, values)
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        return alu_evaluate(e.op, a, b, 32)
    if isinstance(e, Reduce):
        raise TeError("te.sum is only allowed at the top of a compute body")
    raise TeError(f"cannot evaluate {e!r}")


def _compute(t: Tensor, values: dict) -> np.ndarray:
    op = t.op
    n = len(op.axes)
    grids = np.indices(t.shape, dtype=np.int64)
    env = {ax: grids[i] for i, ax in enumerate(op.axes)}
    if isinstance(op.body, Reduce):
        r = op.body.axes
        shape = t.shape + tuple(a.extent for a in r)
        env = {ax: np.arange(ax.extent).reshape([-1 if j == i else 1 for j in range(len(shape))])
               for i, ax in enumerate(op.axes + r)}
        v = np.broadcast_to(_eval(op.body.body, env, values), shape)
        red = tuple(range(n, n + len(r)))
        if op.body.op == "sum":
            out = v.sum(axis=red, dtype=np.float64 if is_float(t.dtype) else np.int64)
        else:
            out = (v.max if op.body.op == "max" else v.min)(axis=red)
    else:
        out = np.broadcast_to(_eval(op.body, env, values), t.shape)
    return _wrap(out, t.dtype).astype(_NP[t.dtype])


def evaluate(out: Tensor, inputs: dict[Tensor, np.ndarray]) -> np.ndarray:
    """Compute ``out`` from placeholder values with exact integer semantics (casts wrap)."""
    values: dict[Tensor, np.ndarray] = {}
    for t, v in inputs.items():
        v = np.asarray(v)
        if v.shape != t.shape:
            raise TeError(f"input {t.name}: expected shape {t.shape}, got {v.shape}")
        values[t] = v

    def visit(t: Tensor) -> None:
        if t in values:
            return
        if t.op is None:
            raise TeError(f"placeholder {t.name} has no value")
        for i in t.op.inputs:
            visit(i)
        values[t] = _compute(t, values)

    visit(out)
    return values[out]
