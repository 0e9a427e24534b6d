"""Out-of-range fields, undecodable words, bad assembly and impossible configs raise clear errors."""
import pytest

import isa
from isa import Alu, ConfigError, EncodingError, Gemm, Load, MemType
from isa.errors import AsmError

CFG = isa.make_config("pynq-z1")


def test_field_too_wide_names_field_value_and_width():
    with pytest.raises(EncodingError, match=r"GEMM field iter_out=16384 does not fit its 14-bit field \(allowed 0..16383\)"):
        isa.encode(Gemm(False, 0, 1, 16384, 1), CFG)
    with pytest.raises(EncodingError, match=r"LOAD field sram_base=8192 .* 13-bit"):
        isa.encode(Load(MemType.INP, 8192, 0, 1, 1, 1), CFG)
    with pytest.raises(EncodingError, match=r"field x_pad0=16 .* 4-bit"):
        isa.encode(Load(MemType.INP, 0, 0, 1, 1, 1, x_pad0=16), CFG)
    with pytest.raises(EncodingError, match=r"field dram_base=-1"):
        isa.encode(Load(MemType.INP, 0, -1, 1, 1, 1), CFG)


def test_signed_immediate_range():
    isa.encode(Alu("ADD", False, 0, 1, 1, 1, use_imm=True, imm=-32768), CFG)
    with pytest.raises(EncodingError, match=r"imm=32768 does not fit its 16-bit signed field \(allowed -32768..32767\)"):
        isa.encode(Alu("ADD", False, 0, 1, 1, 1, use_imm=True, imm=32768), CFG)


def test_field_width_follows_config():
    tiny = isa.make_config("tiny")  # acc depth 128 -> 7-bit dst factors
    isa.encode(Gemm(False, 0, 1, 1, 1, dst_factor_out=127), tiny)
    with pytest.raises(EncodingError, match=r"dst_factor_out=128 .* 7-bit"):
        isa.encode(Gemm(False, 0, 1, 1, 1, dst_factor_out=128), tiny)


def test_undecodable_words():
    with pytest.raises(EncodingError, match=r"opcode 7 is not one of"):
        isa.decode(7, CFG)
    with pytest.raises(EncodingError, match=r"memory type 6 is not one of"):
        isa.decode(0 | (6 << 7), CFG)
    with pytest.raises(EncodingError, match=r"unknown ALU opcode 7"):
        isa.decode(4 | (7 << 107), CFG)
    with pytest.raises(EncodingError, match="not a multiple of 16"):
        isa.decode_stream(b"\x00" * 17, CFG)


def test_unknown_alu_op_name():
    with pytest.raises(EncodingError, match=r"unknown ALU op 'FOO'; known: MIN, MAX, ADD, SHR, MUL"):
        isa.encode(Alu("FOO", False, 0, 1, 1, 1), CFG)


@pytest.mark.parametrize("text, message", [
    ("JUMP x=1", r"line 1: unknown mnemonic 'JUMP'"),
    ("LOAD sram_base=1", r"line 1: LOAD needs a memory type suffix"),
    ("GEMM foo=1", r"line 1: GEMM has no field 'foo'"),
    ("GEMM iter_out=abc", r"line 1: field iter_out='abc' is not an integer"),
    ("FINISH\nGEMM deps=pop_later", r"line 2: unknown dependency flag 'pop_later'"),
    ("ALU.XOR uop_end=1", r"line 1: unknown ALU op 'XOR'"),
    ("GEMM iter_out", r"expected field=value"),
])
def test_assembler_errors(text, message):
    with pytest.raises(AsmError, match=message):
        isa.assemble(text)


@pytest.mark.parametrize("overrides, message", [
    ({"log_block_in": 7}, r"HwConfig.log_block_in = 7: must be an integer in 0..6"),
    ({"inp_width": 4}, r"HwConfig.inp_width = 4: must be one of \(8, 16, 32\)"),
    ({"acc_width": 8, "inp_width": 16}, r"HwConfig.acc_width = 8: must be >= inp_width"),
    ({"bus_width": 48}, r"HwConfig.bus_width = 48: must be a power of two in 32..512"),
    ({"inp_buff_size": 3000}, r"HwConfig.inp_buff_size = 3000: must be a power of two"),
    ({"wgt_buff_size": 256}, r"HwConfig.wgt_buff_size = 256: must hold at least 2 elements of 256 bytes"),
    ({"dram_latency": 0}, r"HwConfig.dram_latency = 0"),
    ({"dram_latency": 2}, r"HwConfig.dram_latency = 2: must be an integer number of cycles in 3\.\.4096"),
    ({"acc_buff_size": 1 << 22, "inp_buff_size": 1 << 22}, r"a micro-op needs .* bits > 32"),
    ({"uop_buff_size": 1 << 20}, r"the GEMM format needs 138 bits but a word has 128; its widest field is uop_end"),
])
def test_impossible_configs_rejected(overrides, message):
    with pytest.raises(ConfigError, match=message):
        isa.make_config("pynq-z1", **overrides)


def test_unknown_preset_and_field(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown preset 'pynq'; presets: ecp5-85f, pynq-z1, tiny, ultra96"):
        isa.make_config("pynq")
    with pytest.raises(ConfigError, match=r"unknown HwConfig field\(s\) \['blocks'\]"):
        isa.make_config("tiny", blocks=3)
    with pytest.raises(ConfigError, match="does not exist"):
        isa.make_config(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        isa.make_config(str(bad))
