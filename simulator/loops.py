"""Micro-op loop nests as index arrays, and their affine factorization (for the dense GEMM path)."""
from __future__ import annotations

import numpy as np

from isa.instructions import Alu, Gemm
from simulator.errors import OutOfRangeError

#: One loop dimension: (extent, dst step, src step, wgt step).
Dim = tuple[int, int, int, int]


def expand(table: np.ndarray, iter_out: int, f_out: int, iter_in: int, f_in: int) -> np.ndarray:
    """Index of every iteration, in execution order (i0, i1, uop): ``table[u] + i0*f_out + i1*f_in``."""
    i0 = np.arange(iter_out, dtype=np.int64)[:, None, None] * f_out
    i1 = np.arange(iter_in, dtype=np.int64)[None, :, None] * f_in
    return (i0 + i1 + table[None, None, :]).reshape(-1)


def check_bound(idx: np.ndarray, depth: int, where: str, field: str, mem: str, shape: tuple[int, int, int]) -> None:
    """Raise OutOfRangeError naming the first iteration whose ``field`` index is not below ``depth``."""
    if idx.size and int(idx.max()) >= depth:
        k = int(np.argmax(idx >= depth))
        i0, i1, u = np.unravel_index(k, shape)
        raise OutOfRangeError(
            f"{where}: micro-op {field} index {int(idx[k])} (iteration i_out={i0}, i_in={i1}, uop={u}) is out of "
            f"range for the {mem} scratchpad (depth {depth}, allowed 0..{depth - 1})")


def factor_uops(d: np.ndarray, s: np.ndarray, w: np.ndarray) -> tuple[tuple[int, int, int], list[Dim]] | None:
    """Write a uop range as ``base + a*A + b*B`` (one or two dims, non-negative steps), or None."""
    arr = np.stack([d, s, w])
    n = arr.shape[1]
    base = (int(arr[0, 0]), int(arr[1, 0]), int(arr[2, 0]))
    if n == 1:
        return base, []
    step = arr[:, 1] - arr[:, 0]
    if (step >= 0).all() and np.array_equal(arr, arr[:, :1] + step[:, None] * np.arange(n)):
        return base, [(n, *map(int, step))]
    for a in range(2, n // 2 + 1):
        if n % a:
            continue
        b = n // a
        grid = arr.reshape(3, a, b)
        fa, fb = grid[:, 1, 0] - grid[:, 0, 0], grid[:, 0, 1] - grid[:, 0, 0]
        if (fa < 0).any() or (fb < 0).any():
            continue
        model = arr[:, :1, None] + fa[:, None, None] * np.arange(a)[None, :, None] + fb[:, None, None] * np.arange(b)
        if np.array_equal(grid, model):
            return base, [(a, *map(int, fa)), (b, *map(int, fb))]
    return None


def loop_dims(insn: Gemm | Alu, uop_dims: list[Dim]) -> list[Dim]:
    """All dims of the nest (outer loop, inner loop, uop dims), dropping extent-1 dims."""
    wfo = getattr(insn, "wgt_factor_out", 0)
    wfi = getattr(insn, "wgt_factor_in", 0)
    dims = [(insn.iter_out, insn.dst_factor_out, insn.src_factor_out, wfo),
            (insn.iter_in, insn.dst_factor_in, insn.src_factor_in, wfi)] + uop_dims
    return [dm for dm in dims if dm[0] > 1]
