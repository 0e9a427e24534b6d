"""Property tests: encode/decode and assemble/disassemble round-trip for every kind under every preset."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isa
from isa import Alu, Finish, Gemm, Load, Store
from tests.isa import strategies as S

PRESETS = isa.preset_names()
KINDS = {
    "LOAD": lambda c: S.mem_insn(c, Load),
    "STORE": lambda c: S.mem_insn(c, Store),
    "GEMM": S.gemm,
    "ALU": S.alu,
    "FINISH": lambda c: st.builds(Finish, S.deps),
}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_encode_decode_roundtrip(preset, kind):
    cfg = isa.make_config(preset)

    @settings(max_examples=60, deadline=None)
    @given(KINDS[kind](cfg))
    def check(insn):
        word = isa.encode(insn, cfg)
        assert 0 <= word < 1 << 128
        assert isa.decode(word, cfg) == insn

    check()


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_assemble_disassemble_roundtrip(preset, kind):
    cfg = isa.make_config(preset)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(KINDS[kind](cfg), min_size=1, max_size=4))
    def check(insns):
        text = isa.disassemble(insns)
        assert isa.assemble(text) == insns
        assert isa.disassemble(isa.assemble(text)) == text

    check()


@pytest.mark.parametrize("preset", PRESETS)
def test_uop_and_stream_roundtrip(preset):
    cfg = isa.make_config(preset)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(S.uop(cfg), min_size=1, max_size=8), st.lists(S.instruction(cfg), min_size=1, max_size=8))
    def check(uops, insns):
        for u in uops:
            assert isa.decode_uop(isa.encode_uop(u, cfg), cfg) == u
        words = isa.encode_uops(uops, cfg)
        dst, src, wgt = isa.encoding.decode_uop_array(words, cfg)
        assert list(dst) == [u.dst for u in uops] and list(src) == [u.src for u in uops]
        assert list(wgt) == [u.wgt for u in uops]
        raw = isa.encode_stream(insns, cfg)
        assert raw.shape == (len(insns), 16)
        assert isa.decode_stream(raw, cfg) == insns
        assert isa.decode_stream(raw.tobytes(), cfg) == insns

    check()
