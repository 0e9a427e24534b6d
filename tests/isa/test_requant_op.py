"""The fused REQUANT ALU op: its numpy semantics against Python integers, its record packing and its config rule."""
from __future__ import annotations

import numpy as np
import pytest

import isa
from isa.alu import alu_op, alu_ops, evaluate, op_supported
from isa.intrinsics import intrinsics
from isa.requant import Record, pack_records, unpack_records


def _reference(a: int, bias: int, mult: int, shift: int, zp: int, lo: int, hi: int) -> int:
    x = (a + bias + (1 << 31)) % (1 << 32) - (1 << 31)  # wrap to int32
    p = x * mult
    y = p if shift == 0 else (p + (1 << (shift - 1))) // (1 << shift)  # Python // floors: round half up
    return min(max(y + zp, lo), hi)


def test_requant_matches_python_integers():
    rng = np.random.default_rng(0)
    n = 4000
    a = rng.integers(-(1 << 31), 1 << 31, n)
    r = Record(bias=rng.integers(-(1 << 31), 1 << 31, n), mult=rng.integers(-(1 << 31), 1 << 31, n),
               shift=rng.integers(0, 64, n), zp=rng.integers(-(1 << 15), 1 << 15, n),
               lo=rng.integers(-(1 << 15), 0, n), hi=rng.integers(0, 1 << 15, n))
    got = evaluate("REQUANT", a, r, 32)
    want = [_reference(*(int(v[k]) for v in (a, r.bias, r.mult, r.shift, r.zp, r.lo, r.hi))) for k in range(n)]
    assert np.array_equal(got, np.array(want))
    # ties round up (toward +inf): 5/2 -> 3, -5/2 -> -2
    tie = evaluate("REQUANT", np.array([5, -5]), Record(0, 1, 1, 0, -100, 100), 32)
    assert tie.tolist() == [3, -2]


def test_records_pack_and_unpack_round_trip():
    cfg = isa.make_config("pynq-z1")
    vals = dict(bias=np.arange(20) * -77, mult=np.arange(20) + (1 << 30), shift=np.arange(20) + 30,
                zp=-3, lo=-128, hi=np.arange(20) + 100)
    rows = pack_records(cfg, n_channels=20, **vals)
    assert rows.shape == (2, cfg.block_out, cfg.block_in) and rows.dtype == np.int8
    r = unpack_records(rows.reshape(32, cfg.block_in), cfg.wgt_width)
    for k, v in vals.items():
        assert np.array_equal(getattr(r, k)[:20], np.broadcast_to(v, (20,))), k
    assert not rows.reshape(32, -1)[20:].any()  # channels past n_channels hold zero records
    with pytest.raises(ValueError, match="REQUANT record field shift must be in 0..63"):
        pack_records(cfg, n_channels=1, bias=0, mult=1, shift=64, zp=0, lo=0, hi=0)


def test_configs_without_room_for_a_record_lack_the_op():
    tiny, pynq = isa.make_config("tiny"), isa.make_config("pynq-z1")
    rq = alu_op("REQUANT")
    assert rq.operand == "wgt" and op_supported(rq, pynq) and not op_supported(rq, tiny)
    assert "alu_requant" in intrinsics(pynq) and "alu_requant" not in intrinsics(tiny)
    assert rq not in alu_ops(tiny) and rq in alu_ops()
    with pytest.raises(ValueError, match="block_in \\* wgt_width = 32 bits"):
        pack_records(tiny, n_channels=4, bias=0, mult=1, shift=0, zp=0, lo=0, hi=0)


def test_a_record_op_whose_numpy_form_rounds_wrongly_is_rejected():
    """Registration tries a record op on mixed-magnitude records (small shifts and bounds too, not only values
    that saturate): a numpy form that floors where REQUANT's semantics round half up must be refused."""
    from isa import alu
    from isa.requant import requant_fn

    def floor_numpy(a, r, width):
        ops = alu.NumpyOps(width)
        y = ops.mul(ops.wrap(ops.add(a, r.bias)), r.mult) >> r.shift  # floor, not round_shift
        return ops.min(ops.max(ops.add(y, r.zp), r.lo), r.hi)

    before = [o.name for o in alu.alu_ops()]
    with pytest.raises(ValueError, match=r"ALU op RQFLOOR: its numpy_fn gives .* must compute the same function"):
        alu.register_alu_op("RQFLOOR", 9, requant_fn, operand="wgt", numpy_fn=floor_numpy)
    assert [o.name for o in alu.alu_ops()] == before
