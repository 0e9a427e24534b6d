"""The DRAM element layouts (dtype and shape per memory) and instruction mnemonics, derived in isa."""
import numpy as np
import pytest

import isa
from isa import Alu, Finish, Gemm, Load, MemType, Store
from isa.asm import disassemble_one, mnemonic
from isa.encoding import elem_layout, int_dtype

MEMS = ("uop", "inp", "wgt", "acc", "out")


@pytest.mark.parametrize("preset", isa.preset_names())
@pytest.mark.parametrize("mem", MEMS)
def test_elem_layout_matches_elem_bytes(preset, mem):
    cfg = isa.make_config(preset)
    dtype, shape = elem_layout(cfg, mem)
    assert dtype.itemsize * int(np.prod(shape, dtype=np.int64)) == cfg.elem_bytes(mem)
    assert dtype.kind == ("u" if mem == "uop" else "i")


def test_int_dtype():
    assert [int_dtype(b) for b in (8, 16, 32)] == [np.dtype(np.int8), np.dtype("<i2"), np.dtype("<i4")]


@pytest.mark.parametrize("insn, want", [
    (Load(MemType.INP, 0, 0, 1, 1, 1), "LOAD.INP"),
    (Store(MemType.OUT, 0, 0, 1, 1, 1), "STORE.OUT"),
    (Gemm(False, 0, 1, 1, 1), "GEMM"),
    (Alu("add", False, 0, 1, 1, 1), "ALU.ADD"),
    (Finish(), "FINISH"),
])
def test_mnemonic_heads_the_disassembly(insn, want):
    assert mnemonic(insn) == want
    assert disassemble_one(insn).split()[0] == want
