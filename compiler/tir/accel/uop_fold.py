"""Micro-op loop folding: a nest of affine loops becomes two hardware loop levels plus a micro-op list."""
from __future__ import annotations

import numpy as np

from compiler.schedule.errors import LowerError

MAX_HW_EXTENT = (1 << 14) - 1


def fold_loops(extents: list[int], coefs: np.ndarray, const: np.ndarray, max_uops: int
               ) -> tuple[list[tuple[int, tuple[int, ...]]], np.ndarray]:
    """Fold loops into (at most two) hardware loops and the micro-ops they repeat.

    ``coefs[k]`` is loop k's step of each index (dst, src, wgt); ``const`` the indices at zero.
    The two loops with the most iterations become hardware loops (outer first, in nest order);
    the others are enumerated into micro-ops. Returns ``([(extent, factors)], uops (n, 3))``.
    """
    loops = [k for k, e in enumerate(extents) if e > 1]
    hw = sorted(sorted(loops, key=lambda k: -extents[k])[:2])
    hw = [k for k in hw if extents[k] <= MAX_HW_EXTENT]
    rest = [k for k in loops if k not in hw]
    idx = np.asarray(const, dtype=np.int64).reshape(1, -1)
    for k in rest:
        steps = np.arange(extents[k], dtype=np.int64).reshape(-1, 1, 1) * coefs[k].reshape(1, 1, -1)
        idx = (idx.reshape(1, -1, idx.shape[-1]) + steps).reshape(-1, idx.shape[-1])
    if idx.shape[0] > max_uops:
        raise LowerError(f"a micro-kernel needs {idx.shape[0]} micro-ops but the uop scratchpad holds {max_uops}; "
                         f"use smaller tiles so the loops folded into micro-ops have fewer iterations")
    if (idx < 0).any():
        raise LowerError("a micro-op index is negative (internal error in bound inference)")
    return [(extents[k], tuple(int(c) for c in coefs[k])) for k in hw], idx
