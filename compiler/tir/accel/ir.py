"""The loop IR that lowering produces and the code generator walks.

Host loops (``For``) run on the CPU while building the instruction stream; leaves are
accelerator statements: DMA copies (``DmaLoad``/``DmaStore``) and micro-kernels
(``Kernel``: a tensorized GEMM, its accumulator reset, or an ALU epilogue op).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from compiler.te.expr import IterVar

if TYPE_CHECKING:
    from compiler.schedule.tensorize import AluMatch, GemmMatch
    from compiler.schedule.stage import Stage


def row_major_strides(shape) -> tuple[int, ...]:
    """Element strides of a row-major array of ``shape``."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


@dataclass(eq=False)
class Buffer:
    """A scratchpad buffer: ``shape`` is the region it holds (non-element dims), one copy per virtual thread."""

    name: str
    scope: str
    shape: tuple[int, ...]
    copies: int = 1
    base: int = -1
    alias_of: "Buffer | None" = None
    vector: bool = False  # read as a vector operand: its micro-op index (row * k + piece) needs a low base

    @property
    def elems(self) -> int:
        return math.prod(self.shape)

    @property
    def strides(self) -> tuple[int, ...]:
        return row_major_strides(self.shape)

    def root(self) -> "Buffer":
        return self.alias_of.root() if self.alias_of is not None else self

    def copy_base(self, thread: int) -> int:
        r = self.root()
        return r.base + (thread if r.copies > 1 else 0) * r.elems


@dataclass(eq=False)
class For:
    var: IterVar
    extent: int
    body: list["Stmt"]
    kind: str = "serial"  # or "vthread"


@dataclass(eq=False)
class DmaLoad:
    stage: "Stage"
    buffer: Buffer


@dataclass(eq=False)
class DmaStore:
    stage: "Stage"
    source: "Stage"
    buffer: Buffer


@dataclass(eq=False)
class Kernel:
    stage: "Stage"
    kind: str  # "gemm", "reset" or "alu"
    buffer: Buffer
    match: "GemmMatch | AluMatch"
    operands: dict[str, Buffer] = field(default_factory=dict)


Stmt = Union[For, DmaLoad, DmaStore, Kernel]


@dataclass
class LoweredFunc:
    """The result of lowering: loop IR, buffers, inputs and the output tensor."""

    name: str
    body: list[Stmt]
    buffers: list[Buffer]
    inputs: list
    output: object
    bounds: object
    vthreads: int = 1


def format_ir(body: list[Stmt], indent: int = 0) -> str:
    """Readable text of the loop IR (for docs, debugging and tests)."""
    pad = "  " * indent
    lines = []
    for s in body:
        if isinstance(s, For):
            tag = " vthread" if s.kind == "vthread" else ""
            lines.append(f"{pad}for{tag} {s.var.name} in 0..{s.extent}:")
            lines.append(format_ir(s.body, indent + 1))
        elif isinstance(s, DmaLoad):
            lines.append(f"{pad}dma_load {s.buffer.scope}:{s.buffer.name}{list(s.buffer.shape)} <- "
                         f"{s.stage.op.inputs[0].name}")
        elif isinstance(s, DmaStore):
            lines.append(f"{pad}dma_store {s.stage.name} <- {s.buffer.scope}:{s.buffer.name}")
        else:
            extra = f" {s.match.op}" if s.kind == "alu" else ""
            lines.append(f"{pad}{s.kind}{extra} {s.stage.name} -> {s.buffer.scope}:{s.buffer.name}")
    return "\n".join(x for x in lines if x)
