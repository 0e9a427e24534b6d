"""choose_requant: 31-bit multipliers equal to the QDQ reference except at ties; the legacy 15-bit scheme never
overflows int32."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.quant.requant_params import acc_bound, choose_requant
from jit_runtime.host_ops.requant import Requant, apply_requant


def test_per_channel_scales_are_accurate():
    scales = np.array([3.1e-4, 0.0123, 0.7, 1e-6])
    rq = choose_requant(scales, acc_bound=2**20)
    assert rq.pre_shift == 0
    m, s = np.asarray(rq.multiplier), np.asarray(rq.shift)
    assert np.all(m < 2**31) and np.all(m >= 2**30) and np.all(s <= 63)  # 31 significant bits
    np.testing.assert_allclose(m / 2.0 ** s, scales, rtol=2**-30)


def test_legacy_scheme_never_overflows_int32():
    scales = np.array([3.1e-4, 0.0123, 0.7, 1e-6])
    rq = choose_requant(scales, acc_bound=2**20, mult_bits=15)
    assert rq.pre_shift == 5  # 2**20 needs 21 bits -> keep 16
    eff = np.asarray(rq.multiplier) / 2.0 ** (np.asarray(rq.shift) + rq.pre_shift)
    np.testing.assert_allclose(eff, scales, rtol=2e-4)
    assert np.all(np.abs(rq.multiplier) < 2**15) and np.all(np.asarray(rq.shift) <= 31)
    with pytest.raises(ValueError, match="mult_bits must be 31"):
        choose_requant(scales, 2**20, mult_bits=16)


@pytest.mark.parametrize("seed", [0, 1])
def test_outputs_equal_the_qdq_reference_except_at_ties(seed):
    """round(acc * real_scale) (the QDQ reference, float64 exact for these ranges) vs the integer epilogue:
    every difference must be an exact rounding tie (QDQ rounds half to even, the epilogue half up)."""
    rng = np.random.default_rng(seed)
    n_ch = 64
    scale = (rng.uniform(1e-5, 3e-3, n_ch)).astype(np.float32).astype(np.float64)  # float32 scales, as ORT's
    bias = rng.integers(-(1 << 16), 1 << 16, n_ch)
    rq = choose_requant(scale, 0)
    acc = rng.integers(-(1 << 22), 1 << 22, (4000, n_ch))
    acc[:50] = (np.round(np.arange(50)[:, None] / scale[None, :]) + 0.5 / scale[None, :]).astype(np.int64) - bias
    out = apply_requant(acc, bias, rq, 1).astype(np.int64)
    real = (acc + bias) * scale
    ref = np.clip(np.rint(real), -128, 127)
    ties = np.abs(real - np.floor(real) - 0.5) <= np.abs(real) * 2.0**-29
    bad = (out != ref) & ~ties
    assert int(bad.sum()) == 0, f"{int(bad.sum())} of {out.size} outputs differ off ties"
    assert int(((out != ref) & ties).sum()) <= int(ties.sum())


def test_the_legacy_scheme_drifts_where_the_wide_one_does_not():
    """The 15-bit multiplier with a pre-shift (the old epilogue) differs from round(acc * scale) off ties."""
    rng = np.random.default_rng(3)
    scale = rng.uniform(1e-5, 3e-3, 16)
    acc = rng.integers(-(1 << 22), 1 << 22, (20000, 16))
    real = acc * scale
    ref = np.clip(np.rint(real), -128, 127)
    ties = np.abs(real - np.floor(real) - 0.5) <= np.abs(real) * 2.0**-29
    old = apply_requant(acc, None, choose_requant(scale, 1 << 22, mult_bits=15), 1).astype(np.int64)
    new = apply_requant(acc, None, choose_requant(scale, 1 << 22), 1).astype(np.int64)
    assert ((old != ref) & ~ties).sum() > 0
    assert ((new != ref) & ~ties).sum() == 0


def test_acc_bound():
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (8, 300)).astype(np.int8)
    assert acc_bound(w, None) == int(np.abs(w.astype(np.int64)).sum(axis=1).max() * 128)
    assert acc_bound(w, np.full(8, -5)) == acc_bound(w, None) + 5


def test_wide_contract_by_hand():
    # 64-bit product, shift above 31, zero point then relu at the zero point, clip
    rq = Requant(multiplier=(1 << 31) - 1, shift=40, zero_point=-3, relu=True)
    acc = np.array([[1 << 20, -(1 << 20), 0, (1 << 31) - 1]])
    want = [min(max(((v * ((1 << 31) - 1) + (1 << 39)) >> 40) - 3, -3), 127) for v in acc[0].tolist()]
    assert apply_requant(acc, None, rq, 1).tolist() == [want]
    with pytest.raises(ValueError, match="shift must be in 0..63"):
        Requant(shift=64)
    with pytest.raises(ValueError, match="multiplier must be an int32"):
        Requant(multiplier=1 << 31)
