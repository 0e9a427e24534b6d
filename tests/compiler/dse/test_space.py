"""The design space: lists and ranges expand to the expected points; bad spaces are clear errors naming the field."""
from __future__ import annotations

import json

import pytest

from compiler.dse import SpaceError, parse_space


def test_lists_and_ranges_expand_to_the_cross_product():
    sp = parse_space({"base": "tiny", "params": {"log_block_out": [1, 2],
                                                 "clock_mhz": {"from": 100, "to": 200, "step": 50},
                                                 "acc_buff_size": {"from": 1024, "to": 4096, "times": 2}}})
    assert sp.params == {"log_block_out": [1, 2], "clock_mhz": [100, 150, 200], "acc_buff_size": [1024, 2048, 4096]}
    assert sp.size == 18 and len(sp.valid) + len(sp.pruned) == 18
    p = sp.valid[0]
    assert p.params == {"log_block_out": 1, "clock_mhz": 100, "acc_buff_size": 1024}
    assert p.fields["log_block_in"] == 2 and p.fields["bus_width"] == 32  # the rest from the base preset


def test_float_range_and_single_value():
    sp = parse_space({"params": {"clock_mhz": {"from": 100.0, "to": 125.0, "step": 12.5}, "bus_width": 64}})
    assert sp.params == {"clock_mhz": [100.0, 112.5, 125.0], "bus_width": [64]}
    assert sp.base.name == "pynq-z1"


def test_invalid_points_are_pruned_with_the_validators_reason():
    # 8x2 lanes with 64 KiB accumulators need a 13-bit acc index: 13 + 13 + 7 bits > a 32-bit micro-op
    sp = parse_space({"base": "tiny", "params": {"log_block_out": [1, 2], "acc_buff_size": [2048, 65536]}})
    bad = [p for p in sp.pruned if p["params"] == {"log_block_out": 1, "acc_buff_size": 65536}]
    assert len(bad) == 1 and "micro-op needs" in bad[0]["reason"] and "acc_buff_size" in bad[0]["reason"]
    assert {tuple(p.params.values()) for p in sp.valid} == {(1, 2048), (2, 2048), (2, 65536)}


@pytest.mark.parametrize("params, match", [
    ({"log_blok_out": [3]}, r"'log_blok_out' is not a HwConfig field; sweepable fields: .*log_block_out"),
    ({"name": ["a"]}, r"'name' is not a HwConfig field"),
    ({"bus_width": []}, r"'bus_width': the list of values is empty"),
    ({"clock_mhz": {"from": 200, "to": 100, "step": 50}}, r"'clock_mhz': the range .* is empty"),
    ({"clock_mhz": {"from": 100, "to": 200}}, r"'clock_mhz': a range is"),
    ({"clock_mhz": {"from": 100, "to": 200, "step": 0}}, r"'clock_mhz': range step must be > 0"),
    ({"acc_buff_size": {"from": 0, "to": 8, "times": 2}}, r"'acc_buff_size': a geometric range needs"),
    ({"clock_mhz": {"from": "100", "to": 200, "step": 1}}, r"'clock_mhz': range 'from' must be a finite number"),
])
def test_bad_fields_are_named(params, match):
    with pytest.raises(SpaceError, match=match):
        parse_space({"base": "tiny", "params": params})


def test_a_space_with_no_valid_point_says_why():
    with pytest.raises(SpaceError, match=r"no valid point: all 2 are rejected .*bus_width.*power of two"):
        parse_space({"base": "tiny", "params": {"bus_width": [48, 96]}})


def test_bad_files_and_keys(tmp_path):
    with pytest.raises(SpaceError, match="does not exist"):
        parse_space(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SpaceError, match="not valid JSON"):
        parse_space(tmp_path / "bad.json")
    (tmp_path / "s.json").write_text(json.dumps({"base": "tiny", "param": {"bus_width": [32]}}))
    with pytest.raises(SpaceError, match=r"unknown key\(s\) \['param'\]"):
        parse_space(tmp_path / "s.json")
    with pytest.raises(SpaceError, match=r"\"base\" 'nope'"):
        parse_space({"base": "nope", "params": {"bus_width": [32]}})
    with pytest.raises(SpaceError, match="non-empty object"):
        parse_space({"params": {}})
