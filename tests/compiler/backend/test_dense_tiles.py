"""The CPU dense schedule's register tiles (several accumulator vectors over the reduction) and its parallel
rows, against numpy: channel counts with and without 8-blocks, tiles of 6..2 blocks or none, batches."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend import set_num_threads
from compiler.backend.build import build_op
from compiler.schedule import create_schedule
from compiler.topi import dense_float as df

CASES = [  # (n, k, m): jo blocks of 8 -> tile
    (1, 1280, 1000),  # 125 blocks: 5 per tile, parallel (1.28M MACs)
    (2, 300, 96),     # 12 blocks: 6 per tile, batch 2
    (3, 17, 56),      # 7 blocks: one per tile
    (1, 9, 5),        # 5 outputs: no 8-block, scalar
    (4, 1024, 512),   # 64 blocks: 4 per tile, batch rows x tiles in parallel
]


@pytest.mark.parametrize("n,k,m", CASES, ids=["classifier", "batch2", "prime-blocks", "tiny", "batch4-parallel"])
@pytest.mark.parametrize("threads", [1, 2])
def test_dense_tiles_match_numpy(n, k, m, threads):
    rng = np.random.default_rng(n * 7 + k)
    op = df.dense(n, k, m, bias=True, act="relu")
    s = create_schedule(op.out)
    df.schedule_cpu(op, s)
    f = build_op(s, args=op.inputs + [op.out])
    x = rng.standard_normal((n, k)).astype(np.float32)
    w = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    set_num_threads(threads)
    try:
        got = np.asarray(f(x, df.pack_dense_weight(w), b)).reshape(n, m)
    finally:
        set_num_threads(None)
    want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * np.sqrt(k))


def test_row_blocks():
    assert [df.row_blocks(j) for j in (125, 12, 7, 1, 64, 9, 2)] == [5, 6, 1, 1, 4, 3, 2]
