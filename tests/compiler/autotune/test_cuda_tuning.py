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
from compiler.autotune import cuda_direct as cdir
from compiler.autotune.measure import Result
from compiler.autotune.records import TuningLogWarning
from compiler.executor import llvm_log
from compiler.topi.conv2d_direct import Conv2dSpec
from compiler.topi.conv2d_direct import DirectGpuKnobs
from compiler.topi.conv2d_gpu import GpuConvKnobs, default_knobs
from compiler.topi.pool import PoolGpuKnobs, PoolSpec
from compiler.zoo.builder import OnnxBuilder
from vta.cli import main

SPEC = Conv2dSpec(1, 8, 6, 6, 16, 3, 3, (1, 1), (1, 1, 1, 1))


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv("VTA_CUDA_DEVICE", "emulate")


def in_model(monkeypatch, tuned_layer_ms: float = 0.5, other_ms: float = 1.0) -> None:
    """Stub the build's in-model check (``llvm_log.layer_times``: [default module, module with the kept knobs]):
    each tuned task's layers take ``tuned_layer_ms`` with the knobs (1.0 without), the other layers ``other_ms``
    (1.0 without)."""
    def layer_times(mods, feeds):
        assert len(mods) == 2
        g = mods[0].graph
        tuned = {n for names in llvm_log.task_layers(g, target="cuda").values() for n in names}
        names = [n.name for n in g.nodes]
        return [dict.fromkeys(names, 1.0),
                {n: tuned_layer_ms if n in tuned else other_ms for n in names}]
    monkeypatch.setattr(llvm_log, "layer_times", layer_times)


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
    assert [(t.spec.c, t.spec.o, t.residual) for t in tasks[:2]] == [(8, 16, False), (16, 16, True)]
    assert len(tasks) == 3 and tasks[2] == cdir.CudaPoolTask("GlobalAveragePool", PoolSpec(1, 16, 6, 6, 6, 6, oh=1,
                                                                                              ow=1))
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


def test_kernels_are_timed_on_the_device_not_with_the_host_calls(emulated):
    """A trial's cost is its call's device operations made again between the device timer's marks: a call that
    spends 30 ms on the host before it launches the kernel costs what the kernel costs (the host's per-call Python
    outlasts most kernels on a GPU); a call that makes no device operation is refused, naming why."""
    import time

    from compiler.autotune.device_timed import time_device_call

    task = cc.CudaConvTask(SPEC, True, False, "relu")
    plain, dev = task.bound_call(task.default_knobs())

    def slow() -> None:
        time.sleep(0.03)
        plain()
    kernel = time_device_call(plain, dev, repeats=3)
    assert 0 < kernel < 10e6
    assert time_device_call(slow, dev, repeats=3) < min(10e6, 20 * kernel)
    with pytest.raises(ValueError, match="made no device operations"):
        time_device_call(lambda: None, dev)


def test_build_applies_a_cuda_log(tiny_model, tmp_path, monkeypatch, emulated):
    """A log naming knobs for both convs: the build compiles them where they beat the default (stubbed: always)
    and computes what the untuned build computes; a log of another device changes nothing."""
    from compiler.executor import build

    base = build(str(tiny_model), target="cuda", progress=False)
    tasks = cc.graph_tasks(base.graph)
    chosen = {t.key: GpuConvKnobs(16, 4, 4, 1, 4, 2) for t in tasks[:2]}
    chosen[tasks[2].key] = PoolGpuKnobs(64, 2, "flat", True, True)  # the GlobalAveragePool
    log = tmp_path / "c.log"
    log.write_text("".join(t.record_line(chosen[t.key], Result(1000, None, 0.0), "test") + "\n" for t in tasks))
    monkeypatch.setattr(cc, "faster_than_default", lambda task, knobs: (True, 1, 2))
    in_model(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningLogWarning)
        tuned = build(str(tiny_model), target="cuda", progress=False, tuning_log=log)
    assert tuned.compiled.stats["tuned_tasks"] == 3
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] in ("conv2d_gpu", "gap")]
    assert used == [GpuConvKnobs(16, 4, 4, 1, 4, 2)] * 2 + [PoolGpuKnobs(64, 2, "flat", True, True)]
    x = np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(tuned(input=x), base(input=x), rtol=1e-5, atol=1e-5)
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    log.write_text("".join(json.dumps(dict(ln, gpu={"name": "other", "arch": "sm_90"})) + "\n" for ln in lines))
    with pytest.warns(TuningLogWarning, match="no usable cuda record for 3 of 3"):
        again = build(str(tiny_model), target="cuda", progress=False, tuning_log=log)
    assert again.compiled.stats["tuned_tasks"] == 0


