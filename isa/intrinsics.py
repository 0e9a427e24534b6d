"""Tensor intrinsics: the computations the hardware performs in one micro-op, declared once.

A hardware designer declares an intrinsic with :class:`IntrinsicDecl` and
:func:`isa.declare.register_intrinsic`. One declaration gives:

* its **semantics**, a tensor expression (:mod:`isa.texpr`) over its own axes, whose extents come
  from ``HwConfig``: ``acc[out axes] (+)= semantics``;
* its **operands**: at most one ``inp`` and one ``wgt`` operand (the scratchpads' read ports) and
  the ``acc`` output. An operand smaller than its scratchpad's row is a *vector*: a row holds
  ``row elements / operand elements`` of them and the micro-op index counts vectors
  (index ``v`` is vector ``v % k`` of row ``v // k``);
* its **instruction fields**: every tensor intrinsic has the GEMM format's micro-op loop
  (``reset``, uop range, two loop levels, dst/src/wgt factors, ``overwrite``) plus the extra
  fields it declares; :mod:`isa.encoding` derives the format and checks it fits 128 bits
  (ConfigError naming the config and the widest field otherwise);
* its **timing**: initiation interval and pipeline depth (:mod:`isa.timing` reads them);
* an optional **Amaranth datapath generator** (``hw.intrinsic``); without one the RTL elaborates
  the semantics with its own multipliers. ``gemm_array`` datapaths share the GEMM multipliers.

:func:`intrinsics(cfg)` gives the :class:`TensorIntrinsic` instances for one config: every
registered declaration (GEMM and the depthwise ``dwmac`` built in) and one ALU intrinsic per
registered ALU op declaration (:class:`isa.alu.AluDecl`: the second declaration kind, an elementwise
op on the accumulator; its format is the ALU family's, :func:`alu_fields`). Every consumer treats the
declarations of a kind alike: the simulator executes micro-ops through ``numpy_fn`` (or a
declaration's optional ``executor`` hook: GEMM's dense BLAS path); the compiler tensorizes loop nests
by matching ``operands``/``output``/``reduce_axes``; the RTL builds its datapaths from them. Nothing
downstream branches on an intrinsic's name.
"""
from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from isa import texpr
from isa.alu import IMM_BITS, AluDecl, AluOp, alu_op, alu_opcode_bits, alu_ops, evaluate, wrap  # noqa: F401
from isa.declared_timing import ALU_TIMING, Timing  # noqa: F401 - ALU_TIMING: the ALU ops' default timing
from isa.errors import ConfigError
from isa.instructions import Gemm, Opcode
from isa.requant import Record, unpack_records
from isa.texpr import Axis, Expr, reduce_sum

if TYPE_CHECKING:
    from isa.config import HwConfig

#: Instruction opcodes owned by the fixed instructions (LOAD, STORE, FINISH) and by the ALU family.
RESERVED_OPCODES = {int(Opcode.LOAD): "LOAD", int(Opcode.STORE): "STORE", int(Opcode.FINISH): "FINISH",
                    int(Opcode.ALU): "ALU"}
#: Width of the instruction opcode field (isa.encoding.OPCODE_BITS).
OPCODE_SPACE = 8
SCOPES = ("inp", "wgt")


@dataclass(frozen=True)
class InsnField:
    """An extra instruction field of a declared intrinsic: ``bits`` an int or a function of ``HwConfig``."""

    name: str
    bits: int | Callable[["HwConfig"], int]
    signed: bool = False

    def width(self, cfg: "HwConfig") -> int:
        return int(self.bits(cfg) if callable(self.bits) else self.bits)


@dataclass(frozen=True)
class OperandDecl:
    """An input operand: name, scratchpad (``inp`` or ``wgt``) and the axes indexing it."""

    name: str
    scope: str
    axes: tuple[str, ...]


