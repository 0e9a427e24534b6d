"""Tuning the llvm target's conv schedule: knobs compute the same conv, the space, the log, the never-slower rule."""
from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest

from compiler.autotune import TuningLogWarning, make_tuner, tune_tasks
from compiler.autotune import host_timed as ht
from compiler.autotune import llvm_conv as lc
from compiler.autotune.measure import Result
from compiler.executor import llvm_log, llvm_rank
from compiler.executor.llvm_tasks import extract_llvm_tasks
from compiler.topi import conv2d_direct as cd
from compiler.topi.conv2d_direct import Conv2dSpec, CpuConvKnobs
from compiler.zoo.builder import OnnxBuilder


def ref_conv(x, w, b, res, stride, pad):
    """NCHW conv + bias + residual, relu (numpy)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    y += b[None, :, None, None]
    if res is not None:
        y += res
    return np.maximum(y, 0)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("knobs", [CpuConvKnobs(8, 5, "fused", 0, "rc_ky_kx"),   # rows, ragged tail, (block, row) parallel
                                   CpuConvKnobs(8, 4, "outer", 2, "ky_kx_rc"),
                                   CpuConvKnobs(32, 3, "fused", 2, "ky_kx_rc"),  # flat pixels
                                   CpuConvKnobs(16, 7, "none", 1, "ky_kx_rc")])
def test_knob_settings_compute_the_conv(knobs, stride):
    spec = Conv2dSpec(1, 12, 9, 9, 32, 3, 3, (stride, stride), (1, 1, 1, 1))
    task = lc.LlvmConvTask(spec, bias=True, residual=True, act="relu")
    assert task.make_space().reject(knobs) is None
    x, wp, b, _ = task.inputs(knobs)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((32, 12, 3, 3)).astype(np.float32)
    oh = spec.oh
    res = rng.standard_normal((1, 32, oh, oh)).astype(np.float32)
    ks = knobs.apply(spec)
    got = task.kernel(knobs)(x, cd.pack_weight(ks, w), b, res.reshape(cd.output_shape(ks)))
    np.testing.assert_allclose(np.asarray(got).reshape(1, 32, oh, oh), ref_conv(x, w, b, res, stride, 1),
                               rtol=1e-4, atol=1e-4)


def test_space_holds_the_default_and_rejects_with_reasons():
    spec = Conv2dSpec(1, 16, 8, 8, 24, 1, 1, (2, 2))  # strided 1x1: channel vectors (unit-stride ones: pixels)
    task = lc.LlvmConvTask(spec)
    sp = task.make_space()
    assert sp.axes[0][1] == [8]  # 24 channels: only 8-channel blocks divide them
    d = task.default_knobs()
    assert sp.point(d) is not None and sp.reject(d) is None
    assert "xt exceeds" in sp.reject(CpuConvKnobs(8, 8, "none", 1, "rc_ky_kx"))  # rows of 4 pixels
    assert "1-wide kernel" in sp.reject(CpuConvKnobs(8, 2, "none", 2, "rc_ky_kx"))
    assert "must divide" in sp.reject(CpuConvKnobs(16, 2, "none", 1, "rc_ky_kx"))
    with pytest.raises(Exception, match="allowed"):
        CpuConvKnobs(8, 2, "sideways", 1, "rc_ky_kx").check(spec)
    with pytest.raises(ValueError, match="one group or depthwise"):
        lc.LlvmConvTask(Conv2dSpec(1, 16, 4, 4, 16, 3, 3, groups=2))


def ref_grouped(x, w, b, res, stride, pad, groups):
    """NCHW grouped conv + bias + residual, relu (numpy, float64)."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i:i + stride * oh:stride, j:j + stride * ow:stride]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    y += b[None, :, None, None]
    if res is not None:
        y += res
    return np.maximum(y, 0)


