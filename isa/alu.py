"""The ALU operation registry: each op declared once, with its opcode and exact integer semantics.

An op's semantics is a function ``fn(ops, a, b)`` written against a small set of
primitive operations ``ops`` (see :class:`NumpyOps`). The simulator evaluates it with
:class:`NumpyOps` on int64 arrays; the RTL evaluates the same function with an
Amaranth implementation of the primitives, so a newly registered op appears in the
simulator, the compiler and the hardware together. The result is wrapped to the
accumulator width by the caller (two's complement).

``a`` is the destination accumulator value, ``b`` the operand: another accumulator
element or the sign-extended 16-bit immediate (``operand="acc"``), or, for an op declared
with ``operand="wgt"`` (REQUANT), the per-output-channel parameter record read from the WGT
scratchpad at the src index (:mod:`isa.requant`).

The primitives are exact on ``width``-bit signed inputs; ``mul`` gives the full double-width
product, and the hardware has ONE multiplier per lane that every op shares, so an op may call
``mul`` at most once, on ``width``-bit operands (wrap first).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from isa.errors import EncodingError
from isa.requant import RECORD_BITS, Record, record_supported, requant_fn

#: Signed immediate width of ALU instructions.
IMM_BITS = 16


@dataclass(frozen=True)
class AluOp:
    """One ALU operation: ``name`` (upper case), ``opcode`` and ``fn(ops, a, b)``.

    ``operand`` is where ``b`` comes from: ``"acc"`` (acc[src] or the immediate) or ``"wgt"`` (a
    :class:`isa.requant.Record` per output channel from wgt[src]; no immediate).
    """

    name: str
    opcode: int
    fn: Callable[[Any, Any, Any], Any]
    doc: str = ""
    operand: str = "acc"


class NumpyOps:
    """Primitives on int64 numpy arrays holding ``width``-bit signed values."""

    def __init__(self, width: int):
        self.width = width

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        # operands are width-bit (<= 32): the int64 product is exact (the full double-width product)
        return a * b

    def wrap(self, a):
        """Two's-complement wrap to ``width`` bits."""
        return wrap(np.asarray(a, dtype=np.int64), self.width)

    def round_shift(self, a, s):
        """``floor((a + 2**(s-1)) / 2**s)`` for ``s`` in 1..63 (round half up), ``a`` for ``s == 0``.

        Computed as ``((a >> (s - 1)) + 1) >> 1``, which never overflows (the RTL does the same)."""
        s = np.asarray(s, dtype=np.int64)
        t = np.right_shift(a, np.maximum(s - 1, 0))
        return np.where(s > 0, np.right_shift(t + 1, 1), a)

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


def register_alu_op(name: str, opcode: int, fn: Callable[[Any, Any, Any], Any], doc: str = "",
                    operand: str = "acc") -> AluOp:
    """Declare a new ALU op. Names and opcodes must be unique; the opcode field widens as needed.

    ``operand="wgt"`` declares a record op (``b`` is an :class:`isa.requant.Record` read from wgt[src])."""
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
    if operand not in ("acc", "wgt"):
        raise ValueError(f"ALU op {name}: operand must be 'acc' or 'wgt', got {operand!r}")
    op = AluOp(name, opcode, fn, doc, operand)
    _REGISTRY[name] = op
    return op


def unregister_alu_op(name: str) -> None:
    """Remove an op (for tests and experiments); the built-in ops cannot be removed."""
    if name.upper() in BUILTIN_OPS:
        raise ValueError(f"{name} is a built-in ALU op and cannot be removed")
    _REGISTRY.pop(name.upper(), None)


def alu_ops(cfg: "Any" = None) -> list[AluOp]:
    """All registered ops, by opcode (with ``cfg``: only those ``cfg`` supports, see :func:`op_supported`)."""
    ops = sorted(_REGISTRY.values(), key=lambda o: o.opcode)
    return [o for o in ops if op_supported(o, cfg)] if cfg is not None else ops


def op_supported(op: AluOp | str | int, cfg: Any) -> bool:
    """Whether ``cfg`` has ``op``: every ``acc`` op; a ``wgt`` (record) op when a WGT row holds a record per
    output channel (``block_in * wgt_width >= 128``)."""
    op = op if isinstance(op, AluOp) else alu_op(op)
    return op.operand == "acc" or record_supported(cfg)


def unsupported_reason(op: AluOp, cfg: Any) -> str:
    """Why ``cfg`` lacks ``op`` (empty when it has it)."""
    if op_supported(op, cfg):
        return ""
    return (f"ALU.{op.name} reads a {RECORD_BITS}-bit parameter record per output channel from a WGT row, but config "
            f"{cfg.name!r} has block_in * wgt_width = {cfg.block_in * cfg.wgt_width} bits per channel")


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


def evaluate(op: AluOp | str | int, a: np.ndarray, b: "np.ndarray | Record", width: int) -> np.ndarray:
    """Exact result of ``op`` on ``width``-bit signed values ``a`` and ``b`` (int64 arrays; a Record of
    arrays broadcastable to ``a`` for a record op)."""
    if not isinstance(op, AluOp):
        op = alu_op(op)
    a = np.asarray(a, dtype=np.int64)
    if op.operand == "wgt":
        if not isinstance(b, Record):
            raise TypeError(f"ALU.{op.name} takes a parameter Record as its operand, got {type(b).__name__}")
    else:
        b = np.asarray(b, dtype=np.int64)
    return wrap(np.asarray(op.fn(NumpyOps(width), a, b), dtype=np.int64), width)


register_alu_op("MIN", 0, lambda ops, a, b: ops.min(a, b), "dst = min(dst, src)")
register_alu_op("MAX", 1, lambda ops, a, b: ops.max(a, b), "dst = max(dst, src)")
register_alu_op("ADD", 2, lambda ops, a, b: ops.add(a, b), "dst = dst + src (wraps)")
register_alu_op("SHR", 3, lambda ops, a, b: ops.shr(a, b),
                "dst = dst >> src, arithmetic; a negative amount shifts left; amount clamped to acc_width-1")
register_alu_op("MUL", 4, lambda ops, a, b: ops.mul(a, b), "dst = dst * src (low acc_width bits)")
register_alu_op("REQUANT", 5, requant_fn,
                "dst = clip(round_shift(wrap(dst + bias) * mult, shift) + zp, lo, hi), the per-channel record read "
                "from wgt[src] (isa/requant.py); no immediate", operand="wgt")
BUILTIN_OPS = frozenset(_REGISTRY)