@dataclass(frozen=True)
class IntrinsicDecl:
    """A tensor intrinsic as a hardware designer declares it (see the module docstring).

    ``axes(cfg)`` gives the axes and extents; ``out_axes`` index the ``acc`` output (a full acc
    row: ``batch x block_out`` elements); ``semantics(**operands, **axes)`` returns the expression
    added to (or, with ``overwrite``, stored in) ``acc[out_axes]``. ``datapath`` is an Amaranth
    generator ``datapath(ctx)`` (``hw.intrinsic.DatapathContext``) returning the lanes' new
    values; ``numpy_fn(cfg)`` an optional faster exact batched implementation (the simulator
    otherwise evaluates the semantics). ``supported(cfg)`` says which configs build it.

    ``executor``: an optional whole-instruction fast path for the simulator, a factory
    ``executor(cfg, scratchpads)`` returning an object with ``execute(i, insn)`` (or its import path
    ``"module:attr"``, so that isa/ need not import the simulator); without one the simulator's generic
    executor runs the instruction through ``numpy_fn`` (GEMM's dense BLAS executor is its hook).
    ``insn_cls``: the instruction class to use instead of a generated :class:`Gemm` subclass (GEMM's
    is :class:`Gemm` itself); it must have the declaration's opcode and fields.
    """

    name: str
    opcode: int
    axes: Callable[["HwConfig"], dict[str, int]]
    operands: tuple[OperandDecl, ...]
    out_axes: tuple[str, ...]
    semantics: Callable[..., Expr]
    timing: Timing = field(default_factory=Timing)
    fields: tuple[InsnField, ...] = ()
    datapath: Callable[[Any], list] | None = None
    numpy_fn: Callable[["HwConfig"], Callable[..., np.ndarray]] | None = None
    supported: Callable[["HwConfig"], bool] = lambda cfg: True
    doc: str = ""
    executor: Callable[..., Any] | str | None = None
    insn_cls: type | None = None

    @property
    def format(self) -> str:
        """The instruction format's name (``isa.encoding.layouts``) and mnemonic."""
        return self.name.upper()


@dataclass(frozen=True)
class Operand:
    """A tensor operand of an intrinsic instance: scratchpad scope, index axes, element bits."""

    name: str
    scope: str  # "inp", "wgt", "acc" or "imm"
    axes: tuple[str, ...]
    bits: int


@dataclass(frozen=True)
class TensorIntrinsic:
    """One hardware tensor operation for one config.

    ``kind`` is the declaration kind: ``"tensor"`` (an :class:`IntrinsicDecl`, GEMM included: output +=
    the declared tensor expression) or ``"alu"`` (an :class:`isa.alu.AluDecl`: output = op(output,
    operand) elementwise). ``decl`` is the declaration; ``expr`` the human-readable form, ``tree`` the
    declared expression (tensor kind).
    """

    name: str
    kind: str
    extents: dict[str, int]
    inputs: tuple[Operand, ...]
    output: Operand
    reduce_axes: tuple[str, ...]
    expr: str
    numpy_fn: Callable[..., np.ndarray]
    alu_op: AluDecl | None = None
    decl: IntrinsicDecl | AluDecl | None = None
    tree: Expr | None = None
    vectors: dict[str, int] = field(default_factory=dict)  # operand name -> vectors per scratchpad row
    macs_per_uop: int = 0  # multiply-accumulates one micro-op does (GEMM: BATCH x BLOCK_IN x BLOCK_OUT)

    def shape(self, operand: Operand) -> tuple[int, ...]:
        return tuple(self.extents[a] for a in operand.axes)


# ----------------------------------------------------------------------------- registry
_DECLS: dict[str, IntrinsicDecl] = {}
_BUILTIN: set[str] = set()
_VERSION = [0]


def registry_version() -> int:
    """Bumped by every (un)registration: caches keyed on the declarations include it."""
    return _VERSION[0]


def declarations() -> list[IntrinsicDecl]:
    """Every registered tensor-intrinsic declaration, by opcode."""
    return sorted(_DECLS.values(), key=lambda d: d.opcode)


