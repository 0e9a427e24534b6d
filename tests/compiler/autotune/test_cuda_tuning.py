"""Tuning the cuda target's conv schedule: the space, the log (keyed by device), the build that applies it (kept only
where faster than the default) and ``vta tune --target cuda``; timed on the emulated device
(``VTA_CUDA_DEVICE=emulate``), whose records are its own."""
from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest

from compiler.autotune import cuda_conv as cc
from compiler.autotune.measure import Result
from compiler.autotune.records import TuningLogWarning
from compiler.topi.conv2d_direct import Conv2dSpec
from compiler.topi.conv2d_gpu import GpuConvKnobs, default_knobs
from compiler.zoo.builder import OnnxBuilder
from vta.cli import main

SPEC = Conv2dSpec(1, 8, 6, 6, 16, 3, 3, (1, 1), (1, 1, 1, 1))


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv("VTA_CUDA_DEVICE", "emulate")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    b = OnnxBuilder(6)
    y = b.conv_bn("input", 8, 16, 3)
    y = b.op("Add", [b.conv_bn(y, 16, 16, 3, act=None), y])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    p = tmp_path_factory.mktemp("cuda_tune") / "m.onnx"
    onnx.save(b.model("m", "input", (1, 8, 6, 6), b.gemm(y, 16, 4)), str(p))
    return p


