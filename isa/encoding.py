"""Bit-exact 128-bit instruction and 32-bit micro-op encodings, derived from ``HwConfig``.

Fields are packed from bit 0 upward in the order listed by :func:`layouts`; the
widths come from the config (scratchpad depths) and the ALU registry.
"""
from __future__ import annotations

from dataclasses import dataclass, fields as dc_fields
from functools import cached_property, lru_cache
from enum import IntEnum
from typing import TYPE_CHECKING, Iterable

import numpy as np

from isa.alu import alu_op, alu_opcode_bits, alu_ops, alu_registry_version
from isa.errors import ConfigError, EncodingError
from isa.intrinsics import (RESERVED_OPCODES, alu_fields, insn_class, registry_version, tensor_declarations,
                            tensor_fields)
from isa.instructions import Alu, Deps, Finish, Gemm, Instruction, Load, MemType, Opcode, Store, Uop

if TYPE_CHECKING:
    from isa.config import HwConfig

INSN_BYTES = 16
UOP_BYTES = 4
OPCODE_BITS = 3
MEMTYPE_BITS = 3
DRAM_ADDR_BITS = 32
SIZE_BITS = 16
PAD_BITS = 4
LOOP_BITS = 14
#: The LOAD pad value needs at least an int8 (an activation zero point).
PAD_VALUE_MIN_BITS = 8
DEP_FIELDS = ("pop_prev", "pop_next", "push_prev", "push_next")