PIXEL_SPECS = [Conv2dSpec(1, 16, 8, 8, 24, 1, 1),                                    # 1x1, 64 pixels
               Conv2dSpec(1, 16, 13, 13, 16, 3, 3, (1, 1), (1, 1, 1, 1), groups=16),  # depthwise, 13-pixel rows
               Conv2dSpec(1, 16, 13, 21, 16, 3, 3, (2, 2), (1, 1, 1, 1), groups=16),  # depthwise, stride 2
               Conv2dSpec(1, 3, 17, 17, 8, 3, 3, (2, 2), (1, 1, 1, 1))]               # a 3-channel image stem


@pytest.mark.parametrize("spec", PIXEL_SPECS)
def test_pixel_knob_settings_compute_the_conv(spec):
    """Convs the library lays out with pixels in the vector lanes get the pixel settings (algo 'pixels'; depthwise
    convs only those, 1x1 convs and stems also the channel-vector ones), which hold the library's default; a spread
    of the valid settings of each layout (tiles, rows, serial or parallel) computes the conv."""
    res = spec.pointwise
    task = lc.LlvmConvTask(spec, bias=True, residual=res, act="relu")
    sp = task.make_space()
    assert isinstance(sp, lc.PixelConvSpace if spec.depthwise else lc.ConvLayoutsSpace)
    assert task.default_knobs().algo == "pixels" and sp.point(task.default_knobs()) in sp.candidates()
    pts = [p for p in sp.candidates() if sp.knobs(p).algo == "pixels"]
    other = [p for p in sp.candidates() if sp.knobs(p).algo != "pixels"]
    assert bool(other) != spec.depthwise
    pts += other[::max(1, len(other) // 4)]
    rng = np.random.default_rng(1)
    w = rng.standard_normal((spec.o, spec.cg, spec.kh, spec.kw)).astype(np.float32)
    b = rng.standard_normal(spec.o).astype(np.float32)
    r = rng.standard_normal((1, spec.o, spec.oh, spec.ow)).astype(np.float32) if res else None
    x = rng.standard_normal((1, spec.c, spec.h, spec.w)).astype(np.float32)
    want = ref_grouped(x, w, b, r, spec.stride[0], spec.pads[0], spec.groups)
    for p in [*pts[::max(1, len(pts) // 10)], pts[-1], sp.point(task.default_knobs())]:
        k = sp.knobs(p)
        ks = k.apply(spec)
        args = [x.reshape(cd.input_shape(ks)), cd.pack_weight(ks, w), b] + ([r.reshape(cd.output_shape(ks))] if res
                                                                           else [])
        got = np.asarray(task.kernel(k)(*args)).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(k))


def test_pixel_knobs_say_what_is_allowed():
    dw = Conv2dSpec(1, 16, 13, 13, 16, 3, 3, (1, 1), (1, 1, 1, 1), groups=16)
    conv3 = Conv2dSpec(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1))
    from compiler.te import TeError

    with pytest.raises(TeError, match="ob=1 and rows >= 1"):
        CpuConvKnobs(2, 13, "outer", 1, "rc_ky_kx", "pixels", 2).check(dw)
    with pytest.raises(TeError, match="takes float32 1x1 unit-stride convs"):
        CpuConvKnobs(8, 16, "outer", 1, "rc_ky_kx", "pixels").check(conv3)
    with pytest.raises(TeError, match="rows=2 is the pixel-vector depthwise"):
        CpuConvKnobs(8, 4, "outer", 1, "rc_ky_kx", "direct", 2).check(conv3)
    with pytest.raises(TeError, match="parallel in"):
        CpuConvKnobs(1, 13, "fused", 1, "rc_ky_kx", "pixels", 2).check(dw)
    with pytest.raises(TeError, match="depthwise float32 convs take algo='pixels'"):
        CpuConvKnobs(8, 4).check(dw)
    with pytest.raises(TeError, match="a row tile of 1..13"):
        CpuConvKnobs(1, 20, "outer", 1, "rc_ky_kx", "pixels", 2).check(dw)
    sp = lc.LlvmConvTask(dw).make_space()
    assert "this conv's space is its pixel-vector layout" in sp.reject(CpuConvKnobs(8, 4))
    assert "accumulator registers" in sp.reject(CpuConvKnobs(1, 13, "outer", 1, "rc_ky_kx", "pixels", 13))
    assert lc.LlvmConvTask(conv3).make_space().reject(CpuConvKnobs(1, 8, "outer", 1, "rc_ky_kx", "pixels")) is not None


@pytest.mark.parametrize("spec", [Conv2dSpec(1, 64, 14, 14, 96, 1, 1),                       # 1x1, ragged pixels
                                  Conv2dSpec(1, 3, 30, 30, 32, 7, 7, (2, 2), (3, 3, 3, 3))])  # a 7x7 image stem
def test_a_conv_of_both_layouts_gets_the_settings_of_each(spec):
    """A 1x1 conv or an image stem can take either layout: its space holds exactly the channel-vector space's and
    the pixel-vector space's valid settings (the default among them), says why a point of the merged grid belongs
    to neither, and gives every setting its layout space's features."""
    task = lc.LlvmConvTask(spec, bias=True)
    sp = task.make_space()
    assert isinstance(sp, lc.ConvLayoutsSpace)
    cv, px = lc.CpuConvSpace(task), lc.PixelConvSpace(task)
    got = {sp.knobs(p) for p in sp.candidates()}
    want = {cv.knobs(p) for p in cv.candidates()} | {px.knobs(p) for p in px.candidates()}
    assert got == want and {k.algo for k in got} >= {"direct", "pixels"}
    assert sp.point(task.default_knobs()) in sp.candidates()
    assert "not a setting of the channel-vector layout's space" in sp.reject(CpuConvKnobs(6, 4))  # a pixel ob
    assert "not a setting of the pixel-vector layout's space" in sp.reject(
        CpuConvKnobs(1, 8, "fused", 1, "rc_ky_kx", "pixels"))
    for k in list(got)[::7]:
        own = px if k.algo == "pixels" else cv
        np.testing.assert_array_equal(sp.features(k), own.features(k))
        assert sp.knobs(sp.point(k)) == k


def test_xgb_tuner_cold_on_the_llvm_space_measures_only_valid_settings():
    """A synthetic cost (deterministic, no compiling): the cold model finds the optimum, nothing invalid measured."""
    task = lc.LlvmConvTask(Conv2dSpec(1, 32, 14, 14, 64, 3, 3, (1, 1), (1, 1, 1, 1)), bias=True)
    sp = task.make_space()

    def cost(k):  # best: ob 16, xt 6, fused, unroll 1
        return 1000 + 100 * abs(k.ob - 16) + 40 * abs(k.xt - 6) + 300 * (k.parallel != "fused") + 50 * (k.unroll != 1)

    def measure(t, batch):
        assert all(sp.reject(k) is None for k in batch)
        return [Result(cost(k), None, 0.0) for k in batch]
    tuner = make_tuner("xgb", task, seed=0, space=sp, chains=8, steps=20)
    tuner.tune(48, measure, 8)
    assert tuner.invalid_measured == 0 and len(tuner.history) == 48
    assert tuner.best_cycles <= 1100  # within 10 % of the optimum (1000) after 48 of ~400 settings


def test_xgb_batches_on_the_llvm_space_are_not_capped_per_parallel_choice():
    """The llvm space lets a whole batch share one parallel choice (``structure_share`` 1.0); the accelerator's
    spaces keep the 0.5 cap; a share outside (0, 1] is refused."""
    pytest.importorskip("xgboost")
    from compiler.autotune import ConvSpace, Task
    from compiler.autotune.landscape import LandscapeSpace
    from compiler.autotune.xgb_tuner import XGBTuner
    from compiler.topi.conv2d import ConvShape
    from isa import make_config

    task = lc.LlvmConvTask(Conv2dSpec(1, 32, 14, 14, 64, 3, 3, (1, 1), (1, 1, 1, 1)), bias=True)
    sp = task.make_space()
    assert XGBTuner(task, sp).max_same_threads == 1.0
    assert XGBTuner(task, LandscapeSpace(sp, sp.candidates())).max_same_threads == 1.0
    assert XGBTuner(task, sp, max_same_threads=0.25).max_same_threads == 0.25
    accel = Task(make_config("pynq-z1"), ConvShape(1, 1, 2, 2, 3, 3, 3, 3, (1, 1), (1, 1, 1, 1)), None, None, "t")
    assert XGBTuner(accel, ConvSpace(accel)).max_same_threads == 0.5
    with pytest.raises(ValueError, match=r"max_same_threads must be in \(0, 1\]"):
        XGBTuner(task, sp, max_same_threads=0.0)

    # with every untried point ranked, a batch of 8 may all take the parallel choice the model prefers
    def measure(t, batch):
        return [Result(1000 + 500 * (k.parallel != "outer") + 10 * abs(k.xt - 4), None, 0.0) for k in batch]
    tuner = XGBTuner(task, sp, seed=0)
    tuner.tune(24, measure, 8)
    assert sum(k.parallel == "outer" for k, _ in tuner.history[16:]) > 4  # more than the 0.5 cap would allow


def test_xgb_batches_on_a_both_layouts_space_measure_each_layout():
    """A conv of both layouts: at most half an XGB batch takes one layout, so the one the model does not favour is
    measured every batch (a cold model that had seen only channel vectors filled its batches with them)."""
    pytest.importorskip("xgboost")
    from compiler.autotune.xgb_tuner import XGBTuner

    task = lc.LlvmConvTask(Conv2dSpec(1, 64, 14, 14, 96, 1, 1), bias=True)
    sp = task.make_space()
    assert XGBTuner(task, sp).max_same_threads == 0.5

    def measure(t, batch):  # channel vectors look better; the best setting is a pixel-vector one
        return [Result(500 if (k.algo, k.ob, k.xt) == ("pixels", 3, 32) else 1000 + 200 * (k.algo == "pixels")
                       + 10 * abs(k.xt - 4), None, 0.0) for k in batch]
    tuner = XGBTuner(task, sp, seed=0)
    tuner.tune(32, measure, 8)
    for i in range(0, 32, 8):
        assert 0 < sum(k.algo == "pixels" for k, _ in tuner.history[i:i + 8]) <= 4


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    b = OnnxBuilder(5)
    y = b.conv_bn("input", 8, 16, 3)
    y = b.op("Add", [b.conv_bn(y, 16, 16, 3, act=None), y])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    p = tmp_path_factory.mktemp("llvm_tune") / "m.onnx"
    onnx.save(b.model("m", "input", (1, 8, 6, 6), b.gemm(y, 16, 4)), str(p))
    return p


def _log_line(task, knobs, ns=100, cpu=None):
    line = json.loads(task.record_line(knobs, Result(ns, None, 0.0), "test"))
    if cpu is not None:
        line["cpu"] = cpu
    return json.dumps(line)


def test_tune_logs_records_keyed_by_cpu(tiny_model, tmp_path):
    tasks = extract_llvm_tasks(str(tiny_model))
    assert len(tasks) == 2 and {t.residual for t in tasks} == {False, True}
    log = tmp_path / "t.log"
    with lc.LlvmMeasurer() as m:
        res = tune_tasks(tasks[:1], m, "random", 3, 3, str(log), 0)
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    assert len(lines) == 3 and all(d["target"] == "llvm" and d["cpu"] == ht.cpu_ident() for d in lines)
    assert lines[0]["config"] == vars(tasks[0].default_knobs()) or \
        CpuConvKnobs(**lines[0]["config"]) == tasks[0].default_knobs()  # the default is measured first
    assert res[0].invalid_measured == 0 and all(d["result"]["ns"] > 0 for d in lines)
    recs = lc.load_llvm_records(log)
    assert len(recs) == 3
    # another CPU's record, an accelerator record: skipped with warnings
    other = tmp_path / "o.log"
    other.write_text(_log_line(tasks[0], tasks[0].default_knobs(), cpu={"name": "x", "hash": "0" * 12}) + "\n"
                     + json.dumps({"vta_tuning": 1, "hw": {}, "task": {}, "config": {}}) + "\n")
    with pytest.warns(TuningLogWarning) as caught:
        assert lc.load_llvm_records(other) == []
    msgs = " ".join(str(w.message) for w in caught)
    assert "LLVM target CPU 'x'" in msgs and "accelerator" in msgs


def _other_knobs(task):
    d = task.default_knobs()
    sp = task.make_space()
    return next(k for k in (sp.knobs(p) for p in sp.grid()) if k != d and k.ob != d.ob and sp.reject(k) is None)


@pytest.mark.parametrize("logged_wins", [True, False, "hot-only", "tie", "alone-only", "neighbours-pay"])
def test_build_applies_a_log_only_where_it_is_faster(tiny_model, tmp_path, monkeypatch, logged_wins):
    from compiler.executor import build

    tasks = extract_llvm_tasks(str(tiny_model))
    log = tmp_path / "t.log"
    chosen = {t.key: _other_knobs(t) for t in tasks}
    log.write_text("".join(_log_line(t, chosen[t.key]) + "\n" for t in tasks))
    # timing stubbed: the logged knobs are faster (or slower) than the default, so the choice is deterministic;
    # "hot-only": faster on repeated calls but slower after a cache sweep (as the network runs it): not kept;
    # "tie": 2 % faster both ways, within timing noise (lc.MIN_GAIN is 3 %): not kept; "alone-only": faster alone
    # both ways but slower in the model (the build's in-model check, llvm_log.layer_times, stubbed too): not kept;
    # "neighbours-pay": the tuned convs run faster in the model but the other layers slower, the model slower as a
    # whole: not kept
    def cost(call, repeats=5, flush=False):
        key, k = call  # what the stubbed bound_call below returns
        if k != chosen[key]:
            return 100
        if logged_wins == "tie":
            return 98
        return 200 if not logged_wins or (logged_wins == "hot-only" and flush) else 50
    monkeypatch.setattr(lc.LlvmConvTask, "bound_call", lambda self, k: (self.key, k))
    monkeypatch.setattr(lc, "time_call", cost)

    def layer_times(mods, feeds):  # [default module, module with the kept knobs]: each conv layer's ms
        assert len(mods) == 2 and feeds["input"].shape == (1, 8, 6, 6)
        convs = [n.name for n in mods[0].graph.nodes if n.op in ("Conv", "FusedConv")]
        others = [n.name for n in mods[0].graph.nodes if n.name not in convs]
        assert others
        return [{**dict.fromkeys(convs, 1.0), **dict.fromkeys(others, 1.0)},
                {**dict.fromkeys(convs, 2.0 if logged_wins == "alone-only" else 0.5),
                 **dict.fromkeys(others, 2.0 if logged_wins == "neighbours-pay" else 1.0)}]
    monkeypatch.setattr(llvm_log, "layer_times", layer_times)
    x = np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)
    base = build(str(tiny_model), target="llvm", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningLogWarning)  # every task has a usable record
        tuned = build(str(tiny_model), target="llvm", progress=False, tuning_log=log)
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "conv2d"]
    assert len(used) == 2
    if logged_wins is True:
        assert sorted(map(repr, used)) == sorted(map(repr, chosen.values()))
    else:
        assert used == [None, None]
    np.testing.assert_allclose(tuned(input=x)[0] if isinstance(tuned(input=x), (list, tuple)) else tuned(input=x),
                               base(input=x)[0] if isinstance(base(input=x), (list, tuple)) else base(input=x),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", [("pixels", "pixels"), ("direct", "pixels")])
def test_build_applies_logged_pixel_knobs(tmp_path, monkeypatch, layout):
    """A model of a 1x1 and a depthwise conv (both pixel-vector layouts by default): logged knobs that time faster
    are compiled in, pixel-vector ones or, for the 1x1 conv, the channel-vector layout, and the model computes what
    it does without the log."""
    from compiler.executor import build

    bld = OnnxBuilder(7)
    y = bld.conv_bn("input", 8, 16, 1, act="Relu6")
    y = bld.conv_bn(y, 16, 16, 3, groups=16, act="Relu6")
    y = bld.op("Flatten", [bld.op("GlobalAveragePool", [y])])
    path = tmp_path / "px.onnx"
    onnx.save(bld.model("px", "input", (1, 8, 8, 8), bld.gemm(y, 16, 4)), str(path))
    tasks = extract_llvm_tasks(str(path))
    assert len(tasks) == 2 and all(t.default_knobs().algo == "pixels" for t in tasks)
    chosen = {}
    for t in tasks:
        sp, d = t.make_space(), t.default_knobs()
        chosen[t.key] = next(k for k in map(sp.knobs, sp.candidates())
                             if k.algo == layout[t.spec.depthwise] and (k.xt != d.xt or k.rows != d.rows))
    log = tmp_path / "t.log"
    log.write_text("".join(_log_line(t, chosen[t.key]) + "\n" for t in tasks))
    monkeypatch.setattr(lc.LlvmConvTask, "bound_call", lambda self, k: (self.key, k))
    monkeypatch.setattr(lc, "time_call", lambda call, repeats=5, flush=False: 50 if call[1] == chosen[call[0]] else 100)
    monkeypatch.setattr(llvm_log, "layer_times", lambda mods, feeds: [
        {n.name: t for n in m.graph.nodes} for m, t in zip(mods, (1.0, 0.5))])
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 8)).astype(np.float32)
    base = build(str(path), target="llvm", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningLogWarning)
        tuned = build(str(path), target="llvm", progress=False, tuning_log=log)
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "conv2d"]
    assert sorted(map(repr, used)) == sorted(map(repr, chosen.values()))
    np.testing.assert_allclose(np.asarray(tuned(input=x)[0]), np.asarray(base(input=x)[0]), rtol=1e-4, atol=1e-5)


