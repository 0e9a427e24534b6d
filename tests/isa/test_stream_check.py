"""isa.encoding.check_stream (the vectorized validity check the pynq driver runs) against the scalar decoder:
on random words of every preset it refuses exactly the streams decode_stream refuses, with the same message,
and field_array reads every field as decode does."""
import numpy as np
import pytest

import isa
from isa.encoding import check_stream, field_array, layouts, stream_words


def _random_stream(cfg, rng, n):
    """Random 128-bit words whose opcode, memory type and ALU opcode are drawn so that both decodable and
    undecodable words occur."""
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    words = [int.from_bytes(r.tobytes(), "little") for r in raw]
    lays = layouts(cfg)
    out = []
    for w in words:
        op = int(rng.integers(0, 8))
        w = (w & ~7) | op
        if rng.random() < 0.9:  # mostly a valid memory type / ALU opcode, so that the stream goes on
            mem, alu = lays["MEM"].field("mem"), lays["ALU"].field("alu_opcode")
            w = (w & ~(((1 << mem.width) - 1) << mem.lo)) | (int(rng.integers(0, 5)) << mem.lo)
            if op == int(isa.Opcode.ALU):
                w = (w & ~(((1 << alu.width) - 1) << alu.lo)) | (int(rng.integers(0, 4)) << alu.lo)
        out.append(w)
    return out


@pytest.mark.parametrize("preset", isa.preset_names())
def test_check_stream_refuses_what_decode_refuses(preset):
    cfg = isa.make_config(preset)
    rng = np.random.default_rng(len(preset))
    refused = accepted = 0
    for _ in range(40):
        words = _random_stream(cfg, rng, int(rng.integers(1, 6)))
        raw = b"".join(w.to_bytes(16, "little") for w in words)
        try:
            want = isa.decode_stream(raw, cfg)
        except isa.EncodingError as exc:
            refused += 1
            with pytest.raises(isa.EncodingError) as got:
                check_stream(np.frombuffer(raw, np.uint8), cfg)
            assert str(got.value) == str(exc)
            continue
        accepted += 1
        got = check_stream(raw, cfg)
        assert [int(w[0]) | int(w[1]) << 64 for w in got] == words
        for k, insn in enumerate(want):  # every field of the decoded instruction, read vectorized
            lay = layouts(cfg)["MEM" if isinstance(insn, (isa.Load, isa.Store)) else
                               insn.intrinsic.upper() if isinstance(insn, isa.Gemm) else type(insn).__name__.upper()]
            for f in lay.fields:
                if f.name in ("opcode", "mem", "alu_opcode") or f.name in isa.encoding.DEP_FIELDS:
                    continue
                assert int(field_array(got[k:k + 1], f)[0]) == int(getattr(insn, f.name)), (f.name, insn)
    assert refused and accepted


def test_stream_length_must_be_whole_words():
    with pytest.raises(isa.EncodingError, match="not a multiple of 16"):
        stream_words(np.zeros(17, np.uint8))


@pytest.mark.parametrize("preset", isa.preset_names())
def test_encode_fast_path_equals_the_checked_encoder(preset):
    """encode's one-pass plan gives the field-by-field encoder's word for valid instructions of every kind, and its
    error (same message) for out-of-range fields, numpy integers, bad flags and bad memory types."""
    from dataclasses import replace

    from hypothesis import given, settings

    from isa import Deps, Load, MemType
    from isa.encoding import _encode_checked
    from tests.isa import strategies as S

    cfg = isa.make_config(preset)

    @settings(max_examples=150, deadline=None)
    @given(S.instruction(cfg))
    def same(insn):
        assert isa.encode(insn, cfg) == _encode_checked(insn, cfg)

    same()
    good = Load(MemType.INP, 0, 5, 1, 1, 1)
    assert isa.encode(replace(good, dram_base=np.int64(5)), cfg) == isa.encode(good, cfg)  # numpy ints still work
    for bad in (replace(good, y_size=1 << 16), replace(good, dram_base=-1), replace(good, sram_base=1.0),
                replace(good, deps=Deps(pop_prev=2)), replace(good, mem=7), replace(good, pad_value=1 << 20)):
        with pytest.raises((isa.EncodingError, ValueError)) as want:
            _encode_checked(bad, cfg)
        with pytest.raises(type(want.value)) as got:
            isa.encode(bad, cfg)
        assert str(got.value) == str(want.value)
