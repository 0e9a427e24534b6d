"""Affine integer expressions ``const + sum(coef * var)`` over loop variables."""
from __future__ import annotations

from dataclasses import dataclass, field

from compiler.lower.errors import LowerError
from compiler.te.expr import Binary, Cast, Const, Expr, IterVar, Var


@dataclass(frozen=True)
class Affine:
    const: int = 0
    coefs: dict = field(default_factory=dict)

    @staticmethod
    def var(v: Var, coef: int = 1) -> "Affine":
        return Affine(0, {v: coef})

    def __add__(self, o: "Affine") -> "Affine":
        c = dict(self.coefs)
        for v, k in o.coefs.items():
            c[v] = c.get(v, 0) + k
        return Affine(self.const + o.const, {v: k for v, k in c.items() if k})

    def scale(self, s: int) -> "Affine":
        return Affine(self.const * s, {v: k * s for v, k in self.coefs.items() if k * s})

    def coef(self, v: Var) -> int:
        return self.coefs.get(v, 0)

    def bounds(self, extents: dict) -> tuple[int, int]:
        """Min and max over ``0 <= v < extents[v]`` for every variable."""
        lo = hi = self.const
        for v, k in self.coefs.items():
            span = k * (extents[v] - 1)
            lo += min(0, span)
            hi += max(0, span)
        return lo, hi

    def __repr__(self) -> str:
        terms = [f"{k}*{v.name}" for v, k in self.coefs.items()]
        return " + ".join(terms + [str(self.const)]) if terms else str(self.const)


def to_affine(e: Expr, env: dict) -> Affine:
    """``e`` as an affine form, with each variable replaced by ``env[var]`` (an Affine)."""
    if isinstance(e, Const):
        return Affine(e.value)
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
