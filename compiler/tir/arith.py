"""Index arithmetic for lowering: constant-folding builders, substitution and linear forms with bounds."""
from __future__ import annotations

from compiler.schedule.errors import LowerError
from compiler.te.expr import AluCall, Binary, Call, Cast, Const, Expr, IterVar, Load, Reduce, Select, Var, walk


def pow2_pieces(n: int, widest: int = 64) -> list[int]:
    """``n`` as a sum of powers of two, largest first, none above ``widest`` (how the LLVM code generator splits a
    vectorized loop of ``n`` lanes: LLVM's optimizer mishandles some odd vector widths)."""
    out = []
    while n:
        p = min(widest, 1 << (n.bit_length() - 1))
        out.append(p)
        n -= p
    return out


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
    """``const + sum(coef * atom)``; an atom is a Var or an opaque (non-linear) expression. The CPU/GPU lowering
    and the accelerator's (:mod:`compiler.tir.accel`, :func:`to_affine` forms over loop variables) share it."""

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

    def coef(self, v: Expr) -> int:
        return self.coefs.get(v, 0)

    def bounds(self, extents: dict) -> tuple[int, int]:
        """Min and max over ``0 <= v < extents[v]`` for every atom (all of them variables)."""
        lo = hi = self.const
        for v, k in self.coefs.items():
            span = k * (extents[v] - 1)
            lo += min(0, span)
            hi += max(0, span)
        return lo, hi

    def __repr__(self) -> str:
        terms = [f"{k}*{getattr(v, 'name', v)}" for v, k in self.coefs.items()]
        return " + ".join(terms + [str(self.const)]) if terms else str(self.const)

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


def to_affine(e: Expr, env: dict) -> Linear:
    """``e`` as an affine form over loop variables, each variable replaced by ``env[var]`` (a Linear); LowerError
    naming what is not affine (the accelerator's indices must be: only +, - and * by constants)."""
    if isinstance(e, Const):
        return Linear(e.value)
    if isinstance(e, (Var, IterVar)):
        if e not in env:
            raise LowerError(f"index uses variable {e.name}, which is not a loop of this stage")
        return env[e]
    if isinstance(e, Cast):
        return to_affine(e.a, env)
    if isinstance(e, Binary):
        if e.op in ("add", "sub"):
            b = to_affine(e.b, env)
            return to_affine(e.a, env) + (b if e.op == "add" else b.scale(-1))
        if e.op == "mul":
            a, b = to_affine(e.a, env), to_affine(e.b, env)
            if not a.coefs:
                return b.scale(a.const)
            if not b.coefs:
                return a.scale(b.const)
    raise LowerError(f"index expression {e!r} is not affine in the loop variables (only +, - and * by constants)")


def var_ranges_bounds(f: Linear, ranges: dict) -> tuple[int, int] | None:
    """``(lo, hi)`` of ``f`` given ``ranges`` (``var -> extent``, each var in ``[0, extent)``); ``None`` if an atom
    is unbounded (atoms may be vars or floordiv/floormod of bounded forms by positive constants)."""
    lo = hi = f.const
    for k, c in f.coefs.items():
        b = atom_bounds(k, ranges)
        if b is None:
            return None
        lo += min(c * b[0], c * b[1])
        hi += max(c * b[0], c * b[1])
    return lo, hi


def atom_bounds(a: Expr, ranges: dict) -> tuple[int, int] | None:
    if isinstance(a, Var):
        return (0, ranges[a] - 1) if a in ranges else None
    if isinstance(a, Binary) and a.op in ("floordiv", "floormod") and isinstance(a.b, Const) \
            and isinstance(a.b.value, int) and a.b.value > 0:
        b = var_ranges_bounds(linear(a.a), ranges)
        if b is None:
            return None
        c = a.b.value
        if a.op == "floordiv":
            return b[0] // c, b[1] // c
        return (b[0], b[1]) if 0 <= b[0] and b[1] < c else (0, c - 1)
    if isinstance(a, Binary) and a.op in ("min", "max"):
        x, y = var_ranges_bounds(linear(a.a), ranges), var_ranges_bounds(linear(a.b), ranges)
        if x is None or y is None:
            return None
        f = min if a.op == "min" else max
        return f(x[0], y[0]), f(x[1], y[1])
    return None


def atom_vars(atom: Expr) -> set:
    return {n for n in walk(atom) if isinstance(n, Var)}


def simplify(e: Expr, ranges: dict) -> Expr:
    """``e`` with ``floordiv``/``floormod`` by a positive constant resolved where the linear remainder provably lies in
    ``[0, c)`` (``ranges``: loop var -> extent), e.g. ``(jo*16 + ji) // 16 -> jo`` for ``ji < 16``."""
    if isinstance(e, Binary):
        a, b = simplify(e.a, ranges), simplify(e.b, ranges)
        if e.op in ("floordiv", "floormod") and isinstance(b, Const) and isinstance(b.value, int) and b.value > 0:
            c = b.value
            f = linear(a)
            q = Linear(f.const // c, {k: v // c for k, v in f.coefs.items() if v % c == 0})
            r = Linear(f.const % c, {k: v for k, v in f.coefs.items() if v % c != 0})
            bnd = var_ranges_bounds(r, ranges)
            if bnd is not None and bnd[0] >= 0 and bnd[1] < c:
                return (q if e.op == "floordiv" else r).to_expr()
        if e.op in ("add", "sub", "mul") and (a is not e.a or b is not e.b):
            return linear(Binary(e.op, a, b)).to_expr() if _is_index(a) and _is_index(b) else Binary(e.op, a, b)
        return Binary(e.op, a, b) if (a is not e.a or b is not e.b) else e
    if isinstance(e, Cast):
        a = simplify(e.a, ranges)
        return e if a is e.a else Cast(e.dtype, a)
    return e


def _is_index(e: Expr) -> bool:
    return e.dtype in ("int32", "int64") and all(not isinstance(n, Load) for n in walk(e))