@dataclass(frozen=True)
class Field:
    name: str
    lo: int
    width: int
    signed: bool = False

    @property
    def hi(self) -> int:
        """Highest bit (inclusive)."""
        return self.lo + self.width - 1

    @property
    def lo_value(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def hi_value(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1


@dataclass(frozen=True)
class Layout:
    """The fields of one format, in bit order, and the word size."""

    name: str
    fields: tuple[Field, ...]
    bits: int

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def used_bits(self) -> int:
        return sum(f.width for f in self.fields)

    @cached_property
    def encode_plan(self) -> tuple[tuple[tuple[str, int, int, int, int], ...], tuple[tuple[str, int], ...],
                                   tuple[int, int, int, int, int, int]]:
        """For :func:`encode`: the fields read from the instruction's attributes (name, lo, mask, lowest and highest
        value), the dependency flags' bits, and the lo/width of opcode, memory type and ALU opcode (-1: absent)."""
        special = {"opcode", "mem", "alu_opcode", *DEP_FIELDS}
        attrs = tuple((f.name, f.lo, (1 << f.width) - 1, f.lo_value, f.hi_value)
                      for f in self.fields if f.name not in special)
        deps = tuple((f.name, f.lo) for f in self.fields if f.name in DEP_FIELDS)
        at = {f.name: (f.lo, f.width) for f in self.fields}
        fixed = tuple(v for n in ("opcode", "mem", "alu_opcode") for v in at.get(n, (-1, 0)))
        return attrs, deps, fixed  # type: ignore[return-value]


def _pack(name: str, spec: list[tuple[str, int] | tuple[str, int, bool]], bits: int, cfg_name: str,
          declared: tuple[str, ...] = ()) -> Layout:
    """Fields packed from bit 0; ConfigError when they pass ``bits`` (``declared``: a declaration's extra fields)."""
    out, lo = [], 0
    for item in spec:
        fname, width = item[0], item[1]
        signed = len(item) > 2 and item[2]
        out.append(Field(fname, lo, width, signed))
        lo += width
    if lo > bits:
        widest = max(out, key=lambda f: f.width)
        extra = [f for f in out if f.name in declared]
        hint = "reduce the scratchpad sizes"
        if extra:
            room = bits - (lo - sum(f.width for f in extra))
            hint = (f"the declared extra fields ({', '.join(f'{f.name}: {f.width}' for f in extra)} bits) take "
                    f"{sum(f.width for f in extra)}, {room} are left for them: narrow them, or {hint}")
        raise ConfigError(
            f"HwConfig {cfg_name!r}: the {name} format needs {lo} bits but a word has {bits}; "
            f"its widest field is {widest.name} ({widest.width} bits) - {hint}")
    return Layout(name, tuple(out), bits)


def _common() -> list[tuple[str, int]]:
    return [("opcode", OPCODE_BITS)] + [(d, 1) for d in DEP_FIELDS]


def layouts(cfg: "HwConfig") -> dict[str, Layout]:
    """The formats for ``cfg``: MEM (LOAD/STORE), ALU, FINISH, UOP and one per tensor-intrinsic declaration
    ``cfg`` supports (GEMM, DWMAC, ...: :mod:`isa.intrinsics`), derived from the declarations."""
    versions = (alu_registry_version(), registry_version())
    hit = _RECENT.get(id(cfg))  # by identity first: hashing a config costs more than encoding a field
    if hit is not None and hit[0] is cfg and hit[1] == versions:
        return hit[2]
    out = _layouts(cfg, alu_opcode_bits(), registry_version())
    if len(_RECENT) >= 64:
        _RECENT.clear()
    _RECENT[id(cfg)] = (cfg, versions, out)  # holds cfg, so its id is not reused while the entry lives
    return out


_RECENT: dict[int, tuple] = {}


@lru_cache(maxsize=64)
def _layouts(cfg: "HwConfig", op_bits: int, _version: int) -> dict[str, Layout]:
    loop = [("reset", 1), ("uop_bgn", cfg.uop_idx_bits), ("uop_end", cfg.uop_idx_bits + 1),
            ("iter_out", LOOP_BITS), ("iter_in", LOOP_BITS)]
    dst = [("dst_factor_out", cfg.acc_idx_bits), ("dst_factor_in", cfg.acc_idx_bits)]
    mem = _common() + [("mem", MEMTYPE_BITS), ("sram_base", cfg.sram_idx_bits), ("dram_base", DRAM_ADDR_BITS),
                       ("y_size", SIZE_BITS), ("x_size", SIZE_BITS), ("x_stride", SIZE_BITS),
                       ("y_pad0", PAD_BITS), ("y_pad1", PAD_BITS), ("x_pad0", PAD_BITS), ("x_pad1", PAD_BITS)]
    alu = _common() + loop + dst + alu_fields(cfg)
    uop = [("dst", cfg.uop_dst_bits), ("src", cfg.uop_src_bits), ("wgt", cfg.uop_wgt_bits)]
    tensor = {d.format: _pack(d.format, _common() + loop + dst + tensor_fields(cfg, d), 128, cfg.name,
                              tuple(f.name for f in d.fields)) for d in tensor_declarations(cfg)}
    out = {
        **tensor,
        "ALU": _pack("ALU", alu, 128, cfg.name),
        "FINISH": _pack("FINISH", _common(), 128, cfg.name),
        "UOP": _pack("UOP", uop, 32, cfg.name),
    }
    mem.append(("pad_value", pad_value_bits(cfg, sum(f[1] for f in mem), 128), True))
    return {"MEM": _pack("MEM", mem, 128, cfg.name), **out}


def pad_value_bits(cfg: "HwConfig", used: int, bits: int) -> int:
    """Width of the MEM format's signed ``pad_value`` field: ``inp_width`` bits when they fit the word after
    the other ``used`` bits, else the spare bits, which must hold at least an int8 (ConfigError otherwise)."""
    spare = bits - used
    if spare < PAD_VALUE_MIN_BITS:
        raise ConfigError(
            f"HwConfig {cfg.name!r}: the MEM format needs {used} bits before its pad_value field, leaving {spare} of "
            f"{bits}; pad_value needs >= {PAD_VALUE_MIN_BITS} - reduce the scratchpad sizes (sram_base is "
            f"{cfg.sram_idx_bits} bits)")
    return min(cfg.inp_width, spare)


def _put(word: int, f: Field, value: int, what: str) -> int:
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise EncodingError(f"{what} field {f.name} must be an integer, got {value!r}")
    value = int(value)
    if not f.lo_value <= value <= f.hi_value:
        kind = "signed " if f.signed else ""
        raise EncodingError(
            f"{what} field {f.name}={value} does not fit its {f.width}-bit {kind}field "
            f"(allowed {f.lo_value}..{f.hi_value})")
    return word | ((value & ((1 << f.width) - 1)) << f.lo)


def _get(word: int, f: Field) -> int:
    v = (word >> f.lo) & ((1 << f.width) - 1)
    if f.signed and v >> (f.width - 1):
        v -= 1 << f.width
    return v


def _layout_name(insn: Instruction) -> str:
    if isinstance(insn, (Load, Store)):
        return "MEM"
    if isinstance(insn, Gemm):
        return insn.intrinsic.upper()
    return type(insn).__name__.upper()


def encode(insn: Instruction, cfg: "HwConfig") -> int:
    """The 128-bit word of ``insn`` as a Python int; raises EncodingError naming a field that does not fit."""
    lay = layouts(cfg).get(_layout_name(insn))
    if lay is None:
        return _encode_checked(insn, cfg)
    # the common case on the instruction's own attributes (plain ints and bools in range): any other value goes
    # through _encode_checked, which gives the same word or the error naming the field
    attrs_plan, deps_plan, (op_lo, op_w, mem_lo, _, alu_lo, alu_w) = lay.encode_plan
    attrs = insn.__dict__
    word = int(insn.opcode)
    if op_lo != 0 or not 0 <= word < 1 << op_w:
        return _encode_checked(insn, cfg)
    for name, lo in deps_plan:
        v = insn.deps.__dict__[name]
        if v is True:
            word |= 1 << lo
        elif v is not False:
            return _encode_checked(insn, cfg)
    if mem_lo >= 0:
        v = attrs.get("mem")
        if v.__class__ is not MemType:
            return _encode_checked(insn, cfg)
        word |= int(v) << mem_lo
    if alu_lo >= 0:
        code = alu_op(attrs["op"]).opcode
        if not 0 <= code < 1 << alu_w:
            return _encode_checked(insn, cfg)
        word |= code << alu_lo
    for name, lo, mask, lo_v, hi_v in attrs_plan:
        v = attrs.get(name)
        if (v.__class__ is not int and v.__class__ is not bool) or v < lo_v or v > hi_v:
            return _encode_checked(insn, cfg)
        word |= (v & mask) << lo
    return word


def _encode_checked(insn: Instruction, cfg: "HwConfig") -> int:
    """:func:`encode` field by field with every check (the error names the instruction and the field)."""
    name = _layout_name(insn)
    lays = layouts(cfg)
    if name not in lays:
        raise EncodingError(f"{name} is not an instruction of HwConfig {cfg.name!r} (its tensor intrinsics: "
                            f"{', '.join(d.format for d in tensor_declarations(cfg))})")
    lay = lays[name]
    what = insn.intrinsic.upper() if isinstance(insn, Gemm) else type(insn).__name__.upper()
    values: dict[str, int] = {"opcode": int(insn.opcode)}  # type: ignore[union-attr]
    for d in DEP_FIELDS:
        values[d] = int(getattr(insn.deps, d))
    for fld in dc_fields(insn):
        if fld.name == "deps":
            continue
        values[fld.name] = getattr(insn, fld.name)
    if isinstance(insn, (Load, Store)):
        values["mem"] = int(MemType(insn.mem))
    if isinstance(insn, Alu):
        values["alu_opcode"] = alu_op(insn.op).opcode
        del values["op"]
    word = 0
    for f in lay.fields:
        word = _put(word, f, values.pop(f.name), what)
    return word


def decode(word: int, cfg: "HwConfig") -> Instruction:
    """Decode one 128-bit word; raises EncodingError for an unknown opcode, memory type or ALU op."""
    word = int(word)
    if not 0 <= word < (1 << 128):
        raise EncodingError(f"instruction word {word:#x} is not a 128-bit value")
    lays = layouts(cfg)
    opcode = word & ((1 << OPCODE_BITS) - 1)
    tensor = {d.opcode: d for d in tensor_declarations(cfg)}
    if opcode in tensor:
        return _decode_tensor(word, tensor[opcode], lays[tensor[opcode].format])
    if opcode not in RESERVED_OPCODES:  # the fixed instructions; every other opcode is a declaration's
        known = [f"{n}={o}" for o, n in RESERVED_OPCODES.items()] + [f"{d.format}={d.opcode}" for d in tensor.values()]
        raise EncodingError(f"undecodable instruction {word:#034x}: opcode {opcode} is not one of "
                            f"{', '.join(sorted(known, key=lambda k: int(k.split('=')[1])))} (HwConfig {cfg.name!r})")
    op = Opcode(opcode)
    lay = lays["MEM" if op in (Opcode.LOAD, Opcode.STORE) else op.name]
    v = {f.name: _get(word, f) for f in lay.fields}
    deps = Deps(**{d: bool(v.pop(d)) for d in DEP_FIELDS})
    v.pop("opcode")
    if op in (Opcode.LOAD, Opcode.STORE):
        try:
            v["mem"] = MemType(v["mem"])
        except ValueError:
            raise EncodingError(f"undecodable {op.name} {word:#034x}: memory type {v['mem']} is not one of "
                                f"{', '.join(f'{m.name}={m.value}' for m in MemType)}") from None
        return (Load if op == Opcode.LOAD else Store)(deps=deps, **v)
    if op == Opcode.ALU:
        v["reset"] = bool(v["reset"])
        v["use_imm"] = bool(v["use_imm"])
        v["op"] = alu_op(v.pop("alu_opcode")).name
        return Alu(deps=deps, **v)
    return Finish(deps=deps)


def _decode_tensor(word: int, decl, lay: Layout) -> Gemm:
    v = {f.name: _get(word, f) for f in lay.fields}
    deps = Deps(**{d: bool(v.pop(d)) for d in DEP_FIELDS})
    v.pop("opcode")
    v["reset"] = bool(v["reset"])
    v["overwrite"] = bool(v["overwrite"])
    return insn_class(decl)(deps=deps, **v)


def encode_uop(uop: Uop, cfg: "HwConfig") -> int:
    word = 0
    for f in layouts(cfg)["UOP"].fields:
        word = _put(word, f, getattr(uop, f.name), "UOP")
    return word


def decode_uop(word: int, cfg: "HwConfig") -> Uop:
    lay = layouts(cfg)["UOP"]
    return Uop(**{f.name: _get(int(word), f) for f in lay.fields})


def encode_stream(insns: Iterable[Instruction], cfg: "HwConfig") -> np.ndarray:
    """Instructions as a (N, 16) uint8 array, each word little-endian (as DRAM holds them)."""
    words = [encode(i, cfg) for i in insns]
    buf = b"".join(w.to_bytes(INSN_BYTES, "little") for w in words)
    return np.frombuffer(buf, dtype=np.uint8).reshape(len(words), INSN_BYTES).copy()


def decode_stream(data: bytes | np.ndarray, cfg: "HwConfig") -> list[Instruction]:
    """Inverse of :func:`encode_stream`."""
    raw = bytes(np.asarray(data, dtype=np.uint8).reshape(-1)) if not isinstance(data, bytes) else data
    if len(raw) % INSN_BYTES:
        raise EncodingError(f"instruction stream of {len(raw)} bytes is not a multiple of {INSN_BYTES}")
    return [decode(int.from_bytes(raw[i:i + INSN_BYTES], "little"), cfg) for i in range(0, len(raw), INSN_BYTES)]


def stream_words(data: bytes | np.ndarray) -> np.ndarray:
    """An instruction stream as an (N, 2) uint64 array: the low and high 64 bits of each little-endian word."""
    raw = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else np.asarray(data, dtype=np.uint8).reshape(-1)
    if raw.size % INSN_BYTES:
        raise EncodingError(f"instruction stream of {raw.size} bytes is not a multiple of {INSN_BYTES}")
    return np.ascontiguousarray(raw).view("<u8").reshape(-1, 2)


def field_array(words: np.ndarray, f: Field) -> np.ndarray:
    """Field ``f`` of every word of ``words`` (:func:`stream_words`), as int64 (sign-extended when signed)."""
    if f.width > 63:
        raise EncodingError(f"field {f.name} is {f.width} bits wide; field_array reads fields of up to 63 bits")
    mask = np.uint64((1 << f.width) - 1)
    lo_w, hi_w = words[:, 0], words[:, 1]
    if f.lo >= 64:
        v = (hi_w >> np.uint64(f.lo - 64)) & mask
    elif f.lo + f.width <= 64:
        v = (lo_w >> np.uint64(f.lo)) & mask
    else:  # straddles the two halves
        v = ((lo_w >> np.uint64(f.lo)) | (hi_w << np.uint64(64 - f.lo))) & mask
    v = v.astype(np.int64)
    if f.signed:
        v = np.where(v >> (f.width - 1), v - (1 << f.width), v)
    return v


def undecodable(words: np.ndarray, cfg: "HwConfig") -> np.ndarray:
    """Boolean mask of the words (:func:`stream_words`) that :func:`decode` refuses: an opcode that is neither a
    fixed instruction's nor one of ``cfg``'s tensor declarations', a LOAD/STORE memory type or an ALU opcode
    that does not exist. Vectorized: no instruction objects are made."""
    lays = layouts(cfg)
    opcode = field_array(words, lays["MEM"].field("opcode"))
    known = list(RESERVED_OPCODES) + [d.opcode for d in tensor_declarations(cfg)]
    bad = ~np.isin(opcode, known)
    mem = (opcode == int(Opcode.LOAD)) | (opcode == int(Opcode.STORE))
    if mem.any():
        bad |= mem & ~np.isin(field_array(words, lays["MEM"].field("mem")), [int(m) for m in MemType])
    alu = opcode == int(Opcode.ALU)
    if alu.any():
        bad |= alu & ~np.isin(field_array(words, lays["ALU"].field("alu_opcode")), [o.opcode for o in alu_ops()])
    return bad


def check_stream(data: bytes | np.ndarray, cfg: "HwConfig") -> np.ndarray:
    """The stream's words (:func:`stream_words`) after checking that every one decodes: raises the
    EncodingError :func:`decode_stream` raises, for the same (first) undecodable word, without decoding the
    others one by one."""
    words = stream_words(data)
    bad = np.flatnonzero(undecodable(words, cfg))
    if bad.size:
        i = int(bad[0])
        decode(int(words[i, 0]) | int(words[i, 1]) << 64, cfg)  # raises the decoder's own message
        raise EncodingError(f"instruction {i} is undecodable but decode() accepted it (isa.encoding.undecodable "
                            f"and decode disagree: a bug)")
    return words


def encode_uops(uops: Iterable[Uop], cfg: "HwConfig") -> np.ndarray:
    """Micro-ops as a uint32 array (little-endian in DRAM)."""
    return np.array([encode_uop(u, cfg) for u in uops], dtype=np.uint32)


def int_dtype(bits: int) -> np.dtype:
    """Little-endian signed integer dtype of ``bits`` bits."""
    return np.dtype(f"<i{bits // 8}")


def elem_layout(cfg: "HwConfig", mem: str) -> tuple[np.dtype, tuple[int, ...]]:
    """numpy dtype and per-element shape of memory ``mem`` (uop, inp, wgt, acc, out) in DRAM."""
    if mem == "uop":
        return np.dtype("<u4"), ()
    if mem == "inp":
        return int_dtype(cfg.inp_width), (cfg.batch, cfg.block_in)
    if mem == "wgt":
        return int_dtype(cfg.wgt_width), (cfg.block_out, cfg.block_in)
    if mem == "acc":
        return int_dtype(cfg.acc_width), (cfg.batch, cfg.block_out)
    return int_dtype(cfg.out_width), (cfg.batch, cfg.block_out)


def decode_uop_array(words: np.ndarray, cfg: "HwConfig") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized decode of a uint32 uop array into (dst, src, wgt) int64 index arrays."""
    w = np.asarray(words, dtype=np.int64)
    out = []
    for f in layouts(cfg)["UOP"].fields:
        out.append((w >> f.lo) & ((1 << f.width) - 1))
    return tuple(out)  # type: ignore[return-value]
