"""Text assembly: one instruction per line, ``MNEMONIC field=value ... [deps=a,b]``.

Examples::

    LOAD.INP sram_base=0 dram_base=64 y_size=4 x_size=4 x_stride=8 y_pad0=1 deps=pop_next
    GEMM uop_bgn=0 uop_end=4 iter_out=2 iter_in=1 dst_factor_out=4 src_factor_out=4 deps=pop_prev,push_next
    ALU.MAX uop_bgn=0 uop_end=1 iter_out=16 iter_in=1 dst_factor_out=1 src_factor_out=1 imm=0 use_imm=1
    FINISH

Blank lines and text after ``#`` or ``;`` are ignored. Omitted fields are 0 / false.
:func:`disassemble` prints every field, so ``assemble(disassemble(x)) == x``.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Iterable

from isa.alu import alu_op
from isa.errors import AsmError, EncodingError
from isa.instructions import Alu, Deps, Finish, Gemm, Instruction, Load, MemType, Store
from isa.intrinsics import declarations, insn_class

_CLASSES = {"LOAD": Load, "STORE": Store, "ALU": Alu, "FINISH": Finish}  # + the declared tensor intrinsics
_BOOL_FIELDS = {"reset", "use_imm", "overwrite"}


def mnemonic(insn: Instruction) -> str:
    """The instruction's mnemonic: ``LOAD.INP``, ``STORE.OUT``, ``GEMM``, ``ALU.ADD``, ``FINISH``."""
    head = type(insn).__name__.upper()
    if isinstance(insn, Gemm):  # GEMM or another declared tensor intrinsic (DWMAC, ...)
        return insn.intrinsic.upper()
    if isinstance(insn, (Load, Store)):
        return f"{head}.{MemType(insn.mem).name}"
    if isinstance(insn, Alu):
        return f"{head}.{insn.op.upper()}"
    return head


def disassemble_one(insn: Instruction) -> str:
    parts = [mnemonic(insn)]
    for f in fields(insn):
        if f.name in ("deps", "mem", "op"):
            continue
        v = getattr(insn, f.name)
        parts.append(f"{f.name}={int(v)}")
    dep_names = insn.deps.names()
    if dep_names:
        parts.append("deps=" + ",".join(dep_names))
    return " ".join(parts)


def disassemble(insns: Iterable[Instruction], numbered: bool = False) -> str:
    """Text for a list of instructions (optionally with ``N:`` indices as comments)."""
    lines = []
    for i, insn in enumerate(insns):
        text = disassemble_one(insn)
        lines.append(f"{text}  # {i}" if numbered else text)
    return "\n".join(lines) + ("\n" if lines else "")


def _parse_int(text: str, lineno: int, name: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise AsmError(f"line {lineno}: field {name}={text!r} is not an integer") from None


def assemble_line(line: str, lineno: int = 1) -> Instruction | None:
    """Parse one line; None for a blank or comment line."""
    code = line.split("#", 1)[0].split(";", 1)[0].strip()
    if not code:
        return None
    tokens = code.split()
    head = tokens[0].upper()
    base, _, qual = head.partition(".")
    tensor = {d.format: d for d in declarations()}
    cls = _CLASSES.get(base)
    if cls is None and base in tensor:
        cls = insn_class(tensor[base])
    if cls is None:
        raise AsmError(f"line {lineno}: unknown mnemonic {tokens[0]!r}; expected one of "
                       f"LOAD.<MEM>, STORE.<MEM>, {', '.join(tensor)}, ALU.<OP>, FINISH")
    kwargs: dict[str, object] = {}
    if cls in (Load, Store):
        try:
            kwargs["mem"] = MemType[qual]
        except KeyError:
            raise AsmError(f"line {lineno}: {base} needs a memory type suffix, one of "
                           f"{', '.join(m.name for m in MemType)} (got {qual or 'none'!r})") from None
    elif cls is Alu:
        try:
            kwargs["op"] = alu_op(qual).name
        except EncodingError as exc:
            raise AsmError(f"line {lineno}: {exc}") from None
    elif qual:
        raise AsmError(f"line {lineno}: {base} takes no suffix (got {qual!r})")
    allowed = {f.name for f in fields(cls)} - {"deps", "mem", "op"}
    deps: dict[str, bool] = {}
    for tok in tokens[1:]:
        name, eq, value = tok.partition("=")
        if not eq:
            raise AsmError(f"line {lineno}: expected field=value, got {tok!r}")
        if name == "deps":
            for d in filter(None, value.split(",")):
                if d not in {f.name for f in fields(Deps)}:
                    raise AsmError(f"line {lineno}: unknown dependency flag {d!r}; "
                                   f"allowed: pop_prev, pop_next, push_prev, push_next")
                deps[d] = True
            continue
        if name not in allowed:
            raise AsmError(f"line {lineno}: {base} has no field {name!r}; fields: {', '.join(sorted(allowed))}")
        v = _parse_int(value, lineno, name)
        kwargs[name] = bool(v) if name in _BOOL_FIELDS else v
    for f in fields(cls):
        if f.name in allowed and f.name not in kwargs:
            kwargs[f.name] = False if f.name in _BOOL_FIELDS else 0
    return cls(deps=Deps(**deps), **kwargs)  # type: ignore[arg-type]


def assemble(text: str) -> list[Instruction]:
    """Parse assembly text into instructions."""
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        insn = assemble_line(line, lineno)
        if insn is not None:
            out.append(insn)
    return out
