"""choose_requant: accurate fixed-point scales, never overflowing int32."""
from __future__ import annotations

import numpy as np

from compiler.quant.requant_params import acc_bound, choose_requant
from compiler.requant import apply_requant


def test_per_channel_scales_are_accurate():
    scales = np.array([3.1e-4, 0.0123, 0.7, 1e-6])
    rq = choose_requant(scales, acc_bound=2**20)
    assert rq.pre_shift == 5  # 2**20 needs 21 bits -> keep 16
    eff = np.asarray(rq.multiplier) / 2.0 ** (np.asarray(rq.shift) + rq.pre_shift)
    np.testing.assert_allclose(eff, scales, rtol=2e-4)
    assert np.all(np.abs(rq.multiplier) < 2**15)


def test_requant_matches_float_rounding_within_one_lsb():
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (8, 300)).astype(np.int8)
    bound = acc_bound(w, None)
    assert bound == int(np.abs(w.astype(np.int64)).sum(axis=1).max() * 128)
    scale = rng.uniform(1e-5, 1e-3, 8)
    rq = choose_requant(scale, bound)
    acc = rng.integers(-bound, bound + 1, (1000, 8))
    out = apply_requant(acc, None, rq, 1).astype(np.int64)
    ref = np.clip(np.rint(acc * scale), -128, 127)
    assert np.abs(out - ref).max() <= 1
    # the worst-case accumulator times the multiplier still fits int32 after the pre-shift
    assert (bound >> rq.pre_shift) * np.max(rq.multiplier) < 2**31