def test_space_holds_the_defaults_and_names_what_it_skips():
    """ResNet-18's layers: the default knobs are a valid point of each task's space; redundant and oversized
    settings are rejected with a reason; features have one length and are finite."""
    layers = [Conv2dSpec(1, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3, 3, 3))] + [
        Conv2dSpec(1, c, h, h, c, 3, 3, (1, 1), (1, 1, 1, 1)) for c, h in ((64, 56), (128, 28), (256, 14), (512, 7))]
    lengths = set()
    for spec in layers:
        space = cc.CudaConvTask(spec, True, False, "relu").make_space()
        d = default_knobs(spec)
        assert space.point(d) is not None and space.reject(d) is None, (spec, d)
        cands = space.candidates()
        assert 50 < len(cands) < len(space)
        for p in cands[:: max(1, len(cands) // 40)]:
            f = space.features(space.knobs(p))
            lengths.add(f.shape)
            assert np.isfinite(f).all()
    assert len(lengths) == 1
    small = cc.CudaConvTask(Conv2dSpec(1, 64, 1, 1, 64, 1, 1)).make_space()  # one output pixel
    assert small.reject(GpuConvKnobs(64, 4, 4, 1, 8)) is None
    assert "half of which covers the output" in small.reject(GpuConvKnobs(64, 8, 4, 1, 8))
    assert "thread tile the half of which" in small.reject(GpuConvKnobs(64, 4, 4, 4, 8))
    assert space.reject(GpuConvKnobs(64, 64, 8, 16, 8)) == "128 accumulators a thread (at most 64)"
    assert space.reject(GpuConvKnobs(64, 64, 3, 4)).startswith("bad knob: conv2d_gpu: vo=3 must divide bo=64")


def test_tasks_of_a_model_and_what_is_not_tuned(tiny_model, emulated):
    from compiler.executor import build

    mod = build(str(tiny_model), target="cuda", progress=False)
    tasks = cc.graph_tasks(mod.graph)
    assert [(t.spec.c, t.spec.o, t.residual) for t in tasks] == [(8, 16, False), (16, 16, True)]
    with pytest.raises(ValueError, match="one group"):
        cc.CudaConvTask(Conv2dSpec(1, 8, 6, 6, 8, 3, 3, groups=8))


def test_trials_are_logged_for_this_device_and_read_back(tmp_path, emulated):
    from compiler.autotune import tune_tasks

    task = cc.CudaConvTask(SPEC, True, False, "relu", (), "c1")
    log = tmp_path / "c.log"
    with cc.CudaMeasurer() as m:
        res = tune_tasks([task], m, "random", 3, 3, str(log), 0)
    assert res[0].trials == 3 and res[0].invalid_measured == 0
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert len(lines) == 3 and {ln["target"] for ln in lines} == {"cuda"}
    assert lines[0]["gpu"] == {"name": "emulate", "arch": "sm_80"} and lines[0]["result"]["ns"] > 0
    assert GpuConvKnobs(**lines[0]["config"]) == default_knobs(SPEC)  # the default is measured first
    other = dict(lines[1], gpu={"name": "NVIDIA H200", "arch": "sm_90"})
    bad = dict(lines[2], config={"bo": 64, "zz": 1})
    with log.open("a") as f:
        f.write(json.dumps(other) + "\n" + json.dumps(bad) + "\n" + json.dumps(dict(lines[0], target="llvm")) + "\n")
    with pytest.warns(TuningLogWarning) as caught:
        recs = cc.load_cuda_records(log)
    text = " ".join(str(w.message) for w in caught)
    assert "record for device {'name': 'NVIDIA H200', 'arch': 'sm_90'}" in text
    assert "unknown knobs ['zz']" in text and "a record for target 'llvm', not the cuda target" in text
    assert len(recs) == 3 and all(r[2] > 0 for r in recs)


def test_logged_knobs_are_kept_only_where_faster_than_the_default(monkeypatch, emulated):
    """The build-time check, with stubbed timings (the knobs' figure first, then the default's, per round): 2 %
    faster keeps the default, 10 % faster keeps the knobs; the default itself is never timed."""
    task = cc.CudaConvTask(SPEC, True, False, "relu")
    knobs = GpuConvKnobs(16, 16, 4, 4, 8, 1)
    for mine, keep in ((98, False), (90, True)):
        times = iter([mine, 100] * 5)
        monkeypatch.setattr(cc, "time_device_call", lambda call, dev, repeats=5: next(times))
        assert cc.faster_than_default(task, knobs) == (keep, mine, 100)
    assert cc.faster_than_default(task, default_knobs(SPEC)) == (False, 0, 0)


def test_build_applies_a_cuda_log(tiny_model, tmp_path, monkeypatch, emulated):
    """A log naming knobs for both convs: the build compiles them where they beat the default (stubbed: always)
    and computes what the untuned build computes; a log of another device changes nothing."""
    from compiler.executor import build

    base = build(str(tiny_model), target="cuda", progress=False)
    tasks = cc.graph_tasks(base.graph)
    chosen = {t.key: GpuConvKnobs(16, 4, 4, 1, 4, 2) for t in tasks}
    log = tmp_path / "c.log"
    log.write_text("".join(t.record_line(chosen[t.key], Result(1000, None, 0.0), "test") + "\n" for t in tasks))
    monkeypatch.setattr(cc, "faster_than_default", lambda task, knobs: (True, 1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningLogWarning)
        tuned = build(str(tiny_model), target="cuda", progress=False, tuning_log=log)
    assert tuned.compiled.stats["tuned_convs"] == 2
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "conv2d_gpu"]
    assert used == [GpuConvKnobs(16, 4, 4, 1, 4, 2)] * 2
    x = np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(tuned(input=x), base(input=x), rtol=1e-5, atol=1e-5)
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    log.write_text("".join(json.dumps(dict(ln, gpu={"name": "other", "arch": "sm_90"})) + "\n" for ln in lines))
    with pytest.warns(TuningLogWarning, match="no usable cuda record for 2 of 2"):
        again = build(str(tiny_model), target="cuda", progress=False, tuning_log=log)
    assert again.compiled.stats["tuned_convs"] == 0


def test_vta_tune_target_cuda(tiny_model, tmp_path, capsys, monkeypatch):
    log = str(tmp_path / "c.log")
    monkeypatch.setenv("VTA_CUDA_DEVICE", "gpu")
    from compiler.backend.cuda import device

    monkeypatch.setattr(device, "gpu_present", lambda: False)
    monkeypatch.setattr(device, "_DEVICE", {})
    assert main(["tune", str(tiny_model), "--target", "cuda", "--log", log]) == 2
    assert "--target cuda times kernels on a GPU: no GPU" in capsys.readouterr().err
    monkeypatch.setenv("VTA_CUDA_DEVICE", "emulate")
    assert main(["tune", str(tiny_model), "--target", "cuda", "--in-model", "2", "--log", log]) == 2
    assert "--in-model applies to --target llvm" in capsys.readouterr().err
    assert main(["tune", str(tiny_model), "--target", "cuda", "--trials", "3", "--batch", "3", "--tuner", "random",
                 "--log", log, "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["target"] == "cuda" and out["device"] == {"name": "emulate", "arch": "sm_80"} and out["tasks"] == 2
    assert [t["trials"] for t in out["per_task"]] == [3, 3] and 0 <= out["tasks_kept"] <= 2
    assert len(open(log).read().splitlines()) == 6


def test_products_are_tuned_and_applied_like_convs(tmp_path, monkeypatch, emulated):
    """A transformer's dense layers and attention MatMuls are cuda tasks too (the tiled GEMM's knobs): their space
    holds the defaults and shares the convs' features; trials are logged and read back; a build with the log
    compiles the chosen knobs (kept: stubbed faster) and computes what the untuned build computes."""
    from compiler.autotune import tune_tasks
    from compiler.executor import build
    from compiler.zoo.modern import bert, sample_inputs

    model = bert()
    base = build(model, target="cuda", progress=False)
    tasks = cc.graph_tasks(base.graph)
    gemms = [t for t in tasks if isinstance(t, cc.CudaGemmTask)]
    products = {plan.key[1:3] for plan, _ in base.cpu._plans.values() if plan.key[0] == "gemm_gpu"}
    assert {(t.a, t.b) for t in gemms} == products and len(gemms) >= 3
    conv_space = cc.CudaConvTask(SPEC).make_space()
    for t in gemms:
        space = t.make_space()
        d = t.default_knobs()
        assert space.point(d) is not None and space.reject(d) is None, t.describe()
        assert space.features(d).shape == conv_space.features(default_knobs(SPEC)).shape
    task = gemms[0]
    log = tmp_path / "g.log"
    with cc.CudaMeasurer() as m:
        res = tune_tasks([task], m, "random", 2, 2, str(log), 0)
    assert res[0].trials == 2 and res[0].invalid_measured == 0
    recs = cc.load_cuda_records(log)
    assert len(recs) == 2 and recs[0][0]["op"] == "gemm_float_gpu"
    chosen = GpuConvKnobs(8, 16, 2, 4, 4, 2)
    assert task.make_space().reject(chosen) is None
    log.write_text(task.record_line(chosen, Result(10, None, 0.0), "test") + "\n")
    monkeypatch.setattr(cc, "faster_than_default", lambda t, knobs: (True, 1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TuningLogWarning)  # the tasks without a record
        tuned = build(model, target="cuda", progress=False, tuning_log=log)
    assert tuned.compiled.stats["tuned_convs"] == 1
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "gemm_gpu"
            and plan.key[1:3] == (task.a, task.b)]
    assert used and all(k == chosen for k in used)
    feeds = sample_inputs(model, 1)[0]
    np.testing.assert_allclose(np.asarray(tuned(**feeds)), np.asarray(base(**feeds)), rtol=1e-5, atol=1e-5)