def test_a_flushed_measurement_sweeps_the_caches_before_each_call(monkeypatch):
    """``measure_cost(flush=True)``: one call a timed run, each after a sweep of at least twice the last-level
    cache (the build-time check times logged knobs so too)."""
    task = lc.LlvmConvTask(Conv2dSpec(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1)), True, False, "relu", (), "c")
    sweeps = []
    real = ht.sweep_caches
    monkeypatch.setattr(ht, "sweep_caches", lambda: (sweeps.append(1), real()))
    assert task.measure_cost(task.default_knobs(), repeats=3, flush=True) > 0
    assert len(sweeps) == 3
    assert ht._sweep[0].nbytes >= max(ht.SWEEP_MIN_BYTES, 2 * ht.last_level_cache_bytes())
    assert task.measure_cost(task.default_knobs(), repeats=2) > 0 and len(sweeps) == 3  # hot: no sweep


def test_in_model_check_times_each_layer_of_each_module(tiny_model):
    """The build's in-model check (real runs, no stubs): every layer of both modules gets a positive minimum time,
    and the seeded inputs have the graph's input shapes and types."""
    from compiler.executor import build

    a = build(str(tiny_model), target="llvm", progress=False)
    b = build(str(tiny_model), target="llvm", progress=False)
    feeds = llvm_log.seeded_feeds(a.graph)
    assert list(feeds) == ["input"] and feeds["input"].shape == (1, 8, 6, 6) and feeds["input"].dtype == np.float32
    ta, tb = llvm_log.layer_times([a, b], feeds, rounds=3)
    names = [r["name"] for r in a.profile()]
    assert set(ta) == set(tb) == set(names) and len(names) >= 3
    assert all(0 < t < 1e3 for t in [*ta.values(), *tb.values()])


