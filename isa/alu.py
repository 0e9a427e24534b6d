"""The ALU operation registry: each op declared once, with its opcode and exact integer semantics.

An op's semantics is a function ``fn(ops, a, b)`` written against a small set of
primitive operations ``ops`` (see :class:`NumpyOps`). The simulator evaluates it with
:class:`NumpyOps` on int64 arrays; the RTL evaluates the same function with an
Amaranth implementation of the primitives, so a newly registered op appears in the
simulator, the compiler and the hardware together. The result is wrapped to the
accumulator width by the caller (two's complement).

``a`` is the destination accumulator value, ``b`` the operand: another accumulator
element or the sign-extended 16-bit immediate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from isa.errors import EncodingError

#: Signed immediate width of ALU instructions.
IMM_BITS = 16


@dataclass(frozen=True)
class AluOp:
    """One ALU operation: ``name`` (upper case), ``opcode`` and ``fn(ops, a, b)``."""

    name: str
    opcode: int
    fn: Callable[[Any, Any, Any], Any]
    doc: str = ""


class NumpyOps:
    """Primitives on int64 numpy arrays holding ``width``-bit signed values."""

    def __init__(self, width: int):
        self.width = width

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        # operands are < 2**31 in magnitude: the int64 product is exact before the wrap
        return a * b

    def min(self, a, b):
        return np.minimum(a, b)

    def max(self, a, b):
        return np.maximum(a, b)

    def select(self, cond, a, b):
        return np.where(cond, a, b)

    def lt(self, a, b):
        return a < b

    def shr(self, a, s):
        """Arithmetic shift right by signed ``s`` (negative shifts left), amount clamped to width-1."""
        lim = self.width - 1
        s = np.clip(s, -lim, lim)
        right = np.right_shift(a, np.maximum(s, 0))
        left = np.left_shift(a, np.maximum(-s, 0))
        return np.where(s >= 0, right, left)


def wrap(values: np.ndarray, width: int) -> np.ndarray:
    """Two's-complement wrap of int64 ``values`` to ``width`` bits (result int64)."""
    if width in (8, 16, 32):  # integer casts wrap (two's complement): much faster than a modulo
        return np.asarray(values).astype(f"<i{width // 8}").astype(np.int64)
    if width == 64:
        return np.asarray(values, dtype=np.int64)
    mod = np.int64(1) << width
    half = np.int64(1) << (width - 1)
    return ((values + half) % mod) - half


_REGISTRY: dict[str, AluOp] = {}


def register_alu_op(name: str, opcode: int, fn: Callable[[Any, Any, Any], Any], doc: str = "") -> AluOp:
    """Declare a new ALU op. Names and opcodes must be unique; the opcode field widens as needed."""
    name = name.upper()
    if not name.isidentifier():
        raise ValueError(f"ALU op name {name!r} must be an identifier")
    if name in _REGISTRY:
        raise ValueError(f"ALU op {name} is already registered (opcode {_REGISTRY[name].opcode})")
    if not isinstance(opcode, int) or not 0 <= opcode < 256:
        raise ValueError(f"ALU opcode {opcode!r} must be an integer in 0..255")
    for op in _REGISTRY.values():
        if op.opcode == opcode:
            raise ValueError(f"ALU opcode {opcode} is already used by {op.name}")
    op = AluOp(name, opcode, fn, doc)
    _REGISTRY[name] = op
    return op


def unregister_alu_op(name: str) -> None:
    """Remove an op (for tests and experiments); the five built-in ops cannot be removed."""
    if name.upper() in BUILTIN_OPS:
        raise ValueError(f"{name} is a built-in ALU op and cannot be removed")
    _REGISTRY.pop(name.upper(), None)


def alu_ops() -> list[AluOp]:
    """All registered ops, by opcode."""
    return sorted(_REGISTRY.values(), key=lambda o: o.opcode)


def alu_op(key: str | int) -> AluOp:
    """Look an op up by name or opcode."""
    if isinstance(key, str):
        op = _REGISTRY.get(key.upper())
        if op is None:
            raise EncodingError(f"unknown ALU op {key!r}; known: {', '.join(o.name for o in alu_ops())}")
        return op
    for op in _REGISTRY.values():
        if op.opcode == key:
            return op
    raise EncodingError(f"unknown ALU opcode {key}; known: {', '.join(f'{o.name}={o.opcode}' for o in alu_ops())}")


def alu_opcode_bits() -> int:
    """Width of the ALU opcode field: at least 3, enough for the largest registered opcode."""
    top = max(o.opcode for o in _REGISTRY.values())
    return max(3, top.bit_length())


def evaluate(op: AluOp | str | int, a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """Exact result of ``op`` on ``width``-bit signed values ``a`` and ``b`` (int64 arrays)."""
    if not isinstance(op, AluOp):
        op = alu_op(op)
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    return wrap(np.asarray(op.fn(NumpyOps(width), a, b), dtype=np.int64), width)


register_alu_op("MIN", 0, lambda ops, a, b: ops.min(a, b), "dst = min(dst, src)")
register_alu_op("MAX", 1, lambda ops, a, b: ops.max(a, b), "dst = max(dst, src)")
register_alu_op("ADD", 2, lambda ops, a, b: ops.add(a, b), "dst = dst + src (wraps)")
register_alu_op("SHR", 3, lambda ops, a, b: ops.shr(a, b),
                "dst = dst >> src, arithmetic; a negative amount shifts left; amount clamped to acc_width-1")
register_alu_op("MUL", 4, lambda ops, a, b: ops.mul(a, b), "dst = dst * src (low acc_width bits)")
BUILTIN_OPS = frozenset(_REGISTRY)
