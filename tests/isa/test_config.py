"""HwConfig presets, derived quantities and JSON round trips."""
import json

import pytest

import isa


def test_pynq_z1_preset_and_derived():
    c = isa.make_config("pynq-z1")
    assert (c.batch, c.block_in, c.block_out) == (1, 16, 16)
    assert (c.uop_buff_size, c.inp_buff_size, c.wgt_buff_size, c.acc_buff_size) == (32768, 32768, 262144, 131072)
    assert (c.bus_width, c.clock_mhz) == (64, 100.0)  # the clock its timing estimate supports (docs/fpga.md)
    # hand-computed: 32 KiB / 16 B = 2048 inp elements, 256 KiB / 256 B = 1024 wgt, 128 KiB / 64 B = 2048 acc
    assert (c.inp_depth, c.wgt_depth, c.acc_depth, c.uop_depth) == (2048, 1024, 2048, 8192)
    assert (c.inp_idx_bits, c.wgt_idx_bits, c.acc_idx_bits, c.uop_idx_bits) == (11, 10, 11, 13)
    assert c.macs_per_cycle == 256
    assert c.peak_gops == pytest.approx(2 * 256 * 100e6 / 1e9)


def test_other_presets():
    u = isa.make_config("ultra96")
    assert (u.bus_width, u.clock_mhz) == (128, 100.0)
    t = isa.make_config("tiny")
    assert (t.block_in, t.block_out) == (4, 4)
    e = isa.make_config("ecp5-85f")
    assert "LFE5U-85F" in e.fpga_part
    assert set(isa.preset_names()) >= {"pynq-z1", "ultra96", "tiny", "ecp5-85f"}


def test_json_roundtrip_and_overrides(tmp_path):
    c = isa.make_config("tiny", dram_latency=20)
    assert c.dram_latency == 20 and c.name == "tiny"
    path = tmp_path / "c.json"
    c.to_json(path)
    assert json.loads(path.read_text())["dram_latency"] == 20
    assert isa.make_config(str(path)) == c
    assert isa.HwConfig.from_json(path, bus_width=64).bus_width == 64
    assert c.replace(clock_mhz=50).clock_mhz == 50
    assert isa.HwConfig.from_preset("pynq-z1") == isa.make_config("pynq-z1")