def test_in_model_check_that_cannot_run_warns_and_keeps_what_won_alone(tiny_model, tmp_path, monkeypatch):
    """A model the seeded inputs cannot run (stubbed: layer_times raises) still builds: a TuningLogWarning says
    so and the knobs that timed faster alone are kept."""
    from compiler.executor import build

    tasks = extract_llvm_tasks(str(tiny_model))
    chosen = {t.key: _other_knobs(t) for t in tasks}
    log = tmp_path / "t.log"
    log.write_text("".join(_log_line(t, chosen[t.key]) + "\n" for t in tasks))
    monkeypatch.setattr(lc.LlvmConvTask, "bound_call", lambda self, k: (self.key, k))
    monkeypatch.setattr(lc, "time_call", lambda call, repeats=5, flush=False: 50 if call[1] == chosen[call[0]] else 100)

    def fails(mods, feeds):
        raise IndexError("index 0 is out of bounds")
    monkeypatch.setattr(llvm_log, "layer_times", fails)
    with pytest.warns(TuningLogWarning, match="could not run on seeded inputs .*IndexError.* kept the 2"):
        tuned = build(str(tiny_model), target="llvm", progress=False, tuning_log=log)
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "conv2d"]
    assert sorted(map(repr, used)) == sorted(map(repr, chosen.values()))


