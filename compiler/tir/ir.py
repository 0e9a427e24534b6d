"""The loop IR: buffers, flat loads/stores, annotated ``For`` loops, guards and allocations.

Expressions are :mod:`compiler.te` expressions over loop variables plus :class:`BufLoad`
(a read of a flat buffer). A ``For`` has a ``kind``: ``serial``, ``vectorize``, ``unroll``,
``parallel`` or a GPU thread tag (``blockIdx.x`` ...).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from compiler.te.expr import Expr, Var


@dataclass(eq=False)
class Buffer:
    """A flat array: ``kind`` is ``arg`` (a function argument), ``temp`` (a whole intermediate tensor, allocated by the
    runtime) or ``alloc`` (a region allocated inside the function: ``scope`` ``local`` or GPU ``shared``)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    kind: str = "arg"
    scope: str = "global"

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"{self.name}"

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class BufLoad(Expr):
    """``buffer[index]`` with a flat element index."""

    buffer: Buffer
    index: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype

    def __repr__(self) -> str:
        return f"{self.buffer.name}[{self.index!r}]"


@dataclass(eq=False)
class Store:
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(eq=False)
class For:
    var: Var
    extent: int
    body: list["Stmt"]
    kind: str = "serial"


@dataclass(eq=False)
class IfThen:
    cond: Expr
    body: list["Stmt"]


@dataclass(eq=False)
class Allocate:
    """Declares ``buffer`` (kind ``alloc``) at this point; it lives until the end of the enclosing body."""

    buffer: Buffer


@dataclass(eq=False)
class Sync:
    """A GPU block-wide barrier (``__syncthreads``); ignored on the CPU."""


Stmt = Union[For, Store, IfThen, Allocate, Sync]


@dataclass
class PrimFunc:
    """A lowered operator: ``args`` (inputs then outputs), ``temps`` (runtime-allocated intermediates), ``body``."""

    name: str
    args: list[Buffer]
    temps: list[Buffer]
    body: list[Stmt]
    num_inputs: int = 0
    meta: dict = field(default_factory=dict)


def _fmt(body: list, indent: int) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    for s in body:
        if isinstance(s, For):
            tag = "" if s.kind == "serial" else f" {s.kind}"
            out.append(f"{pad}for{tag} {s.var.name} in 0..{s.extent}:")
            out += _fmt(s.body, indent + 1)
        elif isinstance(s, IfThen):
            out.append(f"{pad}if {s.cond!r}:")
            out += _fmt(s.body, indent + 1)
        elif isinstance(s, Store):
            out.append(f"{pad}{s.buffer.name}[{s.index!r}] = {s.value!r}")
        elif isinstance(s, Allocate):
            out.append(f"{pad}allocate {s.buffer.scope} {s.buffer.name}: {s.buffer.dtype}{list(s.buffer.shape)}")
        else:
            out.append(f"{pad}sync_threads")
    return out


def format_func(f: PrimFunc) -> str:
    """Readable text of a lowered function (for docs, debugging and tests)."""
    head = f"func {f.name}({', '.join(f'{b.name}: {b.dtype}{list(b.shape)}' for b in f.args)})"
    temps = [f"  temp {b.name}: {b.dtype}{list(b.shape)}" for b in f.temps]
    return "\n".join([head] + temps + _fmt(f.body, 1))


def structural_key(f: PrimFunc) -> str:
    """A text that is equal for two functions exactly when they compute the same thing: loop variables and buffers
    are numbered by first appearance (names are ignored), everything else is spelled out."""
    from compiler.te.expr import Binary, Call, Cast, Const, Select, Var

    ids: dict = {}

    def name(obj, prefix: str) -> str:
        if obj not in ids:
            ids[obj] = f"{prefix}{len(ids)}"
        return ids[obj]

    def buf(b: Buffer) -> str:
        known = b in ids
        n = name(b, "b")
        return n if known else f"{n}:{b.dtype}{list(b.shape)}:{b.kind}:{b.scope}"

    def ex(e) -> str:
        if isinstance(e, Const):
            return f"{e.value!r}:{e.dtype}"
        if isinstance(e, Var):
            return name(e, "v")
        if isinstance(e, Binary):
            return f"({e.op} {ex(e.a)} {ex(e.b)})"
        if isinstance(e, Cast):
            return f"({e.dtype} {ex(e.a)})"
        if isinstance(e, Call):
            return f"({e.name} {ex(e.a)})"
        if isinstance(e, Select):
            return f"(select {ex(e.cond)} {ex(e.a)} {ex(e.b)})"
        if isinstance(e, BufLoad):
            return f"{buf(e.buffer)}[{ex(e.index)}]"
        return f"<{type(e).__name__} {id(e)}>"  # never equal across functions: no false sharing

    def st(body: list) -> str:
        out = []
        for s in body:
            if isinstance(s, For):
                out.append(f"for {s.kind} {name(s.var, 'v')} {s.extent} {{{st(s.body)}}}")
            elif isinstance(s, IfThen):
                out.append(f"if {ex(s.cond)} {{{st(s.body)}}}")
            elif isinstance(s, Store):
                out.append(f"{buf(s.buffer)}[{ex(s.index)}]={ex(s.value)}")
            elif isinstance(s, Allocate):
                out.append(f"alloc {buf(s.buffer)}")
            else:
                out.append("sync")
        return ";".join(out)

    head = ",".join(buf(b) for b in list(f.args) + list(f.temps))
    return f"{f.num_inputs}|{head}|{st(f.body)}"