@pytest.mark.parametrize("case", ["slower-in-the-model", "neighbours-pay"])
def test_a_log_that_slows_the_model_is_not_kept(tiny_model, tmp_path, monkeypatch, emulated, case):
    """Knobs that beat the default alone (stubbed) but whose layers run slower in the model, or whose layers run
    faster while the model as a whole runs slower (its other layers pay), are dropped: the build is the untuned
    one (as on an H200, where a kept 1x1 conv ran 13 -> 32 us in the model and ResNet-18 3 % slower)."""
    from compiler.executor import build

    base = build(str(tiny_model), target="cuda", progress=False)
    tasks = cc.graph_tasks(base.graph)
    log = tmp_path / "c.log"
    log.write_text("".join(t.record_line(GpuConvKnobs(16, 4, 4, 1, 4, 2), Result(1000, None, 0.0), "test") + "\n"
                           for t in tasks[:2]))
    monkeypatch.setattr(cc, "faster_than_default", lambda task, knobs: (True, 1, 2))
    if case == "slower-in-the-model":
        in_model(monkeypatch, tuned_layer_ms=2.0)
    else:
        in_model(monkeypatch, tuned_layer_ms=0.9, other_ms=1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TuningLogWarning)  # the pool has no record
        tuned = build(str(tiny_model), target="cuda", progress=False, tuning_log=log)
    assert tuned.compiled.stats["tuned_tasks"] == 0
    assert [plan.key for plan, _ in tuned.cpu._plans.values()] == [plan.key for plan, _ in base.cpu._plans.values()]


def test_cuda_layers_are_timed_on_the_device_in_the_model(tiny_model, emulated, monkeypatch):
    """The in-model check times a cuda module's layers in its replayed runs on the device's timer (the emulated
    device's: its host clock around the replayed operations), every layer, and leaves device timing off."""
    from compiler.backend.cuda.run_replay import DeviceReplay
    from compiler.executor import build

    mods = [build(str(tiny_model), target="cuda", progress=False) for _ in range(2)]
    timed = []
    real = DeviceReplay.run

    def spy(self, on_device=False):
        timed.append(on_device)
        return real(self, on_device)
    monkeypatch.setattr(DeviceReplay, "run", spy)
    feeds = llvm_log.seeded_feeds(mods[0].graph)
    times = llvm_log.layer_times(mods, feeds, rounds=3)
    names = [n.name for n in mods[0].graph.nodes]
    assert [sorted(t) for t in times] == [sorted(names)] * 2
    assert all(0 <= v < 1e3 for t in times for v in t.values())
    assert timed and all(timed) and len(timed) >= 2 * 3
    assert not any(m.device_timing for m in mods)