def _two_other_knobs(task):
    d, sp = task.default_knobs(), task.make_space()
    others = [k for k in (sp.knobs(p) for p in sp.grid()) if k != d and sp.reject(k) is None]
    return others[0], others[-1]


def test_rank_in_model_logs_the_setting_fastest_in_the_model(tiny_model, tmp_path, monkeypatch):
    """rank_in_model runs each task's fastest logged settings in the model (module j: every task's j-th) and logs
    the one its layers ran fastest with, not the one fastest alone, or the default within MIN_GAIN; the build then
    starts from those choices without timing them alone again."""
    from compiler.executor import build

    tasks = extract_llvm_tasks(str(tiny_model))
    first, second = tasks
    pairs = {t.key: _two_other_knobs(t) for t in tasks}
    log = tmp_path / "t.log"
    log.write_text("".join(_log_line(t, t.default_knobs(), 100) + "\n" + _log_line(t, pairs[t.key][0], 50) + "\n"
                           + _log_line(t, pairs[t.key][1], 60) + "\n" for t in tasks))
    seen = []

    def layer_times(mods, feeds, rounds):
        assert rounds == 5 and feeds["input"].shape == (1, 8, 6, 6)
        layers = llvm_log.task_layers(mods[0].graph)
        used = [{plan.key[-1] for plan, _ in m.cpu._plans.values() if plan.key[0] == "conv2d"} for m in mods]
        seen.append(used)
        # module 0 the default; module j each task's j-th fastest logged setting: the second runs fastest in the
        # model for the first task (alone it was slower); for the second task no setting beats the default by 3 %
        ms = {first.key: (1.0, 1.5, 0.5), second.key: (1.0, 0.99, 1.2)}
        return [{n: ms[k][j] / len(names) for k, names in layers.items() for n in names} for j in range(len(mods))]
    monkeypatch.setattr(llvm_log, "layer_times", layer_times)
    chosen = llvm_rank.rank_in_model(str(tiny_model), log, rounds=5)
    assert chosen == {first.key: pairs[first.key][1], second.key: None}
    assert seen[0][0] == {None} and seen[0][1] == {pairs[t.key][0] for t in tasks} \
        and seen[0][2] == {pairs[t.key][1] for t in tasks}
    lines = [json.loads(s) for s in log.read_text().splitlines()[6:]]
    assert len(lines) == 2 and all(d["tuner"] == "in_model" and d["result"] is None for d in lines)
    by_task = {json.dumps(d["task"], sort_keys=True): d for d in lines}
    assert CpuConvKnobs(**by_task[first.key]["config"]) == pairs[first.key][1]
    assert CpuConvKnobs(**by_task[second.key]["config"]) == second.default_knobs()
    assert by_task[first.key]["in_model"]["candidates_ms"] == [1.5, 0.5]
    assert by_task[first.key]["in_model"]["ms"] == 0.5 and by_task[second.key]["in_model"]["ms"] == 1.0
    assert lc.load_llvm_log(log).in_model.keys() == {first.key, second.key}
    assert len(lc.load_llvm_records(log)) == 6  # the in-model lines are not timed trials

    def not_alone(*_a, **_k):
        raise AssertionError("a task with an in-model choice is not timed alone again")
    monkeypatch.setattr(lc, "time_call", not_alone)
    monkeypatch.setattr(llvm_log, "layer_times", lambda mods, feeds: [
        {n.name: t for n in m.graph.nodes} for m, t in zip(mods, (1.0, 0.5))])
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningLogWarning)
        tuned = build(str(tiny_model), target="llvm", progress=False, tuning_log=log)
    used = {plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "conv2d"}
    assert used == {pairs[first.key][1], None} and tuned.compiled.stats["tuned_tasks"] == 1