def declaration(name_or_opcode: str | int) -> IntrinsicDecl:
    """The declaration named (case-insensitive) or with that opcode; KeyError listing the registered ones."""
    for d in _DECLS.values():
        if (isinstance(name_or_opcode, str) and d.name == name_or_opcode.lower()) or d.opcode == name_or_opcode:
            return d
    raise KeyError(f"no tensor intrinsic {name_or_opcode!r}; registered: "
                   f"{', '.join(f'{d.name} (opcode {d.opcode})' for d in declarations())}")


def row_shape(cfg: "HwConfig", scope: str) -> tuple[int, ...]:
    """Element shape of one scratchpad row."""
    return {"inp": (cfg.batch, cfg.block_in), "wgt": (cfg.block_out, cfg.block_in),
            "acc": (cfg.batch, cfg.block_out)}[scope]


_CLASSES: dict[str, type] = {}


def insn_class(decl: IntrinsicDecl) -> type:
    """The instruction dataclass of ``decl``: the GEMM fields (a :class:`Gemm` subclass) plus its extra fields."""
    if decl.insn_cls is not None:
        return decl.insn_cls
    cls = _CLASSES.get(decl.name)
    if cls is None or cls.opcode != decl.opcode or getattr(cls, "_decl", None) is not decl:
        cls = make_dataclass(decl.name.capitalize(), [(f.name, int, 0) for f in decl.fields], bases=(Gemm,),
                             frozen=True, namespace={"opcode": decl.opcode, "intrinsic": decl.name, "_decl": decl,
                                                     "__doc__": decl.doc or f"The {decl.name} tensor instruction."})
        cls.__module__ = __name__
        _CLASSES[decl.name] = cls
    return cls


def instantiate(decl: IntrinsicDecl, cfg: "HwConfig") -> TensorIntrinsic:
    """The declaration for one config: checks its operands and semantics (ConfigError otherwise)."""
    where = f"intrinsic {decl.name} on HwConfig {cfg.name!r}"
    extents = dict(decl.axes(cfg))
    bad = {n: e for n, e in extents.items() if isinstance(e, bool) or not isinstance(e, (int, np.integer)) or e < 1}
    if bad:
        raise ConfigError(f"{where}: axis extents {bad} must be positive integers")
    axes = {n: Axis(n, int(e)) for n, e in extents.items()}
    scopes = [o.scope for o in decl.operands]
    for o in decl.operands:
        if o.scope not in SCOPES:
            raise ConfigError(f"{where}: operand {o.name} is in scope {o.scope!r}; inputs live in "
                              f"{' or '.join(SCOPES)} (the output is acc)")
        unknown = [a for a in o.axes if a not in axes]
        if unknown:
            raise ConfigError(f"{where}: operand {o.name} uses axes {unknown} that the intrinsic does not declare "
                              f"({', '.join(axes)})")
    for s in SCOPES:
        if scopes.count(s) > 1:
            raise ConfigError(f"{where}: {scopes.count(s)} operands in {s}; the {s} scratchpad has one read port")
    bits = {"inp": cfg.inp_width, "wgt": cfg.wgt_width}
    ops = {o.name: texpr.Operand(o.name, o.scope, tuple(o.axes), bits[o.scope]) for o in decl.operands}
    out = Operand("acc", "acc", tuple(decl.out_axes), cfg.acc_width)
    vectors: dict[str, int] = {}
    for o in list(decl.operands) + [OperandDecl("acc", "acc", tuple(decl.out_axes))]:
        n = int(np.prod([extents[a] for a in o.axes], dtype=np.int64)) if o.axes else 1
        row = int(np.prod(row_shape(cfg, o.scope)))
        if row % n or (o.scope == "acc" and n != row):
            need = "exactly one acc row" if o.scope == "acc" else f"a divisor of the {o.scope} row"
            raise ConfigError(f"{where}: operand {o.name} has {n} elements; it must be {need} "
                              f"({row} elements: {'x'.join(map(str, row_shape(cfg, o.scope)))})")
        vectors[o.name] = row // n
    tree = texpr.trace(decl.semantics, ops, axes, where)
    terms, red = texpr.products(tree)
    for t in terms:
        used = {a for acc in t for a in acc.axes}
        missing = [a for a in decl.out_axes if a not in used]
        free = [a for a in used if a not in decl.out_axes and a not in red]
        if missing or free:
            raise ConfigError(f"{where}: a product term uses axes {sorted(used)}; each term must use every output "
                              f"axis ({', '.join(decl.out_axes)}) and reduce the others (reduce_sum over {free})")
        if len(t) > 2:
            raise ConfigError(f"{where}: a product of {len(t)} elements; a micro-op multiplies two operands")
        unused = [a for a in red if a not in used]
        if unused:
            raise ConfigError(f"{where}: the term {' * '.join(_show(x) for x in t)} does not use reduction axis "
                              f"{', '.join(unused)}; summing it over {', '.join(unused)} would scale it by the "
                              f"extent - every term inside reduce_sum must use every reduced axis")
    out_n = int(np.prod([extents[a] for a in decl.out_axes], dtype=np.int64))
    macs = sum(out_n * int(np.prod([extents[a] for a in red], dtype=np.int64)) for t in terms if len(t) == 2)
    expr_text = f"acc[{', '.join(decl.out_axes)}] += {_show(tree)}"
    numpy_fn = decl.numpy_fn(cfg) if decl.numpy_fn else _semantics_fn(cfg, tree, tuple(decl.out_axes), decl.operands)
    return TensorIntrinsic(
        name=decl.name, kind="tensor", extents=extents,
        inputs=tuple(Operand(o.name, o.scope, tuple(o.axes), bits[o.scope]) for o in decl.operands), output=out,
        reduce_axes=tuple(red), expr=expr_text, numpy_fn=numpy_fn, decl=decl, tree=tree, vectors=vectors,
        macs_per_uop=macs)


