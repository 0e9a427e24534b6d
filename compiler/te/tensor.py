"""Tensors: placeholders (inputs) and computes (index lambda over output axes)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

from compiler.te.errors import TeError
from compiler.te.expr import DTYPES, Expr, ExprLike, IterVar, Load, Reduce, as_expr, walk


@dataclass(eq=False)
class Tensor:
    """A named n-d integer tensor; ``op`` is ``None`` for placeholders, else its ``ComputeOp``."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    op: "ComputeOp | None" = None

    def __getitem__(self, idx) -> Load:
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != len(self.shape):
            raise TeError(f"{self.name} has {len(self.shape)} dims {self.shape}, indexed with {len(idx)} indices")
        return Load(self, tuple(as_expr(i) for i in idx))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"

    __hash__ = object.__hash__


@dataclass(eq=False)
class ComputeOp:
    """``out[axes] = body``; ``reduce_axes`` are those of the body's ``sum`` (if any)."""

    axes: tuple[IterVar, ...]
    body: Expr
    reduce_axes: tuple[IterVar, ...] = field(default=())

    @property
    def inputs(self) -> list[Tensor]:
        seen: list[Tensor] = []
        for n in walk(self.body):
            if isinstance(n, Load) and n.tensor not in seen:
                seen.append(n.tensor)
        return seen


def placeholder(shape: tuple[int, ...], dtype: str = "int8", name: str = "data") -> Tensor:
    """An input tensor."""
    shape = tuple(int(s) for s in shape)
    if not shape or any(s <= 0 for s in shape):
        raise TeError(f"placeholder {name!r}: shape must be non-empty positive ints, got {shape}")
    if dtype not in DTYPES:
        raise TeError(f"placeholder {name!r}: dtype {dtype!r} not in {DTYPES}")
    return Tensor(name, shape, dtype)


def compute(shape: tuple[int, ...], fcompute: Callable[..., ExprLike], name: str = "compute",
            dtype: str | None = None, axis_names: tuple[str, ...] | None = None) -> Tensor:
    """A tensor defined by ``fcompute(*axes)`` over ``shape``; a top-level ``te.sum`` makes it a reduction."""
    shape = tuple(int(s) for s in shape)
    sig = inspect.signature(fcompute).parameters.values()
    params = [p.name for p in sig if p.kind != p.VAR_POSITIONAL]
    if any(p.kind == p.VAR_POSITIONAL for p in sig):
        params = [f"i{k}" for k in range(len(shape))]
    if len(params) != len(shape):
        raise TeError(f"compute {name!r}: the lambda takes {len(params)} indices but the shape {shape} has {len(shape)} dims")
    names = axis_names or tuple(params)
    axes = tuple(IterVar(n, s, "data") for n, s in zip(names, shape))
    body = as_expr(fcompute(*axes))
    reduce_axes: tuple[IterVar, ...] = ()
    if isinstance(body, Reduce):
        reduce_axes = body.axes
    for n in walk(body):
        if isinstance(n, Reduce) and n is not body:
            raise TeError(f"compute {name!r}: a reduction (te.sum/max/min with axis=) must be the outermost expression")
    if dtype is not None and dtype not in DTYPES:
        raise TeError(f"compute {name!r}: dtype {dtype!r} not in {DTYPES}")
    out_dtype = dtype or body.dtype
    if out_dtype == "bool":
        out_dtype = "int8"
    return Tensor(name, shape, out_dtype, ComputeOp(axes, body, reduce_axes))
