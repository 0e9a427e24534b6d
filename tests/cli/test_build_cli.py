"""vta build / vta run FILE.vtamod / vta sim|disasm --layer, `vta run --json/--outputs/--plot`, and overwrite refusal
for every output option of every command."""
from __future__ import annotations

import json
import logging

import numpy as np
import onnx
import pytest

from compiler.executor import build
from tests.fuzz.targets import IN_SHAPE, base_model
from vta.cli import main

logging.getLogger().setLevel(logging.ERROR)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("build")
    model = d / "m.onnx"
    onnx.save(base_model(), str(model))
    x = np.random.default_rng(1).standard_normal(IN_SHAPE).astype(np.float32)
    np.save(d / "x.npy", x)
    calib = np.random.default_rng(2).standard_normal((4,) + IN_SHAPE[1:]).astype(np.float32)
    np.save(d / "c.npy", calib)
    mod_path = d / "m.vtamod"
    assert main(["build", str(model), "--config", "tiny", "--calibrate", "4", "--calibration-data", str(d / "c.npy"),
                 "-o", str(mod_path), "--no-progress"]) == 0
    return d, model, mod_path, x, calib


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_build_then_run_the_module_equals_the_onnx_run(files, capsys, tmp_path):
    d, model, mod_path, x, calib = files
    capsys.readouterr()
    assert main(["run", str(model), "--config", "tiny", "--calibrate", "4", "--calibration-data", str(d / "c.npy"),
                 "--input", str(d / "x.npy"), "--outputs", str(tmp_path / "a.npz"), "--json", "--no-progress"]) == 0
    a = _last_json(capsys.readouterr().out)
    assert main(["run", str(mod_path), "--input", str(d / "x.npy"), "--outputs", str(tmp_path / "b.npz"), "--json"]) == 0
    out = capsys.readouterr().out
    b = _last_json(out)
    assert b["exported"] and b["config"] == a["config"] == "tiny"
    assert b["summary"]["accel_cycles"] == a["summary"]["accel_cycles"] > 0
    ya, yb = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    assert ya.files == yb.files == ["y"]
    np.testing.assert_array_equal(ya["y"], yb["y"])
    # the --outputs file round-trips: what the run computed, bit for bit
    want = build(base_model(), "tiny", calibration=calib, progress=False)(x=x)
    np.testing.assert_array_equal(ya["y"], want)
    # the profile's totals are the sums of its rows
    rows = b["layers"]
    assert sum(r["cycles"] or 0 for r in rows) == b["summary"]["accel_cycles"]
    assert sum(r["time_ms"] for r in rows if r["target"] == "cpu") == pytest.approx(b["summary"]["cpu_time_ms"])


