"""Tuning the llvm target's max-pool row schedule: knobs compute the same pool, the space, the tasks of a model, the
log and the build."""
from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest

from compiler import te
from compiler.autotune import TuningLogWarning
from compiler.autotune import llvm_conv as lc
from compiler.autotune.llvm_pool import LlvmPoolTask
from compiler.autotune.measure import Result
from compiler.backend.llvm.host import float_lanes
from compiler.executor import llvm_log
from compiler.executor.llvm_tasks import extract_llvm_tasks
from compiler.topi.pool import CpuPoolKnobs, PoolSpec
from compiler.zoo.builder import OnnxBuilder
from jit_runtime.host_ops.kernels import KERNELS
from jit_runtime.host_ops.pooling import pool_axes


def _spec(shape, attrs) -> PoolSpec:
    n, c, h, w = shape
    ax = pool_axes(attrs, (h, w))
    return PoolSpec(n, c, h, w, ax[0].k, ax[1].k, (ax[0].s, ax[1].s), (ax[0].begin, ax[1].begin, ax[0].end, ax[1].end),
                    ax[0].out, ax[1].out)


@pytest.mark.parametrize("seed", range(6))
def test_random_knobs_compute_the_pool(seed):
    """Random windows, strides, pads and ceil mode x random valid knobs, against the host kernel (exact)."""
    rng = np.random.default_rng(seed)
    lanes = float_lanes()
    k = int(rng.integers(2, 4))
    s = int(rng.integers(1, 3))
    p = int(rng.integers(0, k))
    h = int(rng.integers(lanes // 2 + 2 * k, 3 * lanes))
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p, p, p, p], "ceil_mode": int(seed % 2)}
    shape = (1, int(rng.integers(1, 5)), h, h + int(rng.integers(0, 5)))
    task = LlvmPoolTask(_spec(shape, attrs))
    sp = task.make_space()
    cands = sp.candidates()
    assert sp.point(task.default_knobs()) in cands
    x = rng.standard_normal(shape).astype(np.float32)
    want = KERNELS["MaxPool"](attrs, x)
    for i in rng.integers(0, len(cands), 3):
        knobs = sp.knobs(cands[int(i)])
        np.testing.assert_array_equal(np.asarray(task.kernel(knobs)(x)), want, err_msg=str(knobs))


def test_bad_knobs_are_named():
    spec = _spec((1, 4, 20, 20), {"kernel_shape": [3, 3], "strides": [2, 2]})  # 9x9 output
    with pytest.raises(te.TeError, match="xt=10 must be an int in 1..9"):
        CpuPoolKnobs(10, 1).check(spec)
    with pytest.raises(te.TeError, match="yt=0 must be an int in 1..9"):
        CpuPoolKnobs(4, 0).check(spec)
    with pytest.raises(te.TeError, match="parallel='rows'; allowed"):
        CpuPoolKnobs(4, 1, "rows").check(spec)
    with pytest.raises(te.TeError, match="xt=True"):
        CpuPoolKnobs(True, 1).check(spec)


def test_space_rejects_with_reasons():
    lanes = float_lanes()
    one = LlvmPoolTask(_spec((1, 1, 4 * lanes, 4 * lanes), {"kernel_shape": [2, 2], "strides": [2, 2]}))
    sp = one.make_space()
    assert sp.reject(one.default_knobs()) is None and one.default_knobs().parallel == "none"
    assert "over one plane" in sp.reject(CpuPoolKnobs(lanes, 1, "nc"))
    regs = sp.registers
    wide = CpuPoolKnobs(2 * lanes, 16, "none")  # 2 vectors x 16 rows
    assert (sp.reject(wide) is None) == (32 + 2 <= regs)
    assert all(sp.accumulators(k) + 2 <= regs for k in map(sp.knobs, sp.candidates()))


def _pool_model(path) -> str:
    b = OnnxBuilder(5)
    y = b.conv_bn("input", 3, 8, 3)
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [b.conv_bn(y, 8, 8, 3)])])
    onnx.save(b.model("pool", "input", (1, 3, 40, 40), b.gemm(y, 8, 4)), str(path))
    return str(path)