def _show(e: Expr) -> str:
    if isinstance(e, texpr.Access):
        return f"{e.operand.name}[{', '.join(e.axes)}]"
    if isinstance(e, texpr.Mul):
        return f"{_show(e.a)} * {_show(e.b)}"
    if isinstance(e, texpr.Add):
        return f"({_show(e.a)} + {_show(e.b)})"
    assert isinstance(e, texpr.ReduceSum)
    return f"sum[{', '.join(e.axes)}]({_show(e.body)})"


def _semantics_fn(cfg: "HwConfig", tree: Expr, out_axes: tuple[str, ...], operands) -> Callable[..., np.ndarray]:
    """Batched exact semantics: ``fn(acc (n, *out), *operand arrays (n, *shape)) -> new acc``, wrapped."""
    names = [o.name for o in operands]

    def fn(acc: np.ndarray, *arrays: np.ndarray) -> np.ndarray:
        val = texpr.evaluate(tree, out_axes, dict(zip(names, arrays)))
        with np.errstate(over="ignore"):
            return wrap(acc + val.reshape(acc.shape), cfg.acc_width)
    return fn


# ----------------------------------------------------------------------------- built-in declarations
def _gemm_numpy(cfg: "HwConfig") -> Callable[..., np.ndarray]:
    """GEMM's exact batched function as one matmul: acc (n,B,BO), inp (n,B,BI), wgt (n,BO,BI)."""
    acc_bits = cfg.acc_width
    # float64 matmul is exact while every partial sum stays below 2**53; otherwise use int64,
    # whose wrap-around modulo 2**64 is still exact modulo 2**acc_width.
    exact_in_float = (cfg.inp_width - 1) + (cfg.wgt_width - 1) + cfg.log_block_in < 53

    def fn(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray) -> np.ndarray:
        if exact_in_float:
            f64 = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731 - no copy when already float64
            prod = np.matmul(f64(inp), np.swapaxes(f64(wgt), -1, -2)).astype(np.int64)
        else:
            with np.errstate(over="ignore"):
                prod = np.matmul(inp.astype(np.int64), np.swapaxes(wgt, -1, -2).astype(np.int64))
        with np.errstate(over="ignore"):
            return wrap(acc + prod, acc_bits)
    return fn


