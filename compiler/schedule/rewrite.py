"""Expression rewriting used by the schedule primitives."""
from __future__ import annotations

from compiler.te.expr import AluCall, Binary, Call, Cast, Expr, Load, Reduce, Select
from compiler.te.tensor import Tensor


def replace_loads(e: Expr, old: Tensor, new: Tensor) -> Expr:
    """``e`` with every read of ``old`` turned into the same read of ``new``."""
    if isinstance(e, Load):
        idx = tuple(replace_loads(i, old, new) for i in e.indices)
        return Load(new if e.tensor is old else e.tensor, idx)
    if isinstance(e, Binary):
        return Binary(e.op, replace_loads(e.a, old, new), replace_loads(e.b, old, new))
    if isinstance(e, AluCall):
        return AluCall(e.op, replace_loads(e.a, old, new), replace_loads(e.b, old, new))
    if isinstance(e, Cast):
        return Cast(e.dtype, replace_loads(e.a, old, new))
    if isinstance(e, Call):
        return Call(e.name, replace_loads(e.a, old, new))
    if isinstance(e, Select):
        return Select(replace_loads(e.cond, old, new), replace_loads(e.a, old, new), replace_loads(e.b, old, new))
    if isinstance(e, Reduce):
        return Reduce(e.op, replace_loads(e.body, old, new), e.axes)
    return e