def test_rank_in_model_runs_the_model(tiny_model, tmp_path):
    """rank_in_model for real (no stubs): one line per task with a logged setting, positive layer times, and a
    build with the log computes what the untuned build does."""
    from compiler.executor import build

    tasks = extract_llvm_tasks(str(tiny_model))
    log = tmp_path / "t.log"
    log.write_text(_log_line(tasks[0], _two_other_knobs(tasks[0])[0], 50) + "\n"
                   + _log_line(tasks[1], tasks[1].default_knobs(), 50) + "\n")
    chosen = llvm_rank.rank_in_model(str(tiny_model), log, candidates=2, rounds=2)
    assert list(chosen) == [tasks[0].key]  # the second task has no setting but the default: not ranked
    rec = json.loads(log.read_text().splitlines()[-1])
    assert rec["in_model"]["default_ms"] > 0 and len(rec["in_model"]["candidates_ms"]) == 1
    assert rec["in_model"]["layers"] == llvm_log.task_layers(build(str(tiny_model), target="llvm",
                                                                   progress=False).graph)[tasks[0].key]
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype(np.float32)
    tuned = build(str(tiny_model), target="llvm", progress=False, tuning_log=log)
    base = build(str(tiny_model), target="llvm", progress=False)
    np.testing.assert_allclose(np.asarray(tuned(input=x)[0]), np.asarray(base(input=x)[0]), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="candidates .* must be >= 1, got 0"):
        llvm_rank.rank_in_model(str(tiny_model), log, candidates=0)
    def fails(mods, feeds, rounds):
        raise IndexError("index 9 is out of bounds")
    lines = log.read_text()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(llvm_log, "layer_times", fails)
        with pytest.warns(TuningLogWarning, match="could not run on seeded inputs to rank .*IndexError"):
            assert llvm_rank.rank_in_model(str(tiny_model), log) == {}
    assert log.read_text() == lines  # nothing logged
    empty = tmp_path / "d.log"
    empty.write_text(_log_line(tasks[0], tasks[0].default_knobs(), 50) + "\n")
    assert llvm_rank.rank_in_model(str(tiny_model), empty) == {} and len(empty.read_text().splitlines()) == 1


