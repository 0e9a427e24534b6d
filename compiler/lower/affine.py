"""Index expressions as affine forms ``const + sum(coef * var)`` over loop variables (:class:`compiler.tir.arith.Linear`,
the loop IR's linear forms), or an error naming what is not affine."""
from __future__ import annotations

from compiler.lower.errors import LowerError
from compiler.te.expr import Binary, Cast, Const, Expr, IterVar, Var
from compiler.tir.arith import Linear


def to_affine(e: Expr, env: dict) -> Linear:
    """``e`` as an affine form, with each variable replaced by ``env[var]`` (a Linear)."""
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
