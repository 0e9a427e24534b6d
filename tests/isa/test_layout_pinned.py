"""Pins the pynq-z1 bit position of every field of every format: a silent layout change fails here."""
import pytest

import isa
from isa import Alu, Deps, Finish, Gemm, Load, MemType, Store, Uop

PINNED = {
    "MEM": [("opcode", 0, 3), ("pop_prev", 3, 1), ("pop_next", 4, 1), ("push_prev", 5, 1), ("push_next", 6, 1), ("mem", 7, 3), ("sram_base", 10, 13), ("dram_base", 23, 32), ("y_size", 55, 16), ("x_size", 71, 16), ("x_stride", 87, 16), ("y_pad0", 103, 4), ("y_pad1", 107, 4), ("x_pad0", 111, 4), ("x_pad1", 115, 4), ("pad_value", 119, 8)],
    "GEMM": [("opcode", 0, 3), ("pop_prev", 3, 1), ("pop_next", 4, 1), ("push_prev", 5, 1), ("push_next", 6, 1), ("reset", 7, 1), ("uop_bgn", 8, 13), ("uop_end", 21, 14), ("iter_out", 35, 14), ("iter_in", 49, 14), ("dst_factor_out", 63, 11), ("dst_factor_in", 74, 11), ("src_factor_out", 85, 11), ("src_factor_in", 96, 11), ("wgt_factor_out", 107, 10), ("wgt_factor_in", 117, 10), ("overwrite", 127, 1)],
    "ALU": [("opcode", 0, 3), ("pop_prev", 3, 1), ("pop_next", 4, 1), ("push_prev", 5, 1), ("push_next", 6, 1), ("reset", 7, 1), ("uop_bgn", 8, 13), ("uop_end", 21, 14), ("iter_out", 35, 14), ("iter_in", 49, 14), ("dst_factor_out", 63, 11), ("dst_factor_in", 74, 11), ("src_factor_out", 85, 11), ("src_factor_in", 96, 11), ("alu_opcode", 107, 3), ("use_imm", 110, 1), ("imm", 111, 16)],
    "FINISH": [("opcode", 0, 3), ("pop_prev", 3, 1), ("pop_next", 4, 1), ("push_prev", 5, 1), ("push_next", 6, 1)],
    "UOP": [("dst", 0, 11), ("src", 11, 11), ("wgt", 22, 10)],
}

CFG = isa.make_config("pynq-z1")


@pytest.mark.parametrize("fmt", sorted(PINNED))
def test_every_field_position_is_pinned(fmt):
    lay = isa.layouts(CFG)[fmt]
    assert [(f.name, f.lo, f.width) for f in lay.fields] == PINNED[fmt]


def test_single_field_words_by_hand():
    # each word below is worked out from the pinned table: value << lo, plus the opcode
    assert isa.encode(Finish(), CFG) == 3
    assert isa.encode(Finish(Deps(pop_prev=True, push_next=True)), CFG) == 3 | (1 << 3) | (1 << 6)
    assert isa.encode(Gemm(False, 0, 0, 1, 0), CFG) == 2 | (1 << 35)
    assert isa.encode(Gemm(True, 5, 9, 0, 3, wgt_factor_in=7), CFG) == 2 | (1 << 7) | (5 << 8) | (9 << 21) | (3 << 49) | (7 << 117)
    assert isa.encode(Load(MemType.WGT, 17, 1000, 2, 3, 4, x_pad1=15), CFG) == (
        0 | (1 << 7) | (17 << 10) | (1000 << 23) | (2 << 55) | (3 << 71) | (4 << 87) | (15 << 115))
    # pad_value = -3 is the 8-bit two's complement 0xFD at bit 119
    assert isa.encode(Load(MemType.INP, 0, 0, 1, 1, 1, x_pad0=1, pad_value=-3), CFG) == (
        0 | (2 << 7) | (1 << 55) | (1 << 71) | (1 << 87) | (1 << 111) | (0xFD << 119))
    assert isa.decode(0 | (2 << 7) | (0xFD << 119), CFG).pad_value == -3
    assert isa.encode(Store(MemType.OUT, 1, 2, 3, 4, 5), CFG) == (
        1 | (4 << 7) | (1 << 10) | (2 << 23) | (3 << 55) | (4 << 71) | (5 << 87))
    # imm = -1 is 16 ones at bit 111; ADD is opcode 2 at bit 107
    assert isa.encode(Alu("ADD", False, 0, 1, 1, 1, use_imm=True, imm=-1), CFG) == (
        4 | (1 << 21) | (1 << 35) | (1 << 49) | (2 << 107) | (1 << 110) | (0xFFFF << 111))
    assert isa.encode(Gemm(False, 0, 0, 0, 0, overwrite=True), CFG) == 2 | (1 << 127)
    assert isa.encode_uop(Uop(dst=3, src=5, wgt=7), CFG) == 3 | (5 << 11) | (7 << 22)