def test_run_json_profile_totals_and_labels(files, capsys, tmp_path):
    d, model, *_ = files
    assert main(["run", str(model), "--config", "tiny", "--calibrate", "2", "--json", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "warning: calibrating on random data" in out
    j = _last_json(out)
    rows, s = j["layers"], j["summary"]
    acc = [r for r in rows if r["target"] == "accel"]
    assert sum(r["cycles"] for r in acc) == s["accel_cycles"]
    assert sum(r["accel_ms"] for r in acc) == pytest.approx(s["accel_time_ms"])
    assert sum(r["time_ms"] for r in rows if r["target"] == "cpu") == pytest.approx(s["cpu_time_ms"])
    assert sum(r["real_macs"] for r in acc) == s["real_macs"] and sum(r["padded_macs"] for r in acc) == s["macs"]
    assert all(r["ran_on"] == "accel:sim" for r in acc) and all(r["padded_macs"] >= r["real_macs"] for r in acc)
    assert j["outputs"]["y"]["shape"] == [1, 10]


def test_llvm_target_rows_never_say_accel(files, capsys):
    d, model, *_ = files
    assert main(["run", str(model), "--target", "llvm", "--json", "--no-progress"]) == 0
    out = capsys.readouterr().out
    rows = _last_json(out)["layers"]
    assert rows and not any(str(r.get("ran_on", "")).startswith("accel") for r in rows)
    assert "│ accel" not in out and "of the MACs in accelerator layers" not in out


def test_float64_input_is_announced(files, capsys, tmp_path):
    d, _, mod_path, x, _ = files
    np.save(tmp_path / "x64.npy", x.astype(np.float64))
    assert main(["run", str(mod_path), "--input", str(tmp_path / "x64.npy")]) == 0
    assert "input 'x' is float64; converted to float32" in capsys.readouterr().out


def test_plot_writes_a_png(files, capsys, tmp_path):
    _, _, mod_path, *_ = files
    assert main(["run", str(mod_path), "--plot", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _moved_bytes(mod_path, cfg) -> dict[str, int]:
    """DRAM bytes each accelerator layer's programs move, read from their decoded instruction streams: 16 per
    instruction fetched, rows x columns x element bytes per LOAD/STORE (micro-op loads included)."""
    from isa.encoding import decode_stream
    from isa.instructions import Load, MemType, Store
    from jit_runtime import load_module

    moved: dict[str, int] = {}
    for layer, _, prog in load_module(mod_path).layer_programs():
        insns = decode_stream(prog.insn_bytes, cfg)
        n = 16 * len(insns) + sum(i.y_size * i.x_size * cfg.elem_bytes(MemType(i.mem).name.lower())
                                  for i in insns if isinstance(i, (Load, Store)))
        moved[layer] = moved.get(layer, 0) + n
    return moved


def test_roofline_points_from_the_instruction_streams(files, capsys, tmp_path):
    from isa import make_config

    d, model, mod_path, *_ = files
    cfg = make_config("tiny")
    capsys.readouterr()
    assert main(["run", str(mod_path), "--input", str(d / "x.npy"), "--roofline", str(tmp_path / "r.png"),
                 "--json"]) == 0
    res = _last_json(capsys.readouterr().out)
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    roof = res["roofline"]
    peak, bw = cfg.batch * cfg.block_in * cfg.block_out, cfg.bus_width // 8  # tiny: 1x4x4 GEMM, 32-bit bus
    assert (roof["peak_macs_per_cycle"], roof["dram_bytes_per_cycle"]) == (peak, bw) == (16, 4)
    rows = {r["name"]: r for r in res["layers"] if r["target"] == "accel"}
    moved = _moved_bytes(mod_path, cfg)
    assert [p["name"] for p in roof["layers"]] == list(rows) == list(moved)
    for p in roof["layers"]:
        r = rows[p["name"]]
        assert p["dram_bytes"] == r["dram_bytes"] == moved[p["name"]]
        assert p["intensity"] == pytest.approx(r["real_macs"] / moved[p["name"]])
        assert p["macs_per_cycle"] == pytest.approx(r["real_macs"] / r["cycles"])
        assert p["macs_per_cycle"] <= min(peak, p["intensity"] * bw)  # no layer is above its roof
        assert p["bound"] == ("memory" if p["intensity"] < peak / bw else "compute")
    # the ONNX model's run draws the same points
    assert main(["run", str(model), "--config", "tiny", "--calibrate", "4", "--calibration-data", str(d / "c.npy"),
                 "--input", str(d / "x.npy"), "--roofline", str(tmp_path / "r2.png"), "--json", "--no-progress"]) == 0
    again = _last_json(capsys.readouterr().out)["roofline"]["layers"]
    assert [(p["name"], p["dram_bytes"], p["cycles"]) for p in again] == \
        [(p["name"], p["dram_bytes"], p["cycles"]) for p in roof["layers"]]


def test_roofline_needs_accelerator_programs(files, capsys, tmp_path):
    _, model, *_ = files
    assert main(["run", str(model), "--config", "tiny", "--calibrate", "1", "--target", "ref", "--roofline",
                 str(tmp_path / "r.png")]) == 2
    assert "--target ref runs no accelerator programs" in capsys.readouterr().err
    assert not (tmp_path / "r.png").exists()


def test_sim_and_disasm_of_a_layer(files, capsys):
    _, _, mod_path, *_ = files
    assert main(["disasm", str(mod_path), "--json"]) == 0
    listing = _last_json(capsys.readouterr().out)
    assert len(listing["programs"]) == 2 and listing["programs"][0]["layer"] == "conv"
    assert main(["disasm", str(mod_path), "--layer", "0"]) == 0
    assert "GEMM" in capsys.readouterr().out
    assert main(["sim", str(mod_path), "--layer", "fc", "--json"]) == 0
    assert _last_json(capsys.readouterr().out)["cycles"] > 0
    assert main(["sim", str(mod_path)]) == 2
    assert "choose one with --layer" in capsys.readouterr().err
    assert main(["sim", str(mod_path), "--layer", "7"]) == 2
    assert "programs 0..1" in capsys.readouterr().err


def test_exported_module_rejects_compile_options(files, capsys):
    _, _, mod_path, *_ = files
    assert main(["run", str(mod_path), "--calibrate", "2"]) == 2
    assert "exported module" in capsys.readouterr().err
    assert main(["run", str(mod_path), "--config", "pynq-z1"]) == 2
    assert "compiled for config 'tiny'" in capsys.readouterr().err


# ---- never overwrite without asking: every output option of every command ---------------------------------------
def _cases(d, model, mod_path):
    """(argv with OUT for the output path, option) for every output option."""
    run = ["run", str(mod_path)]
    return [(run + ["--outputs", "OUT"], "--outputs"), (run + ["--plot", "OUT"], "--plot"),
            (run + ["--roofline", "OUT"], "--roofline"),
            (["run", str(model), "--config", "tiny", "--calibrate", "1", "--target", "ref", "--trace", "OUT"], "--trace"),
            (["build", str(model), "--config", "tiny", "--calibrate", "1", "-o", "OUT"], "-o"),
            (["config", "tiny", "--save", "OUT"], "--save")]


@pytest.mark.parametrize("k", range(6))
def test_every_output_option_refuses_an_existing_file(files, capsys, tmp_path, k):
    d, model, mod_path, *_ = files
    argv, option = _cases(d, model, mod_path)[k]
    victim = tmp_path / "victim.onnx"
    victim.write_bytes(b"precious")
    argv = [str(victim) if a == "OUT" else a for a in argv]
    assert main(argv + ["--no-progress"] if argv[0] in ("build",) else argv) == 2
    err = capsys.readouterr().err
    assert f"{option} {victim} already exists; pass --force" in err and "Traceback" not in err
    assert victim.read_bytes() == b"precious"
    if option != "--save":  # --force overwrites (config --save checked below with a valid file name)
        assert main(argv + ["--force"]) == 0
        assert victim.read_bytes() != b"precious"


def test_sim_outputs_refuse_existing_files(files, capsys, tmp_path):
    _, _, mod_path, *_ = files
    for option in ("--trace", "--timeline"):
        victim = tmp_path / f"v{option[2:]}"
        victim.write_bytes(b"keep")
        assert main(["sim", str(mod_path), "--layer", "0", option, str(victim)]) == 2
        assert "already exists; pass --force" in capsys.readouterr().err and victim.read_bytes() == b"keep"
        assert main(["sim", str(mod_path), "--layer", "0", option, str(victim), "--force"]) == 0
        assert victim.read_bytes() != b"keep"  # the path as given (no suffix appended)


def test_config_save_force(tmp_path, capsys):
    out = tmp_path / "c.json"
    out.write_text("{}")
    assert main(["config", "tiny", "--save", str(out)]) == 2
    assert main(["config", "tiny", "--save", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["name"] == "tiny"


def test_two_outputs_on_one_path_are_refused(files, capsys, tmp_path):
    _, _, mod_path, *_ = files
    p = tmp_path / "same"
    assert main(["run", str(mod_path), "--outputs", str(p), "--plot", str(p)]) == 2
    assert "name the same file" in capsys.readouterr().err and not p.exists()


def test_llvm_cpu_jit_compile_time_is_reported_once_apart_from_the_rows(files, capsys):
    d, model, *_ = files
    assert main(["run", str(model), "--config", "tiny", "--calibrate", "1", "--cpu", "llvm", "--json",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    j = _last_json(out)
    compiled = [r for r in j["layers"] if r.get("compile_ms")]
    assert compiled and j["summary"]["jit_compile_ms"] == pytest.approx(sum(r["compile_ms"] for r in compiled))
    assert "JIT compilation (once, on first use; not in the rows)" in out


def test_tuning_log_option_reaches_build(files, capsys, tmp_path):
    d, model, *_ = files
    assert main(["run", str(model), "--calibrate", "1", "--tuning-log", str(tmp_path / "none.log")]) == 2
    err = capsys.readouterr().err
    assert "tuning log" in err and "does not exist" in err
    (tmp_path / "t.log").write_text("")
    assert main(["run", str(model), "--target", "llvm", "--tuning-log", str(tmp_path / "t.log")]) == 2
    assert "--tuning-log applies to accelerator targets" in capsys.readouterr().err