@pytest.mark.parametrize("logged_wins", [True, False])
def test_build_applies_logged_pool_knobs_only_where_faster(tmp_path, monkeypatch, logged_wins):
    from compiler.executor import build

    path = _pool_model(tmp_path / "p.onnx")
    tasks = extract_llvm_tasks(path)
    assert [type(t).__name__ for t in tasks] == ["LlvmConvTask", "LlvmConvTask", "LlvmPoolTask"]
    pt = tasks[-1]
    assert (pt.spec.oh, pt.spec.ow, pt.spec.c) == (20, 20, 8)
    sp, d = pt.make_space(), pt.default_knobs()
    chosen = next(k for k in map(sp.knobs, sp.candidates()) if k.yt != d.yt and k.xt != d.xt)
    log = tmp_path / "t.log"
    log.write_text(pt.record_line(chosen, Result(100, None, 0.0), "test") + "\n")
    monkeypatch.setattr(LlvmPoolTask, "bound_call", lambda self, k: k)
    monkeypatch.setattr(lc, "time_call", lambda call, repeats=5, flush=False:
                        (50 if logged_wins else 200) if call == chosen else 100)
    monkeypatch.setattr(llvm_log, "layer_times", lambda mods, feeds: [
        {n.name: t for n in m.graph.nodes} for m, t in zip(mods, (1.0, 0.5))])
    x = np.random.default_rng(0).standard_normal((1, 3, 40, 40)).astype(np.float32)
    base = build(path, target="llvm", progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = build(path, target="llvm", progress=False, tuning_log=log)
    assert any("no usable llvm record for 2 of 3" in str(w.message) for w in caught)  # the convs: not in the log
    used = [plan.key[-1] for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "MaxPool"]
    assert used == [chosen if logged_wins else d]
    np.testing.assert_array_equal(np.asarray(tuned(input=x)), np.asarray(base(input=x)))


def test_pool_records_with_conv_configs_warn_and_are_skipped(tmp_path):
    lanes = float_lanes()
    task = LlvmPoolTask(_spec((1, 2, 2 * lanes, 2 * lanes), {"kernel_shape": [2, 2], "strides": [2, 2]}))
    good = json.loads(task.record_line(task.default_knobs(), Result(10, None, 0.0)))
    bad = dict(good, config={"ob": 8, "xt": 2, "parallel": "none", "unroll": 1, "order": "rc_ky_kx"})
    log = tmp_path / "l.log"
    log.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.warns(TuningLogWarning, match="unknown knobs \\['ob', 'order', 'unroll'\\]"):
        recs = lc.load_llvm_records(log)
    assert [r[1] for r in recs] == [task.default_knobs()]


def test_plan_pool_refuses_knobs_it_cannot_use():
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans_float import plan_pool
    from compiler.graph.ir import Node, TensorInfo

    node = Node("MaxPool", ["x"], ["y"], {"kernel_shape": [2, 2], "strides": [2, 2]}, name="mp")
    info = [TensorInfo((1, 4, 32, 32), np.dtype(np.float32))]
    assert plan_pool(node, info, {}, "llvm", knobs=CpuPoolKnobs(8, 2, "none")).key[-1] == CpuPoolKnobs(8, 2, "none")
    with pytest.raises(UnsupportedOnTarget, match="got CpuPoolKnobs for 'cuda'"):
        plan_pool(node, info, {}, "cuda", knobs=CpuPoolKnobs(8, 2))
    with pytest.raises(UnsupportedOnTarget, match="xt=17 must be an int in 1..16"):
        plan_pool(node, info, {}, "llvm", knobs=CpuPoolKnobs(17, 2))
    avg = Node("AveragePool", ["x"], ["y"], {"kernel_shape": [2, 2], "strides": [2, 2]}, name="ap")
    with pytest.raises(UnsupportedOnTarget, match="float32 MaxPools whose rows take pixel vectors"):
        plan_pool(avg, info, {}, "llvm", knobs=CpuPoolKnobs(8, 2))
