"""Bound inference through a stage's split/fuse relations (:mod:`compiler.schedule.relations`), shared by both
lowerings: the CPU/GPU one (:mod:`compiler.tir.lower`, symbolic index expressions) and the accelerator's
(:mod:`compiler.tir.accel.bounds`, affine forms with the host loops' values as constants)."""
from __future__ import annotations

from typing import Callable, TypeVar

from compiler.schedule.relations import Fuse, Split
from compiler.te.expr import IterVar

V = TypeVar("V")


def leaf_extents(relations: list, dom: dict[IterVar, int]) -> dict[IterVar, int]:
    """Extent of every loop, from the root axes' extents ``dom``: a split's inner loop iterates
    ``min(factor, extent)``, its outer loop the rest rounded up; a fused loop the product of its two."""
    ext = dict(dom)
    for rel in relations:
        if isinstance(rel, Split):
            n = ext[rel.parent]
            f = min(rel.factor, n)
            ext[rel.outer], ext[rel.inner] = -(-n // f), f
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    return ext


def root_values(relations: list, leaf: dict[IterVar, V], extent: Callable[[IterVar], int],
                scale_add: Callable[[V, int, V], V], div_mod: Callable[[V, int, Fuse], tuple[V, V]]) -> dict:
    """The value of every loop (root axes included) from the leaf loops' values ``leaf``, walking the relations
    backwards: a split's parent is ``scale_add(outer, extent(inner), inner)``, a fuse's outer and inner loops are
    ``div_mod(fused, extent(inner), rel)``. The two callables give the algebra (index expressions or affine forms)."""
    val = dict(leaf)
    for rel in reversed(relations):
        if isinstance(rel, Split):
            val[rel.parent] = scale_add(val[rel.outer], extent(rel.inner), val[rel.inner])
        else:
            val[rel.outer], val[rel.inner] = div_mod(val[rel.fused], extent(rel.inner), rel)
    return val
