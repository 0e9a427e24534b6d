"""The ALU op declarations: each elementwise op declared once (:class:`AluDecl`), with its opcode,
exact integer semantics, timing and optional datapath / fast-executor overrides.

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

:func:`register_alu_op` builds and registers a declaration; :func:`register_alu_decl` takes a whole
:class:`AluDecl`. Both check it now (an elementwise function of the primitives, at most one ``mul``,
``ii == 1``) and raise ``ValueError`` naming what is wrong. Every ALU op shares the ALU instruction
format (:func:`isa.intrinsics.alu_fields`: the opcode field widens with the largest registered opcode).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from isa.declared_timing import ALU_TIMING, Timing
from isa.errors import EncodingError
from isa.requant import RECORD_BITS, Record, record_supported, requant_fn

#: Signed immediate width of ALU instructions.
IMM_BITS = 16


@dataclass(frozen=True)
class AluDecl:
    """One elementwise ALU op as a designer declares it: ``acc[dst] = fn(ops, acc[dst], b)``, wrapped.

    ``name`` (upper case) and ``opcode`` (the ALU format's ``alu_opcode`` field); ``fn(ops, a, b)`` the
    semantics on the primitives ``ops`` (:class:`NumpyOps` in the simulator, the RTL's Amaranth
    primitives in hardware); ``operand`` is where ``b`` comes from: ``"acc"`` (acc[src] or the
    immediate) or ``"wgt"`` (a :class:`isa.requant.Record` per output channel from wgt[src]; no
    immediate). ``timing``: initiation interval (must be 1) and pipeline depth (the contract and the
    RTL's pipeline stages read it). ``datapath(ops, a, b)``: an optional RTL-only form of ``fn`` (same
    result, e.g. a cheaper circuit), called with the Amaranth primitives instead of ``fn``.
    ``numpy_fn(a, b, width)``: an optional faster exact vectorized form of ``fn`` on int64 arrays
    (the result is wrapped to ``width`` bits by the caller).
    """

    name: str
    opcode: int
    fn: Callable[[Any, Any, Any], Any]
    doc: str = ""
    operand: str = "acc"
    timing: Timing = ALU_TIMING
    datapath: Callable[[Any, Any, Any], Any] | None = None
    numpy_fn: Callable[[np.ndarray, Any, int], np.ndarray] | None = None

    @property
    def semantics(self) -> Callable[[Any, Any, Any], Any]:
        return self.fn


#: The former name of :class:`AluDecl` (an ALU op *is* its declaration).
AluOp = AluDecl


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

    def stage(self, *values):
        """Identity (the RTL's stage boundaries are placed by its own primitives)."""
        return values[0] if len(values) == 1 else values

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


_REGISTRY: dict[str, AluDecl] = {}
_VERSION = [0]  # bumped by every (un)registration (alu_registry_version)


class _CountingOps(NumpyOps):
    """NumpyOps that count ``mul`` calls (the lane has one multiplier)."""

    def __init__(self, width: int):
        super().__init__(width)
        self.muls = 0

    def mul(self, a, b):
        self.muls += 1
        return super().mul(a, b)


def _mixed(rng, lo: int, hi: int, n: int) -> np.ndarray:
    """``n`` integers in [lo, hi): a third small (|v| < 300 or < 48 for narrow ranges), a third of 20 bits, a
    third over the whole range, so that rounding and carries are exercised and not everything saturates."""
    small = min(300, max(1, hi // 8)) if lo < 0 else min(hi, 48)
    parts = [rng.integers(max(lo, -small), min(hi, small), n), rng.integers(max(lo, -(1 << 20)), min(hi, 1 << 20), n),
             rng.integers(lo, hi, n)]
    return np.stack(parts, 1).reshape(-1)[:n].astype(np.int64)


def _trial_a(shape: tuple[int, ...]) -> np.ndarray:
    """The accumulator values a declaration is tried on: 32-bit extremes and corner cases, then mixed values."""
    corners = np.array([-(1 << 31), (1 << 31) - 1, -1, 0, 1, 7, -300, 4096, 123456, -99999, 65535, -65536],
                       dtype=np.int64)
    n = int(np.prod(shape))
    return np.concatenate([corners, _mixed(np.random.default_rng(1), -(1 << 31), 1 << 31, n - corners.size)]).reshape(shape)


def _trial_operand(decl: AluDecl, shape: tuple[int, ...]):
    rng = np.random.default_rng(0)
    n = int(np.prod(shape))
    if decl.operand == "wgt":
        from isa.requant import RECORD_FIELDS
        return Record(**{f.name: _mixed(rng, -(1 << (f.width - 1)) if f.signed else 0,
                                        1 << (f.width - 1) if f.signed else 1 << f.width, n).reshape(shape)
                         for f in RECORD_FIELDS})
    return _mixed(rng, -(1 << 31), 1 << 31, n).reshape(shape)


def check_alu_decl(decl: AluDecl) -> None:
    """ValueError naming what is wrong with ``decl`` (name, opcode, operand, timing, semantics)."""
    name = decl.name
    if not (isinstance(name, str) and name.isidentifier() and name == name.upper()):
        raise ValueError(f"ALU op name {name!r} must be an upper-case identifier")
    if not isinstance(decl.opcode, int) or isinstance(decl.opcode, bool) or not 0 <= decl.opcode < 256:
        raise ValueError(f"ALU opcode {decl.opcode!r} must be an integer in 0..255")
    if decl.operand not in ("acc", "wgt"):
        raise ValueError(f"ALU op {name}: operand must be 'acc' or 'wgt', got {decl.operand!r}")
    if not isinstance(decl.timing, Timing):
        raise ValueError(f"ALU op {name}: timing must be an isa.intrinsics.Timing, got {decl.timing!r}")
    why = decl.timing.problem()
    if why:
        raise ValueError(f"ALU op {name}: {why}")
    shape = (8, 32)
    a = _trial_a(shape)
    b = _trial_operand(decl, shape)
    results = {}
    for what, fn in (("fn", decl.fn), ("datapath", decl.datapath)):
        if fn is None:
            continue
        if not callable(fn):
            raise ValueError(f"ALU op {name}: {what} must be a function (ops, a, b) of the ALU primitives, got {fn!r}")
        ops = _CountingOps(32)
        try:
            val = fn(ops, a, b)
        except Exception as e:  # noqa: BLE001 - reported with the declaration's name
            raise ValueError(f"ALU op {name}: its {what}(ops, a, b) is not an elementwise function of the ALU "
                             f"primitives (isa.alu.NumpyOps: add, sub, mul, wrap, round_shift, min, max, select, lt, "
                             f"shr): evaluating it raised {type(e).__name__}: {e}") from None
        if not isinstance(val, np.ndarray) or val.shape != shape or val.dtype.kind not in "iub":
            got = f"{type(val).__name__} of shape {getattr(val, 'shape', '()')}"
            raise ValueError(f"ALU op {name}: its {what}(ops, a, b) must return one integer per element of a "
                             f"(an elementwise function), got {got} for a {shape} array")
        if ops.muls > 1:
            raise ValueError(f"ALU op {name}: its {what} multiplies {ops.muls} times; the ALU lane has one "
                             f"multiplier (call ops.mul at most once)")
        results[what] = wrap(val.astype(np.int64), 32)
    if decl.numpy_fn is not None:
        if not callable(decl.numpy_fn):
            raise ValueError(f"ALU op {name}: numpy_fn must be a function (a, b, width), got {decl.numpy_fn!r}")
        results["numpy_fn"] = wrap(np.asarray(decl.numpy_fn(a, b, 32), dtype=np.int64), 32)
    for what in ("datapath", "numpy_fn"):  # the other forms must compute the semantics
        if what in results and not np.array_equal(results[what], results["fn"]):
            k = int(np.flatnonzero(results[what] != results["fn"])[0])
            bk = {f: int(np.asarray(getattr(b, f)).reshape(-1)[k]) for f in vars(b)} if isinstance(b, Record) \
                else int(b.reshape(-1)[k])
            raise ValueError(f"ALU op {name}: its {what} gives {int(results[what].reshape(-1)[k])} but its fn gives "
                             f"{int(results['fn'].reshape(-1)[k])} for a={int(a.reshape(-1)[k])}, b={bk} (32-bit "
                             f"lanes); they must compute the same function")


def register_alu_decl(decl: AluDecl) -> AluDecl:
    """Register an ALU op declaration (checked by :func:`check_alu_decl`). Names and opcodes must be unique."""
    check_alu_decl(decl)
    if decl.name in _REGISTRY:
        raise ValueError(f"ALU op {decl.name} is already registered (opcode {_REGISTRY[decl.name].opcode})")
    for op in _REGISTRY.values():
        if op.opcode == decl.opcode:
            raise ValueError(f"ALU opcode {decl.opcode} is already used by {op.name}")
    _REGISTRY[decl.name] = decl
    _VERSION[0] += 1
    return decl


def register_alu_op(name: str, opcode: int, fn: Callable[[Any, Any, Any], Any], doc: str = "",
                    operand: str = "acc", *, timing: Timing = ALU_TIMING,
                    datapath: Callable[[Any, Any, Any], Any] | None = None,
                    numpy_fn: Callable[[np.ndarray, Any, int], np.ndarray] | None = None) -> AluDecl:
    """Declare and register a new ALU op (an :class:`AluDecl`). Names and opcodes must be unique; the opcode
    field widens as needed.

    ``operand="wgt"`` declares a record op (``b`` is an :class:`isa.requant.Record` read from wgt[src])."""
    name = name.upper() if isinstance(name, str) else name
    if not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f"ALU op name {name!r} must be an identifier")
    return register_alu_decl(AluDecl(name, opcode, fn, doc, operand, timing, datapath, numpy_fn))


def unregister_alu_op(name: str) -> None:
    """Remove an op (for tests and experiments); the built-in ops cannot be removed."""
    if name.upper() in BUILTIN_OPS:
        raise ValueError(f"{name} is a built-in ALU op and cannot be removed")
    if _REGISTRY.pop(name.upper(), None) is not None:
        _VERSION[0] += 1


def alu_registry_version() -> int:
    """Bumped by every (un)registration of an ALU op: caches keyed on the registry include it."""
    return _VERSION[0]


def alu_ops(cfg: "Any" = None) -> list[AluDecl]:
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
    val = op.numpy_fn(a, b, width) if op.numpy_fn is not None else op.fn(NumpyOps(width), a, b)
    return wrap(np.asarray(val, dtype=np.int64), width)


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