def _gemm_datapath(ctx):
    """The GEMM array itself: ``acc[b, o] += sum_i inp[b, i] * wgt[o, i]``."""
    return ctx.gemm_array(ctx.elements("inp"), ctx.elements("wgt"))


GEMM = IntrinsicDecl(
    name="gemm", opcode=int(Opcode.GEMM),
    axes=lambda cfg: {"b": cfg.batch, "i": cfg.block_in, "o": cfg.block_out},
    operands=(OperandDecl("inp", "inp", ("b", "i")), OperandDecl("wgt", "wgt", ("o", "i"))),
    out_axes=("b", "o"),
    semantics=lambda inp, wgt, b, i, o: reduce_sum(inp[b, i] * wgt[o, i], i),
    timing=Timing(1, lambda cfg: cfg.gemm_pipeline),
    datapath=_gemm_datapath, numpy_fn=_gemm_numpy, executor="simulator.gemm:GemmExecutor", insn_cls=Gemm,
    doc="acc[b, o] += inp[b, i] * wgt[o, i] over BATCH x BLOCK_IN x BLOCK_OUT (the GEMM array)")


def _dwmac_datapath(ctx):
    """On the GEMM array's multipliers: inp row x diag(wgt vector) (``wgt'[o][i] = w[i]`` if o == i else 0)."""
    w = ctx.elements("wgt")  # [c]
    n = len(w)
    zero = ctx.const(0, ctx.bits("wgt"))
    return ctx.gemm_array(ctx.elements("inp"), [[w[i] if o == i else zero for i in range(n)] for o in range(n)])


DWMAC = IntrinsicDecl(
    name="dwmac", opcode=5,
    axes=lambda cfg: {"b": cfg.batch, "c": cfg.block_out},
    operands=(OperandDecl("inp", "inp", ("b", "c")), OperandDecl("wgt", "wgt", ("c",))),
    out_axes=("b", "c"),
    semantics=lambda inp, wgt, b, c: inp[b, c] * wgt[c],
    timing=Timing(1, lambda cfg: cfg.gemm_pipeline),
    datapath=_dwmac_datapath,
    supported=lambda cfg: cfg.block_in == cfg.block_out,
    doc="Depthwise vector MAC: acc[b, c] += inp[b, c] * wgt[c] over BATCH x BLOCK_OUT channels; wgt is a "
        "vector of BLOCK_IN (= BLOCK_OUT) channel weights, BLOCK_OUT vectors per WGT row, the micro-op's wgt "
        "index counting vectors. Runs on the GEMM array's multipliers (weights on its diagonal).")

for _d in (GEMM, DWMAC):
    _DECLS[_d.name] = _d
    _BUILTIN.add(_d.name)


def alu_fields(cfg: "HwConfig") -> list[tuple]:
    """The ALU format's fields after the micro-op loop and dst factors, shared by every ALU op declaration
    (:class:`isa.alu.AluDecl`); ``alu_opcode`` is as wide as the largest registered op's opcode needs."""
    return [("src_factor_out", cfg.acc_idx_bits), ("src_factor_in", cfg.acc_idx_bits),
            ("alu_opcode", alu_opcode_bits()), ("use_imm", 1), ("imm", IMM_BITS, True)]



def tensor_fields(cfg: "HwConfig", decl: IntrinsicDecl) -> list[tuple]:
    """The fields of a tensor intrinsic's format after the micro-op loop and dst factors: src/wgt factors,
    overwrite, then the declaration's extra fields."""
    return [("src_factor_out", cfg.inp_idx_bits), ("src_factor_in", cfg.inp_idx_bits),
            ("wgt_factor_out", cfg.wgt_idx_bits), ("wgt_factor_in", cfg.wgt_idx_bits), ("overwrite", 1)] + [
        (f.name, f.width(cfg), f.signed) for f in decl.fields]