def test_in_model_times_leave_out_runs_that_were_not_replayed():
    """A cuda module's run that was not replayed (its replay dropped for a run) holds the host's times to launch each
    layer, far below the device's: the layer's minimum is taken over the replayed runs only; a module that is never
    replayed keeps its host times."""
    from types import SimpleNamespace

    class Fake:
        def __init__(self, replays: list[bool]) -> None:
            self.cpu = SimpleNamespace(target="cuda")
            self.replays, self.timed_on_device, self.device_timing = iter(replays), False, False

        def run(self, feeds=None) -> None:
            self.timed_on_device = next(self.replays)

        def time_on_device(self) -> None:
            self.run()

        def profile(self) -> list[dict]:
            return [{"name": "conv", "time_ms": 1.0 if self.timed_on_device else 0.001}]
    flaky, never = Fake([False, True, True, False, True]), Fake([False] * 5)
    assert llvm_log.layer_times([flaky, never], {}, rounds=3) == [{"conv": 1.0}, {"conv": 0.001}]
    assert not flaky.device_timing and not never.device_timing


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
    assert out["target"] == "cuda" and out["device"] == {"name": "emulate", "arch": "sm_80"} and out["tasks"] == 3
    assert [t["trials"] for t in out["per_task"]] == [3, 3, 3] and 0 <= out["tasks_kept"] <= 3
    assert "GlobalAveragePool" in out["per_task"][2]["task"]
    assert len(open(log).read().splitlines()) == 9


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
    in_model(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TuningLogWarning)  # the tasks without a record
        tuned = build(model, target="cuda", progress=False, tuning_log=log)
    assert tuned.compiled.stats["tuned_tasks"] == 1
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "gemm_gpu"
            and plan.key[1:3] == (task.a, task.b)]
    assert used and all(k == chosen for k in used)
    feeds = sample_inputs(model, 1)[0]
    np.testing.assert_allclose(np.asarray(tuned(**feeds)), np.asarray(base(**feeds)), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def dw_pool_model(tmp_path_factory):
    """A conv, a MaxPool, a depthwise conv (Relu6), an AveragePool and a GlobalAveragePool."""
    b = OnnxBuilder(3)
    y = b.conv_bn("input", 8, 16, 3)
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.conv_bn(y, 16, 16, 3, groups=16, act="Relu6")
    y = b.op("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    p = tmp_path_factory.mktemp("cuda_dw_pool") / "m.onnx"
    onnx.save(b.model("m", "input", (1, 8, 16, 16), b.gemm(y, 16, 4)), str(p))
    return p


DW_112 = Conv2dSpec(1, 32, 112, 112, 32, 3, 3, (1, 1), (1, 1, 1, 1), groups=32)  # MobileNetV2's first depthwise
DW_7 = Conv2dSpec(1, 960, 7, 7, 960, 3, 3, (1, 1), (1, 1, 1, 1), groups=960)  # and its last
R18_POOL = PoolSpec(1, 64, 112, 112, 3, 3, (2, 2), (1, 1, 1, 1), 56, 56)  # ResNet-18's MaxPool


def test_depthwise_and_pool_spaces_hold_the_defaults_and_name_what_they_skip():
    dw_tasks = [cdir.CudaDepthwiseTask(s, True, False, "clip", (0.0, 6.0)) for s in
                (DW_112, DW_7, Conv2dSpec(1, 16, 8, 8, 32, 3, 3, (2, 2), (1, 1, 1, 1), groups=4))]
    pool_tasks = [cdir.CudaPoolTask("MaxPool", R18_POOL), cdir.CudaPoolTask("AveragePool", R18_POOL, True),
                  cdir.CudaPoolTask("GlobalAveragePool", PoolSpec(1, 512, 7, 7, 7, 7, oh=1, ow=1))]
    lengths: dict[type, set] = {}
    for t in dw_tasks + pool_tasks:
        space = t.make_space()
        d = t.default_knobs()
        assert space.point(d) is not None and space.reject(d) is None, t.describe()
        cands = space.candidates()
        assert 30 < len(cands) < len(space), (t.describe(), len(cands))
        for p in cands:
            f = space.features(space.knobs(p))
            lengths.setdefault(type(space), set()).add(f.shape)
            assert np.isfinite(f).all()
    assert {k: len(v) for k, v in lengths.items()} == {cdir.DirectGpuSpace: 1, cdir.PoolGpuSpace: 1}
    assert cdir.DirectGpuSpace.transfer_family != cdir.PoolGpuSpace.transfer_family
    assert len(dw_tasks[0].make_space()) == 6 * 6 * 4 * 3 * 2 and len(pool_tasks[0].make_space()) == 6 * 4 * 2 * 2 * 2
    assert DirectGpuKnobs(8) == dw_tasks[1].default_knobs()
    dw7 = dw_tasks[1].make_space()
    assert dw7.reject(DirectGpuKnobs(8, 512)) == "more threads than the work needs (the same program as half as many)"
    assert dw7.reject(DirectGpuKnobs(8, 128)) == "threads that already cover the work (the same program as 256)"
    assert dw7.reject(DirectGpuKnobs(8, 32)) is None  # 4 pixel columns: a block of its own
    assert dw7.reject(DirectGpuKnobs(8, 256, 8)).startswith("bad knob: conv2d_direct: knobs xt=8 and yt=1 must be")
    assert dw7.reject(GpuConvKnobs()) == ("bad knob: gpu depthwise 3x3/1 960->960ch 7x7 clip takes DirectGpuKnobs, "
                                          "got GpuConvKnobs")
    one = cdir.CudaDepthwiseTask(Conv2dSpec(1, 8, 5, 5, 8, 1, 1, groups=8)).make_space()
    assert one.reject(DirectGpuKnobs(8, 256, 1, 1, True)) == "unroll of a 1x1 kernel (the same program as unroll=False)"
    mp, gap = pool_tasks[0].make_space(), pool_tasks[2].make_space()
    assert mp.reject(PoolGpuKnobs(64, 1, "flat", True)) == "fused with a one-stage pool (the same program as " \
                                                          "fused=False)"
    assert pool_tasks[1].make_space().reject(PoolGpuKnobs(64, 1, "flat", True)) is None
    assert gap.reject(PoolGpuKnobs(64, 1, "plane")) == "blocks over planes of 1 outputs (less than a warp a block)"
    assert gap.reject(PoolGpuKnobs(1024)) == "more threads than the work needs (the same program as half as many)"
    assert gap.reject(PoolGpuKnobs(512)) is None  # 512 outputs: one block of 512
    big = cdir.CudaPoolTask("GlobalAveragePool", PoolSpec(1, 8, 14, 14, 14, 14, oh=1, ow=1)).make_space()
    assert big.reject(PoolGpuKnobs(64, 1, "flat", False, True)) == "unroll of a 196-tap window (at most 64)"
    assert big.reject(PoolGpuKnobs(64, 8)) is None and big.reject(PoolGpuKnobs(32, 8)) == \
        "threads that already cover the work (the same program as 64)"
    assert big.reject(PoolGpuKnobs(64, 1, "diag")) == "bad knob: pool: knob axes='diag'; allowed: flat, plane"
    with pytest.raises(ValueError, match="more than one group"):
        cdir.CudaDepthwiseTask(SPEC)
    with pytest.raises(ValueError, match="GlobalAveragePool task's window is its 7x7 plane"):
        cdir.CudaPoolTask("GlobalAveragePool", PoolSpec(1, 8, 7, 7, 3, 3, oh=5, ow=5))
    with pytest.raises(ValueError, match="cuda pool tasks are MaxPool, AveragePool, GlobalAveragePool"):
        cdir.CudaPoolTask("LpPool", R18_POOL)


def test_depthwise_and_pools_are_tuned_logged_and_applied(dw_pool_model, tmp_path, monkeypatch, emulated):
    """The depthwise conv and the three pools are tasks of the model; a few trials each are timed, logged with
    their ops and read back with their knob classes; a log of non-default knobs (kept: stubbed faster) is compiled
    into the build, which computes what the untuned build computes."""
    from compiler.autotune import tune_tasks
    from compiler.executor import build

    base = build(str(dw_pool_model), target="cuda", progress=False)
    tasks = cc.graph_tasks(base.graph)
    assert [type(t).__name__ for t in tasks] == ["CudaConvTask", "CudaDepthwiseTask", "CudaPoolTask", "CudaPoolTask",
                                                 "CudaPoolTask"]
    dw, mp, ap, gap = tasks[1:]
    assert (dw.spec.groups, dw.act, mp.kind, ap.kind, gap.kind) == (16, "clip", "MaxPool", "AveragePool",
                                                                    "GlobalAveragePool")
    assert mp.spec == PoolSpec(1, 16, 16, 16, 3, 3, (2, 2), (1, 1, 1, 1), 8, 8)
    log = tmp_path / "t.log"
    with cc.CudaMeasurer() as m:
        res = tune_tasks([dw, mp], m, "random", 3, 3, str(log), 0)
    assert [(r.trials, r.invalid_measured) for r in res] == [(3, 0), (3, 0)]
    recs = cc.load_cuda_records(log)
    assert [r[0]["op"] for r in recs] == ["conv2d_direct_gpu"] * 3 + ["pool_float_gpu"] * 3
    assert [type(r[1]) for r in recs] == [DirectGpuKnobs] * 3 + [PoolGpuKnobs] * 3
    assert recs[0][1] == dw.default_knobs() and recs[3][1] == PoolGpuKnobs()  # the defaults are measured first
    chosen = {dw.key: DirectGpuKnobs(4, 256, 2, 2, True), mp.key: PoolGpuKnobs(64, 2, "plane", False, True),
              ap.key: PoolGpuKnobs(32, 1, "flat", True, True), gap.key: PoolGpuKnobs(64, 4, "flat", True, False)}
    for t in tasks[1:]:
        assert t.make_space().reject(chosen[t.key]) is None, t.describe()
    log.write_text("".join(t.record_line(chosen[t.key], Result(10, None, 0.0), "test") + "\n" for t in tasks[1:]))
    monkeypatch.setattr(cc, "faster_than_default", lambda t, knobs: (True, 1, 2))
    in_model(monkeypatch)
    with pytest.warns(TuningLogWarning, match="no usable cuda record for 1 of 5"):  # the one-group conv
        tuned = build(str(dw_pool_model), target="cuda", progress=False, tuning_log=log)
    assert tuned.compiled.stats["tuned_tasks"] == 4
    keys = [plan.key for plan, _ in tuned.cpu._plans.values()]
    dw_keys = [k for k in keys if k[0] == "conv2d"]
    assert len(dw_keys) == 1 and dw_keys[0][-1] == chosen[dw.key] and dw_keys[0][1].oc_block == 4
    assert {k[0]: k[-1] for k in keys if k[0] in ("MaxPool", "AveragePool", "gap")} == {
        "MaxPool": chosen[mp.key], "AveragePool": chosen[ap.key], "gap": chosen[gap.key]}
    assert not any(isinstance(k[-1], (DirectGpuKnobs, PoolGpuKnobs)) for plan, _ in base.cpu._plans.values()
                   for k in [plan.key])
    x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(tuned(input=x), base(input=x), rtol=1e-5, atol=1e-5)


def test_the_xgb_tuner_tunes_depthwise_and_pools(dw_pool_model, tmp_path, emulated):
    """The model-based tuner on the new spaces (its first batch spread over their features, then ranked by a model
    of each space's family): every trial a valid, measured setting."""
    from compiler.autotune import tune_tasks
    from compiler.autotune.xgb_tuner import TransferData
    from compiler.executor import build

    tasks = cc.graph_tasks(build(str(dw_pool_model), target="cuda", progress=False).graph)
    with cc.CudaMeasurer() as m:
        res = tune_tasks(tasks[1:3], m, "xgb", 4, 2, str(tmp_path / "x.log"), 0)
    assert [(r.trials, r.invalid_measured) for r in res] == [(4, 0), (4, 0)]
    assert all(r.cycles > 0 for r in res)
    data = TransferData()
    assert data.family(None) is data and data.family("cuda_pool") is data.family("cuda_pool") is not data


def test_records_of_unknown_ops_or_malformed_configs_are_skipped(dw_pool_model, tmp_path, emulated):
    from compiler.executor import build

    tasks = cc.graph_tasks(build(str(dw_pool_model), target="cuda", progress=False).graph)
    dw, mp = tasks[1], tasks[2]
    good = json.loads(dw.record_line(DirectGpuKnobs(4, 256, 2, 2, True), Result(100, None, 0.0)))
    pool_line = json.loads(mp.record_line(PoolGpuKnobs(32), Result(50, None, 0.0)))
    bad = [dict(good, task=dict(good["task"], op="winograd_gpu")),
           dict(good, config={"ob": 8, "zz": 1}),
           dict(good, config="fast"),
           dict(good, task={k: v for k, v in good["task"].items() if k != "op"}),
           dict(good, config=pool_line["config"]),  # a pool's knobs on a conv's record
           dict(pool_line, config=dict(pool_line["config"], axes="diag"), result={"ns": 10})]  # read, not usable
    log = tmp_path / "b.log"
    log.write_text("".join(json.dumps(r) + "\n" for r in [good, pool_line] + bad))
    with pytest.warns(TuningLogWarning) as caught:
        recs = cc.load_cuda_records(log)
    text = " ".join(str(w.message) for w in caught)
    assert ":3: cuda tuning record of an unknown task op 'winograd_gpu'" in text
    assert ":4: malformed cuda tuning record (ValueError: unknown knobs ['zz'])" in text
    assert ":5: malformed cuda tuning record (TypeError: config must be an object)" in text
    assert ":6: malformed cuda tuning record (KeyError: 'op')" in text
    assert ":7: malformed cuda tuning record (ValueError: unknown knobs ['axes', 'fused', 'vt'])" in text
    assert [(r[0]["op"], r[2]) for r in recs] == [("conv2d_direct_gpu", 100), ("pool_float_gpu", 50),
                                                  ("pool_float_gpu", 10)]
    with pytest.warns(TuningLogWarning, match="knob axes='diag'; allowed: flat, plane"):
        chosen = cc.logged_knobs(tasks, log)
    assert chosen == {dw.key: DirectGpuKnobs(4, 256, 2, 2, True), mp.key: PoolGpuKnobs(32)}


def test_planners_refuse_knobs_of_another_kind(dw_pool_model, emulated):
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans import PLANNERS
    from compiler.executor import build

    g = build(str(dw_pool_model), target="cuda", progress=False).graph
    nodes = {n.op if n.attrs.get("group", 1) == 1 else "Depthwise": n for n in g.nodes}

    def plan(node, target, knobs):
        return PLANNERS[node.op](node, [g.tensors.get(i) if i else None for i in node.inputs], g.constants, target,
                                 knobs=knobs)
    dw = nodes["Depthwise"]
    with pytest.raises(UnsupportedOnTarget, match="target 'cuda' takes DirectGpuKnobs knobs for this conv "
                                                  r"\(groups=16\), got GpuConvKnobs"):
        plan(dw, "cuda", GpuConvKnobs())
    with pytest.raises(UnsupportedOnTarget, match="knob ob=3 must divide the 16 channels"):
        plan(dw, "cuda", DirectGpuKnobs(3))
    assert plan(dw, "cuda", DirectGpuKnobs(2, 64, 2)).key[-1] == DirectGpuKnobs(2, 64, 2)
    for op in ("MaxPool", "AveragePool", "GlobalAveragePool"):
        with pytest.raises(UnsupportedOnTarget, match="pooling knobs apply to targets 'cuda' \\(PoolGpuKnobs\\) and "
                                                      "'llvm' \\(CpuPoolKnobs\\), got PoolGpuKnobs for 'llvm'"):
            plan(nodes[op], "llvm", PoolGpuKnobs())
        with pytest.raises(UnsupportedOnTarget, match="got DirectGpuKnobs for 'cuda'"):
            plan(nodes[op], "cuda", DirectGpuKnobs())
        with pytest.raises(UnsupportedOnTarget, match="knob vt must be a positive int, got 0"):
            plan(nodes[op], "cuda", PoolGpuKnobs(64, 0))
        assert plan(nodes[op], "llvm", None).key == PLANNERS[op](nodes[op], [g.tensors.get(nodes[op].inputs[0])],
                                                                 g.constants, "llvm").key
