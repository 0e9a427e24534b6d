"""The config signature the RTL exposes and the pynq driver checks: what changes it and what does not."""
from __future__ import annotations

from isa import make_config
from isa.registers import REGISTERS, SIGNATURE
from isa.signature import config_signature, signature_text


def test_signature_follows_the_hardware_not_the_names():
    tiny = make_config("tiny")
    sig = config_signature(tiny)
    assert 0 < sig < 1 << 32
    # fields that change neither the encodings nor the datapath
    assert config_signature(tiny.replace(name="mine", clock_mhz=42.0, dram_latency=100, fpga_part="x")) == sig
    # fields that do: buffer depths (index widths), lanes, widths, bus, queues
    for change in ({"acc_buff_size": 4096}, {"log_block_in": 3}, {"out_width": 16}, {"bus_width": 64},
                   {"cmd_queue_depth": 8}, {"gemm_pipeline": 5}):
        assert config_signature(tiny.replace(**change)) != sig, change
    assert config_signature(make_config("pynq-z1")) != config_signature(make_config("ultra96"))
    assert '"acc_buff_size": 2048' in signature_text(tiny) and "MEM" in signature_text(tiny)


def test_register_map_is_word_aligned_and_distinct():
    offs = list(REGISTERS.values())
    assert len(set(offs)) == len(offs) and all(o % 4 == 0 for o in offs) and SIGNATURE in offs