def timing_of(insn: object) -> Timing:
    """The declared timing of a tensor instruction (its :class:`IntrinsicDecl`) or an ALU instruction (its
    op's :class:`isa.alu.AluDecl`)."""
    name = getattr(insn, "intrinsic", None)
    return alu_op(insn.op).timing if name is None else declaration(name).timing  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- instances per config
def gemm_intrinsic(cfg: "HwConfig") -> TensorIntrinsic:
    """``acc[b, o] += sum_i inp[b, i] * wgt[o, i]`` over BATCH x BLOCK_IN x BLOCK_OUT."""
    return instantiate(GEMM, cfg)


def record_lanes(rows: np.ndarray, wgt_width: int) -> Record:
    """Records of WGT elements ``(n, block_out, block_in)`` as fields of shape ``(n, 1, block_out)`` (every batch lane)."""
    r = unpack_records(rows, wgt_width)
    return Record(**{k: v[:, None, :] for k, v in vars(r).items()})


def alu_intrinsic(cfg: "HwConfig", op: AluDecl) -> TensorIntrinsic:
    """``acc[b, o] = op(acc[b, o], src[b, o] or imm)`` for one registered ALU op; for a record op (REQUANT)
    ``acc[b, o] = op(acc[b, o], record(wgt[src][o]))``."""
    width = cfg.acc_width
    if op.operand == "wgt":
        def rfn(dst: np.ndarray, rows: np.ndarray, inverse: np.ndarray | None = None) -> np.ndarray:
            """dst (n, B, BO) int64, rows (n, BO, BI) WGT elements -> new acc (n, B, BO). With ``inverse``,
            ``rows`` holds each distinct WGT element once and iteration k uses ``rows[inverse[k]]`` (the records
            are unpacked once per element, not once per iteration)."""
            rec = record_lanes(rows, cfg.wgt_width)
            if inverse is not None:
                rec = Record(**{k: v.take(inverse, axis=0) for k, v in vars(rec).items()})
            return evaluate(op, dst, rec, width)

        return TensorIntrinsic(
            name=f"alu_{op.name.lower()}", kind="alu", extents={"b": cfg.batch, "o": cfg.block_out, "i": cfg.block_in},
            inputs=(Operand("rec", "wgt", ("o", "i"), cfg.wgt_width),),
            output=Operand("acc", "acc", ("b", "o"), width), reduce_axes=(),
            expr=f"acc[b, o] = {op.name}(acc[b, o], record(wgt[src][o, :]))", numpy_fn=rfn, alu_op=op, decl=op)

    def fn(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
        return evaluate(op, dst, src, width)

    return TensorIntrinsic(
        name=f"alu_{op.name.lower()}",
        kind="alu",
        extents={"b": cfg.batch, "o": cfg.block_out},
        inputs=(Operand("src", "acc", ("b", "o"), width),),
        output=Operand("acc", "acc", ("b", "o"), width),
        reduce_axes=(),
        expr=f"acc[b, o] = {op.name}(acc[b, o], src[b, o] | imm)",
        numpy_fn=fn,
        alu_op=op,
        decl=op,
    )


def tensor_declarations(cfg: "HwConfig") -> list[IntrinsicDecl]:
    """The registered tensor-intrinsic declarations ``cfg`` supports, by opcode."""
    return [d for d in declarations() if d.supported(cfg)]


def intrinsics(cfg: "HwConfig") -> dict[str, TensorIntrinsic]:
    """Every intrinsic of ``cfg``: each supported tensor declaration and one ALU intrinsic per registered op
    that ``cfg`` supports."""
    out = {d.name: instantiate(d, cfg) for d in tensor_declarations(cfg)}
    for op in alu_ops(cfg):
        intr = alu_intrinsic(cfg, op)
        out[intr.name] = intr
    return out
