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


def leaf_values(roots: list[IterVar], relations: list, leaf_env: dict[IterVar, int]) -> dict[IterVar, int]:
    """Given integer values of the leaf loops, the values of every axis (roots included)."""
    env = dict(leaf_env)
    for rel in reversed(relations):
        if isinstance(rel, Split):
            env[rel.parent] = env[rel.outer] * rel.factor + env[rel.inner]
        else:
            env[rel.outer] = env[rel.fused] // rel.inner.extent
            env[rel.inner] = env[rel.fused] % rel.inner.extent
    return env
