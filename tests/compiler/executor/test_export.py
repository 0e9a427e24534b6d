"""Exported modules: Module.export -> jit_runtime.load_module runs bit-exact with the same cycles; damaged or
mismatched files are clear errors."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from compiler.executor import build
from compiler.executor.export import ExportError
from compiler.zoo.builder import OnnxBuilder
from jit_runtime import ModuleFileError, load_module
from jit_runtime.exported import ModuleInputError

RNG = np.random.default_rng(28)


def export_model(batch: int = 2):
    """conv, depthwise conv, a residual Add, a strided conv, global pool and a dense layer at batch ``batch``."""
    b = OnnxBuilder(28)
    y = b.conv_bn("input", 3, 16, 3)
    d = b.conv_bn(y, 16, 16, 3, groups=16)
    r = b.op("Relu", [b.op("Add", [y, b.conv_bn(d, 16, 16, 1, act=None, gamma_scale=0.5)])])
    y = b.conv_bn(r, 16, 32, 3, stride=2)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    return b.model("export_test", "input", (batch, 3, 8, 8), b.gemm(y, 32, 10))


CALIB = RNG.standard_normal((8, 3, 8, 8)).astype(np.float32)
_BUILT: dict = {}


def built(config: str):
    if config not in _BUILT:
        _BUILT[config] = build(export_model(), config, target="sim", calibration=CALIB, progress=False)
    return _BUILT[config]


@pytest.mark.parametrize("config", ["tiny", "pynq-z1"])
def test_exported_module_is_bit_exact_with_the_same_cycles(config, tmp_path):
    mod = built(config)
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = mod(input=x)
    path = mod.export(tmp_path / "m.vtamod")
    rm = load_module(path)
    assert rm.input_names == ["input"] and rm.output_names == mod.output_names
    got = rm(input=x)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
    ops = {r["op"] for r in mod.profile()}
    assert {"AccelConv2D", "AccelDense"} <= ops
    acc = [(r["name"], r["cycles"]) for r in mod.profile() if r["target"] == "accel"]
    assert [(r["name"], r["cycles"]) for r in rm.profile() if r["target"] == "accel"] == acc
    assert rm.profile_summary()["accel_cycles"] == mod.profile_summary()["accel_cycles"]
    # a second input through the same loaded module: nothing of the first run is left behind
    x2 = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(rm(input=x2), mod(input=x2))


def test_every_layer_program_is_a_program(tmp_path):
    rm = load_module(built("tiny").export(tmp_path / "m.vtamod"))
    progs = rm.layer_programs()
    assert len(progs) >= 5 and all(p.n_insns > 0 and "out" in p.buffers for _, _, p in progs)
    res = progs[0][2].run("sim")
    assert res.cycles > 0


def test_inputs_are_checked_without_casts(tmp_path):
    rm = load_module(built("tiny").export(tmp_path / "m.vtamod"))
    with pytest.raises(ModuleInputError, match=r"dtype float64; the module takes float32"):
        rm(input=np.zeros((2, 3, 8, 8)))
    with pytest.raises(ModuleInputError, match=r"shape \(1, 3, 8, 8\)"):
        rm(input=np.zeros((1, 3, 8, 8), np.float32))
    with pytest.raises(ModuleInputError, match="unknown input 'x'"):
        rm.set_input("x", np.zeros(1))
    with pytest.raises(ModuleInputError, match="inputs not set"):
        rm.run()


def test_ref_target_cannot_be_exported(tmp_path):
    mod = build(export_model(), "tiny", target="ref", calibration=CALIB)
    with pytest.raises(ExportError, match="target.*cannot be exported"):
        mod.export(tmp_path / "m.vtamod")


def _rewrite(src, dst, edit):
    with np.load(src, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(arrays["header"].tobytes().decode())
    edit(header, arrays)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    with open(dst, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return dst


def _set(key, value):
    def edit(h, a):
        h[key] = value
    return edit


def _config_edit(h, a):
    h["config"]["log_acc_depth"] = h["config"].get("log_acc_depth", 9) - 1


def _step_input(h, a):
    h["steps"][0]["inputs"][0] = "nowhere"


def _drop_index(h, a):
    del a[next(k for k in sorted(a) if k.startswith("prog.1."))]


@pytest.mark.parametrize("edit, message", [
    (_set("version", 99), "format version 99; this runtime reads version 1"),
    (_set("format", "vta-program"), "is not 'vta-module' \\(a single program"),
    (_set("signature", "0x1234"), "config signature '0x1234' does not match"),
    (_config_edit, "signature|bad config"),
    (_step_input, "input 'nowhere' is not defined before it"),
    (_drop_index, "program 1"),
    (_set("steps", []), "'steps' must be a non-empty list"),
])
def test_damaged_or_mismatched_files_are_clear_errors(tmp_path, edit, message):
    good = built("tiny").export(tmp_path / "m.vtamod")
    bad = _rewrite(good, tmp_path / "bad.vtamod", edit)
    with pytest.raises(ModuleFileError, match=message):
        load_module(bad)


def test_truncated_and_foreign_files(tmp_path):
    good = built("tiny").export(tmp_path / "m.vtamod")
    raw = good.read_bytes()
    (tmp_path / "t.vtamod").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModuleFileError, match="not a vta module file|not a readable"):
        load_module(tmp_path / "t.vtamod")
    (tmp_path / "o.vtamod").write_text("hello")
    with pytest.raises(ModuleFileError, match="not an .npz archive"):
        load_module(tmp_path / "o.vtamod")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_module(tmp_path / "missing.vtamod")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("other.npy", b"")
    (tmp_path / "z.vtamod").write_bytes(buf.getvalue())
    with pytest.raises(ModuleFileError):
        load_module(tmp_path / "z.vtamod")


def test_batch_tiles_store_their_program_once(tmp_path):
    """A batch run as batch tiles launches one program per tile: the file holds each program once."""
    mod = build(export_model(batch=5), "tiny", target="sim", calibration=CALIB, progress=False)
    mod.accel.max_program_insns = 1  # one image per program
    x = RNG.standard_normal((5, 3, 8, 8)).astype(np.float32)
    want = mod(input=x)
    rm = load_module(mod.export(tmp_path / "m.vtamod"))
    np.testing.assert_array_equal(rm(input=x), want)
    assert rm.profile_summary()["accel_cycles"] == mod.profile_summary()["accel_cycles"]
    calls = rm.layer_programs()
    stored = {id(p) for _, _, p in calls}
    n_accel = sum(r["target"] == "accel" for r in mod.profile())
    assert len(calls) >= 5 * (n_accel - 1) and len(stored) <= len(calls) // 4  # the dense: its 5 rows in one program
