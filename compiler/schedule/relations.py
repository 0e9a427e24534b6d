"""Split and fuse relations between a stage's root axes and its leaf loops."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.te.expr import IterVar


@dataclass(frozen=True)
class Split:
    """``parent = outer * factor + inner`` (the last outer iteration may be partial)."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int


@dataclass(frozen=True)
class Fuse:
    """``fused = outer * inner.extent + inner``."""

    outer: IterVar
    inner: IterVar
    fused: IterVar
