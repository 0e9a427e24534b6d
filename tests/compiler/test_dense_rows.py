"""Batch is not a width: a packed dense whose batch rows do not fit the scratchpads as one conv row tiles them as
rows (``SimAccelBackend.dense_rows_axis``), with the same bytes as the width layout."""
from __future__ import annotations

import numpy as np

from compiler.backend.accel.backend import SimAccelBackend
from jit_runtime.host_ops.requant import Requant
from isa import make_config

RQ = Requant(multiplier=1 << 20, shift=24)


def _operands(cfg, n: int, k: int, m: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n // cfg.batch, k // cfg.block_in, cfg.batch, cfg.block_in), dtype=np.int8)
    w = rng.integers(-128, 128, (m // cfg.block_out, k // cfg.block_in, cfg.block_out, cfg.block_in), dtype=np.int8)
    return x, w


class _Pinned(SimAccelBackend):
    def __init__(self, cfg, axis: str) -> None:
        super().__init__(cfg)
        self.axis = axis

    def dense_rows_axis(self, x, w, bias, requant) -> str:
        return self.axis


def test_a_large_batch_on_tiny_tiles_as_rows():
    cfg = make_config("tiny")
    x, w = _operands(cfg, 450, 512, 12)  # the digits demo's last layer at its 450-image batch
    assert SimAccelBackend(cfg).dense_rows_axis(x, w, None, RQ) == "h"
    x, w = _operands(cfg, 8, 32, 8)
    assert SimAccelBackend(cfg).dense_rows_axis(x, w, None, RQ) == "w"  # small batches keep the width layout


def test_rows_layout_gives_the_same_bytes_as_the_width_layout():
    cfg = make_config("tiny")
    x, w = _operands(cfg, 24, 32, 8, seed=3)
    bias = np.arange(8, dtype=np.int64) * 100
    by_w = _Pinned(cfg, "w").dense(x, w, bias, requant=RQ)
    by_h = _Pinned(cfg, "h").dense(x, w, bias, requant=RQ)
    assert by_w.shape == (24, 2, 1, 4)
    np.testing.assert_array_equal(by_h, by_w)
