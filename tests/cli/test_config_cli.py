"""``vta config``."""
import json

from vta.cli import main


def test_config_json_peak_gops(capsys):
    assert main(["config", "pynq-z1", "--json"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    data = json.loads(last)
    assert data["peak_gops"] == 2 * 256 * 100 / 1000 and data["macs_per_cycle"] == 256  # 256 MACs at 100 MHz


def test_config_table_and_save(capsys, tmp_path):
    out = tmp_path / "c.json"
    assert main(["config", "tiny", "--save", str(out)]) == 0
    text = capsys.readouterr().out
    assert "inp_depth" in text and "peak_gops" in text
    assert json.loads(out.read_text())["name"] == "tiny"
    assert main(["config", str(out), "--json"]) == 0


def test_config_unknown_preset_is_one_clear_line(capsys):
    assert main(["config", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown preset 'nope'" in err and "Traceback" not in err
