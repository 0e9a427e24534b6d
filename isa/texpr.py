"""A small tensor-expression language for declaring what one micro-op of an intrinsic computes.

An intrinsic's semantics is a function of its operands (:class:`Operand`) and axes
(:class:`Axis`) that returns an :class:`Expr`: element reads ``op[a, b]``, products, sums and
reductions ``reduce_sum(expr, axes)``. It lives in ``isa`` (the bottom of the stack), so the
simulator evaluates it with numpy (:func:`evaluate`), the compiler's tensorizer compares a TE
body with it and the RTL elaborates it (``hw.intrinsic``) without importing each other.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Callable

import numpy as np

from isa.errors import ConfigError


@dataclass(frozen=True)
class Axis:
    """One iteration axis of an intrinsic and its extent (from ``HwConfig``)."""

    name: str
    extent: int


class Expr:
    """A node of an intrinsic's semantics."""

    def __mul__(self, other: "Expr") -> "Expr":
        return Mul(self, _expr(other, "*"))

    def __rmul__(self, other: "Expr") -> "Expr":
        return Mul(_expr(other, "*"), self)

    def __add__(self, other: "Expr") -> "Expr":
        return Add(self, _expr(other, "+"))

    def __radd__(self, other: "Expr") -> "Expr":
        return Add(_expr(other, "+"), self)


def _expr(v: object, op: str) -> Expr:
    if not isinstance(v, Expr):
        raise ConfigError(f"intrinsic semantics: operand of {op!r} is {v!r}, not a tensor expression "
                          f"(use operand[axes...], *, + and reduce_sum)")
    return v


@dataclass(frozen=True, eq=False)
class Operand:
    """A tensor operand: the scratchpad it lives in (``inp``, ``wgt`` or ``acc``), its axes and element bits.

    Indexing it with its axes (``wgt[o, i]``) reads one element in the semantics."""

    name: str
    scope: str
    axes: tuple[str, ...]
    bits: int

    def __getitem__(self, idx) -> "Access":
        idx = idx if isinstance(idx, tuple) else (idx,)
        names = []
        for a in idx:
            if not isinstance(a, Axis):
                raise ConfigError(f"intrinsic semantics: operand {self.name} is indexed by {a!r}; index it by the "
                                  f"intrinsic's axes ({', '.join(self.axes)})")
            names.append(a.name)
        if tuple(names) != self.axes:
            raise ConfigError(f"intrinsic semantics: operand {self.name} is declared over axes "
                              f"({', '.join(self.axes)}) but indexed by ({', '.join(names)})")
        return Access(self, tuple(names))


@dataclass(frozen=True, eq=False)
class Access(Expr):
    operand: Operand
    axes: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Mul(Expr):
    a: Expr
    b: Expr


@dataclass(frozen=True, eq=False)
class Add(Expr):
    a: Expr
    b: Expr


@dataclass(frozen=True, eq=False)
class ReduceSum(Expr):
    body: Expr
    axes: tuple[str, ...]


def reduce_sum(body: Expr, axes) -> ReduceSum:
    """``sum`` of ``body`` over ``axes`` (one Axis or a sequence of them)."""
    axes = axes if isinstance(axes, (tuple, list)) else (axes,)
    for a in axes:
        if not isinstance(a, Axis):
            raise ConfigError(f"intrinsic semantics: reduce_sum over {a!r}; reduce over the intrinsic's axes")
    return ReduceSum(_expr(body, "reduce_sum"), tuple(a.name for a in axes))


def products(e: Expr) -> tuple[list[list[Access]], tuple[str, ...]]:
    """``e`` as a sum of products of element reads, and its reduction axes.

    The multiply-accumulate form every tensor intrinsic has (``sum_r prod_k op_k[...]``);
    anything else is rejected with the node that does not fit."""
    red: tuple[str, ...] = ()
    if isinstance(e, ReduceSum):
        red, e = e.axes, e.body

    def terms(x: Expr) -> list[list[Access]]:
        if isinstance(x, Add):
            return terms(x.a) + terms(x.b)
        if isinstance(x, Mul):
            out = []
            for p in terms(x.a):
                for q in terms(x.b):
                    out.append(p + q)
            return out
        if isinstance(x, Access):
            return [[x]]
        raise ConfigError(f"intrinsic semantics: {type(x).__name__} inside the sum is not supported; the body "
                          f"must be a sum of products of operand elements")
    return terms(e), red


def evaluate(e: Expr, out_axes: tuple[str, ...], arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The value of ``e`` for a batch of micro-ops: ``arrays[name]`` is ``(n, *operand shape)`` int64;
    the result is ``(n, *out shape)`` int64 (exact, wrapping modulo 2**64)."""
    terms, red = products(e)
    letters = dict(zip(sorted({a for t in terms for acc in t for a in acc.axes} | set(out_axes)),
                       string.ascii_letters[1:]))
    total = None
    for t in terms:
        spec = ",".join("a" + "".join(letters[x] for x in acc.axes) for acc in t)
        spec += "->a" + "".join(letters[x] for x in out_axes)
        with np.errstate(over="ignore"):
            v = np.einsum(spec, *[arrays[acc.operand.name].astype(np.int64) for acc in t], dtype=np.int64)
            total = v if total is None else total + v
    assert total is not None
    return total


def trace(semantics: Callable[..., object], operands: dict[str, Operand], axes: dict[str, Axis],
          where: str) -> Expr:
    """Call a declaration's ``semantics(**operands, **axes)`` and check it returned a tensor expression."""
    try:
        e = semantics(**operands, **axes)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    except TypeError as err:
        raise ConfigError(f"{where}: semantics must be a function of the operands and axes by name "
                          f"({', '.join(list(operands) + list(axes))}): {err}") from None
    except Exception as err:  # noqa: BLE001 - any failure of the user's function is a bad declaration
        raise ConfigError(f"{where}: evaluating its semantics raised {type(err).__name__}: {err}; semantics must "
                          f"build a tensor expression from operand[axes...], *, + and reduce_sum") from None
    if not isinstance(e, Expr):
        raise ConfigError(f"{where}: semantics returned {e!r} ({type(e).__name__}), not a tensor expression; "
                          f"build it from operand[axes...], *, + and reduce_sum")
    return e
