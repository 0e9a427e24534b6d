"""Tensor expression language: placeholders, computes, reductions, integer arithmetic."""
from compiler.te.errors import TeError
from compiler.te.evaluate import evaluate
from compiler.te.expr import (AluCall, Binary, Call, Cast, Const, Expr, IterVar, Load, Reduce, Select, Var, abs_, alu, cast, clip,
                              const, cos, erf, exp, floor, log, max_, min_, reduce_axis, round_, select, sin, sqrt, sum_,
                              tanh)
from compiler.te.tensor import ComputeOp, Tensor, compute, placeholder

sum = sum_  # noqa: A001 - te.sum mirrors the usual spelling
min = min_  # noqa: A001
max = max_  # noqa: A001

__all__ = ["TeError", "evaluate", "AluCall", "alu", "Binary", "Call", "Cast", "exp", "log", "sqrt", "tanh", "abs_", "floor",
           "round_", "erf", "sin", "cos", "Const", "Expr", "IterVar", "Load", "Reduce", "Select", "Var",
           "cast", "clip", "const", "max_", "min_", "reduce_axis", "select", "sum_", "sum", "min", "max",
           "ComputeOp", "Tensor", "compute", "placeholder"]
