"""ALU registry: hand-computed semantics of every built-in op, and registering a new op."""
import numpy as np
import pytest

import isa
import isa.intrinsics
from isa.alu import alu_opcode_bits, evaluate, register_alu_op, unregister_alu_op


def test_builtin_ops_and_opcodes():
    assert [(o.name, o.opcode) for o in isa.alu_ops()] == [("MIN", 0), ("MAX", 1), ("ADD", 2), ("SHR", 3), ("MUL", 4),
                                                                   ("REQUANT", 5)]


@pytest.mark.parametrize("op, a, b, expected", [
    ("MIN", [5, -7, 3], [2, -8, 3], [2, -8, 3]),
    ("MAX", [5, -7, 3], [2, -8, 3], [5, -7, 3]),
    ("ADD", [1, -1, 2**31 - 1], [2, -2, 1], [3, -3, -2**31]),  # wraps at 32 bits
    ("SHR", [-9, 9, -1, 12], [1, 2, 31, -2], [-5, 2, -1, 48]),  # arithmetic; negative amount shifts left
    ("SHR", [1, -1], [40, 40], [0, -1]),  # amount clamped to 31
    ("SHR", [3], [-40], [-2**31]),  # 3 << 31 wraps to -2**31
    ("MUL", [3, -4, 65536], [5, 6, 65536], [15, -24, 0]),  # 2**32 wraps to 0
])
def test_semantics_by_hand(op, a, b, expected):
    out = evaluate(op, np.array(a), np.array(b), 32)
    assert out.tolist() == expected


def test_narrow_accumulator_wraps():
    assert evaluate("ADD", np.array([127]), np.array([1]), 8).tolist() == [-128]


def test_register_new_op_is_encodable_and_widens_opcode():
    cfg = isa.make_config("tiny")
    try:
        op = register_alu_op("ABSDIFF", 9, lambda ops, a, b: ops.sub(ops.max(a, b), ops.min(a, b)), "|dst - src|")
        assert alu_opcode_bits() == 4
        assert evaluate(op, np.array([3, -5]), np.array([10, 5]), 32).tolist() == [7, 10]
        insn = isa.Alu("ABSDIFF", False, 0, 1, 1, 1, use_imm=True, imm=3)
        assert isa.decode(isa.encode(insn, cfg), cfg) == insn
        assert "ABSDIFF" in isa.intrinsics.intrinsics(cfg)["alu_absdiff"].expr
        with pytest.raises(ValueError, match="already registered"):
            register_alu_op("ABSDIFF", 10, op.fn)
        with pytest.raises(ValueError, match="opcode 2 is already used by ADD"):
            register_alu_op("OTHER", 2, op.fn)
    finally:
        unregister_alu_op("ABSDIFF")
    assert alu_opcode_bits() == 3
    with pytest.raises(ValueError, match="built-in"):
        unregister_alu_op("ADD")


def test_gemm_intrinsic_exact():
    cfg = isa.make_config("pynq-z1")
    g = isa.intrinsics.gemm_intrinsic(cfg)
    rng = np.random.default_rng(0)
    inp = rng.integers(-128, 128, (3, 1, 16))
    wgt = rng.integers(-128, 128, (3, 16, 16))
    acc = rng.integers(-2**31, 2**31, (3, 1, 16))
    ref = acc + np.einsum("nbi,noi->nbo", inp, wgt)
    ref = (ref + 2**31) % 2**32 - 2**31
    assert np.array_equal(g.numpy_fn(acc, inp, wgt), ref)
    assert g.shape(g.inputs[1]) == (16, 16) and g.reduce_axes == ("i",)


def test_gemm_intrinsic_exact_for_wide_operands():
    cfg = isa.make_config("tiny", inp_width=32, wgt_width=32, acc_width=32)
    g = isa.intrinsics.gemm_intrinsic(cfg)
    inp = np.full((1, 1, 4), 2**31 - 1, dtype=np.int64)
    wgt = np.full((1, 4, 4), -(2**31) + 3, dtype=np.int64)
    # Python ints are exact: reduce the true sum modulo 2**32 by hand
    true = 4 * (2**31 - 1) * (-(2**31) + 3)
    expected = (true + 2**31) % 2**32 - 2**31
    assert g.numpy_fn(np.zeros((1, 1, 4), dtype=np.int64), inp, wgt).tolist() == [[[expected] * 4]]
