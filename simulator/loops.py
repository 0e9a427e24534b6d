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
    """Write a uop range as a mixed-radix affine grid ``base + sum_j i_j * step_j`` (outermost dim first,
    non-negative steps, any number of dims), or None when it is not one.

    Dims are peeled from the innermost: the longest run of equal steps whose length divides the
    remaining count and repeats exactly across the table becomes one dim. A convolution's uop
    table (kernel row x kernel column x output block) factors into three dims this way."""
    arr = np.stack([np.asarray(d, np.int64), np.asarray(s, np.int64), np.asarray(w, np.int64)])
    base = (int(arr[0, 0]), int(arr[1, 0]), int(arr[2, 0]))
    dims: list[Dim] = []
    while arr.shape[1] > 1:
        n = arr.shape[1]
        step = arr[:, 1] - arr[:, 0]
        if (step < 0).any():
            return None
        diffs = np.diff(arr, axis=1)
        same = np.all(diffs == step[:, None], axis=0)
        run = n if same.all() else int(np.argmin(same)) + 1  # elements in the leading run of equal steps
        for a in range(run, 1, -1):
            if n % a:
                continue
            grid = arr.reshape(3, n // a, a)
            if np.array_equal(grid, grid[:, :, :1] + step[:, None, None] * np.arange(a)):
                dims.append((a, *map(int, step)))
                arr = grid[:, :, 0]
                break
        else:
            return None
    return base, dims[::-1]


def loop_dims(insn: Gemm | Alu, uop_dims: list[Dim]) -> list[Dim]:
    """All dims of the nest (outer loop, inner loop, uop dims), dropping extent-1 dims."""
    wfo = getattr(insn, "wgt_factor_out", 0)
    wfi = getattr(insn, "wgt_factor_in", 0)
    dims = [(insn.iter_out, insn.dst_factor_out, insn.src_factor_out, wfo),
            (insn.iter_in, insn.dst_factor_in, insn.src_factor_in, wfi)] + uop_dims
    return [dm for dm in dims if dm[0] > 1]
