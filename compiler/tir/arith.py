"""Index arithmetic for lowering: constant-folding builders, substitution and linear forms with bounds."""
from __future__ import annotations

from compiler.te.expr import AluCall, Binary, Call, Cast, Const, Expr, Load, Reduce, Select, Var, walk


def add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value + b.value, a.dtype)
    if isinstance(b, Const) and b.value == 0:
        return a
    if isinstance(a, Const) and a.value == 0:
        return b
    return Binary("add", a, b)


def sub(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const):
        return add(a, Const(-b.value, b.dtype))
    return Binary("sub", a, b)


def mul(a: Expr, c: int) -> Expr:
    if c == 1:
        return a
    if c == 0:
        return Const(0)
    if isinstance(a, Const):
        return Const(a.value * c, a.dtype)
    return Binary("mul", a, Const(c))


def floordiv(a: Expr, c: int) -> Expr:
    return a if c == 1 else Binary("floordiv", a, Const(c))


def floormod(a: Expr, c: int) -> Expr:
    return Const(0) if c == 1 else Binary("floormod", a, Const(c))


def flat_index(idx: list[Expr], shape: tuple[int, ...]) -> Expr:
    """Row-major flat index of ``idx`` in ``shape``."""
    out: Expr = Const(0)
    stride = 1
    for i, n in zip(reversed(idx), reversed(shape)):
        out = add(out, mul(i, stride))
        stride *= n
    return out


def substitute(e: Expr, env: dict, load=None) -> Expr:
    """``e`` with variables replaced from ``env`` and every tensor ``Load`` passed through ``load(load, new_indices)``."""
    if isinstance(e, Var):
        return env.get(e, e)
    if isinstance(e, Const):
        return e
    if isinstance(e, Binary):
        return Binary(e.op, substitute(e.a, env, load), substitute(e.b, env, load))
    if isinstance(e, Cast):
        return Cast(e.dtype, substitute(e.a, env, load))
    if isinstance(e, Call):
        return Call(e.name, substitute(e.a, env, load))
    if isinstance(e, Select):
        return Select(substitute(e.cond, env, load), substitute(e.a, env, load), substitute(e.b, env, load))
    if isinstance(e, Load):
        idx = tuple(substitute(i, env, load) for i in e.indices)
        return load(e, idx) if load is not None else Load(e.tensor, idx)
    if isinstance(e, Reduce):
        return Reduce(e.op, substitute(e.body, env, load), e.axes)
    if isinstance(e, AluCall):
        return AluCall(e.op, substitute(e.a, env, load), substitute(e.b, env, load))
    from compiler.tir.ir import BufLoad

    if isinstance(e, BufLoad):
        return BufLoad(e.buffer, substitute(e.index, env, load))
    raise TypeError(f"cannot substitute into {e!r}")


class Linear:
    """``const + sum(coef * atom)``; an atom is a Var or an opaque (non-linear) expression."""

    def __init__(self, const: int = 0, coefs: dict | None = None) -> None:
        self.const = const
        self.coefs = {k: v for k, v in (coefs or {}).items() if v != 0}

    def __add__(self, o: "Linear") -> "Linear":
        c = dict(self.coefs)
        for k, v in o.coefs.items():
            c[k] = c.get(k, 0) + v
        return Linear(self.const + o.const, c)

    def scale(self, s: int) -> "Linear":
        return Linear(self.const * s, {k: v * s for k, v in self.coefs.items()})

    def to_expr(self) -> Expr:
        out: Expr = Const(self.const)
        for k, v in self.coefs.items():
            out = add(out, mul(k, v))
        return out


def linear(e: Expr) -> Linear:
    """The linear form of an integer index expression (non-linear parts become opaque atoms)."""
    if isinstance(e, Const) and isinstance(e.value, int):
        return Linear(e.value)
    if isinstance(e, Var):
        return Linear(0, {e: 1})
    if isinstance(e, Binary):
        if e.op == "add":
            return linear(e.a) + linear(e.b)
        if e.op == "sub":
            return linear(e.a) + linear(e.b).scale(-1)
        if e.op == "mul":
            a, b = linear(e.a), linear(e.b)
            if not b.coefs:
                return a.scale(b.const)
            if not a.coefs:
                return b.scale(a.const)
    return Linear(0, {e: 1})


def var_ranges_bounds(f: Linear, ranges: dict) -> tuple[int, int] | None:
    """``(lo, hi)`` of ``f`` when every atom is a Var in ``ranges`` (``var -> extent``), else ``None``."""
    lo = hi = f.const
    for k, c in f.coefs.items():
        if not isinstance(k, Var) or k not in ranges:
            return None
        span = c * (ranges[k] - 1)
        lo += min(0, span)
        hi += max(0, span)
    return lo, hi


def atom_vars(atom: Expr) -> set:
    return {n for n in walk(atom) if isinstance(n, Var)}