def test_bad_in_model_lines_are_skipped_with_a_warning(tiny_model, tmp_path, monkeypatch):
    """An in-model line that is malformed, or whose knobs the task cannot use, is skipped with a warning that says
    which line and why; the task's timed records are used instead."""
    from compiler.executor import build

    tasks = extract_llvm_tasks(str(tiny_model))
    t = tasks[0]
    good = _other_knobs(t)
    bad = json.loads(t.record_line(t.default_knobs(), Result(None, None, 0.0), "in_model", {"ms": 1.0}))
    bad["config"]["ob"] = 7  # no 7-channel blocks
    malformed = json.loads(t.record_line(t.default_knobs(), Result(None, None, 0.0), "in_model", {"ms": 1.0}))
    malformed["in_model"] = 5
    log = tmp_path / "t.log"
    log.write_text(_log_line(t, good, 50) + "\n" + json.dumps(malformed) + "\n" + json.dumps(bad) + "\n")
    monkeypatch.setattr(lc.LlvmConvTask, "bound_call", lambda self, k: (self.key, k))
    monkeypatch.setattr(lc, "time_call", lambda call, repeats=5, flush=False: 50 if call[1] == good else 100)
    monkeypatch.setattr(llvm_log, "layer_times", lambda mods, feeds: [
        {n.name: v for n in m.graph.nodes} for m, v in zip(mods, (1.0, 0.5))])
    with pytest.warns(TuningLogWarning) as caught:
        tuned = build(str(tiny_model), target="llvm", progress=False, tuning_log=log)
    msgs = " ".join(str(w.message) for w in caught)
    assert "t.log:2: malformed llvm tuning record (TypeError: in_model must be an object)" in msgs
    assert "t.log:3: in-model choice" in msgs and "its timed records are used instead" in msgs
    used = {plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "conv2d"}
    assert good in used
