"""Config files are type-checked field by field; each bad file gets a ConfigError naming the field."""
from __future__ import annotations

import json

import pytest

import isa
from isa.errors import ConfigError


def _full() -> dict:
    return isa.make_config("tiny").to_dict()


def _expect(tmp_path, text: str, *words: str) -> None:
    path = tmp_path / "cfg.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as ei:
        isa.make_config(path)
    assert ei.type is ConfigError
    for w in words:
        assert w in str(ei.value), (w, str(ei.value))
    assert path.read_text() == text  # untouched


@pytest.mark.parametrize("field,value,words", [
    ("inp_width", 8.0, ["inp_width", "8.0", "integer"]),
    ("log_block_in", True, ["log_block_in", "True", "integer"]),
    ("name", 5, ["name", "string"]),
    ("dram_latency", "32", ["dram_latency", "integer"]),
    ("uop_buff_size", None, ["uop_buff_size", "integer"]),
    ("clock_mhz", [100], ["clock_mhz", "finite number"]),
    ("clock_mhz", 1e9, ["clock_mhz", "10000"]),
    ("clock_mhz", -5, ["clock_mhz"]),
])
def test_field_of_the_wrong_type_or_range(tmp_path, field, value, words):
    data = _full()
    data[field] = value
    _expect(tmp_path, json.dumps(data), *words)


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity", "NaN"])
def test_non_finite_clock(tmp_path, constant):
    text = json.dumps({**_full(), "clock_mhz": 100.0}).replace('"clock_mhz": 100.0', f'"clock_mhz": {constant}')
    assert constant in text
    _expect(tmp_path, text, constant)


def test_non_finite_clock_in_a_dict():
    with pytest.raises(ConfigError, match="clock_mhz"):
        isa.make_config({**_full(), "clock_mhz": float("inf")})


@pytest.mark.parametrize("text,kind", [("[1, 2]", "list"), ("null", "NoneType"), ("3", "int"), ('"tiny"', "str")])
def test_top_level_must_be_an_object(tmp_path, text, kind):
    _expect(tmp_path, text, "JSON object", kind)


def test_missing_fields_are_named(tmp_path):
    data = _full()
    del data["dram_latency"], data["fetch_burst"]
    _expect(tmp_path, json.dumps(data), "dram_latency", "fetch_burst", '"base"')


def test_missing_fields_come_from_a_named_base_preset(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"base": "tiny", "dram_latency": 20, "name": "mine"}))
    cfg = isa.make_config(path)
    assert cfg == isa.make_config("tiny", dram_latency=20, name="mine")


def test_unknown_base_preset(tmp_path):
    _expect(tmp_path, json.dumps({"base": "nope"}), "'base'", "nope", "tiny")


def test_unknown_field(tmp_path):
    _expect(tmp_path, json.dumps({**_full(), "clock": 5}), "clock", "unknown")


def test_not_json(tmp_path):
    _expect(tmp_path, "{inp_width: 8", "not valid JSON")


def test_source_of_a_wrong_type():
    with pytest.raises(ConfigError, match="list"):
        isa.make_config([1, 2])


def test_every_preset_and_round_trip_still_load(tmp_path):
    for name in isa.preset_names():
        cfg = isa.make_config(name)
        path = tmp_path / f"{name}.json"
        cfg.to_json(path)
        assert isa.make_config(path) == cfg
