"""Tuning the llvm target's GEMM schedule: knobs compute the same product, the space, the tasks of a model, the log,
and the build's never-slower rule."""
from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest

from compiler import te
from compiler.autotune import TuningLogWarning, tune_tasks
from compiler.autotune import llvm_conv as lc
from compiler.autotune.llvm_gemm import CpuGemmSpace, LlvmGemmTask
from compiler.autotune.measure import Result
from compiler.backend.llvm.host import float_lanes
from compiler.executor import llvm_log
from compiler.executor.llvm_tasks import extract_llvm_tasks
from compiler.topi import gemm
from compiler.topi.conv2d_direct import Conv2dSpec
from compiler.topi.gemm import CpuGemmKnobs
from compiler.zoo.builder import OnnxBuilder


def _relu_ref(a, b, bias):
    return np.maximum(np.matmul(a.astype(np.float64), b.astype(np.float64)) + bias, 0.0)


@pytest.mark.parametrize("seed", range(6))
def test_random_knobs_compute_the_product(seed):
    """Random shapes (ragged rows and columns, broadcast batches) x random valid knobs against numpy."""
    rng = np.random.default_rng(seed)
    m, k, n = (int(v) for v in rng.integers(1, 40, 3))
    batch_a, batch_b = [(), (), (3,), (2, 1), (1,), (2, 3)][seed], [(), (1,), (3,), (1, 4), (5,), (2, 3)][seed]
    task = LlvmGemmTask(batch_a + (m, k), batch_b + (k, n), bias=True, act="relu")
    sp = task.make_space()
    cands = sp.candidates()
    assert sp.point(task.default_knobs()) in cands
    for p in [cands[int(i)] for i in rng.integers(0, len(cands), 3)]:
        knobs = sp.knobs(p)
        a, b, bias = task.inputs(knobs, seed)
        got = task.kernel(knobs)(a, b, bias)
        np.testing.assert_allclose(np.asarray(got), _relu_ref(a, b, bias), rtol=1e-4, atol=1e-4, err_msg=str(knobs))


@pytest.mark.parametrize("bad, match", [(CpuGemmKnobs(bm=0), "bm=0 must be an int in 1..16"),
                                        (CpuGemmKnobs(nvec=9), "nvec=9 must be an int in 1..8"),
                                        (CpuGemmKnobs(bm=True), "bm=True"),
                                        (CpuGemmKnobs(parallel="rows"), "parallel='rows'; allowed"),
                                        (CpuGemmKnobs(kunroll=3), "kunroll=3; allowed"),
                                        (CpuGemmKnobs(kunroll=4), "kunroll=4 must divide the reduction \\(6\\)")])
def test_bad_knobs_are_named(bad, match):
    with pytest.raises(te.TeError, match=match):
        bad.check(6)
    with pytest.raises(te.TeError, match=match):
        gemm.gemm((8, 6), (6, 16), float_lanes(), knobs=bad)


def test_space_rejects_redundant_and_oversized_tiles_with_reasons():
    lanes = float_lanes()
    task = LlvmGemmTask((5, 12), (12, 2 * lanes))  # 5 rows, two vectors of columns, tiny: one thread by default
    sp = task.make_space()
    d = task.default_knobs()
    assert d == CpuGemmKnobs(bm=5, nvec=2, parallel="none") and sp.reject(d) is None
    assert "exceeds the 5 rows" in sp.reject(CpuGemmKnobs(bm=6, nvec=2, parallel="none"))
    assert "the same program as nvec=2" in sp.reject(CpuGemmKnobs(bm=2, nvec=3, parallel="none"))
    assert "parallel='cols' over one column block" in sp.reject(CpuGemmKnobs(bm=2, nvec=2, parallel="cols"))
    assert sp.reject(CpuGemmKnobs(bm=2, nvec=1, parallel="cols")) is None  # two column blocks of one vector
    big = LlvmGemmTask((64, 12), (12, 8 * lanes)).make_space()
    over = CpuGemmKnobs(bm=12, nvec=4)  # 48 accumulators + 4 columns + a broadcast
    assert f"exceed the {big.registers} vector registers" in big.reject(over)
    assert all(k.bm * k.nvec + k.nvec + 1 <= big.registers for k in map(big.knobs, big.candidates()))


def test_kunroll_that_does_not_divide_is_rejected():
    sp = LlvmGemmTask((8, 10), (10, 16)).make_space()
    assert "kunroll=4 must divide the reduction (10)" in sp.reject(CpuGemmKnobs(bm=4, nvec=1, kunroll=4))
    assert sp.reject(CpuGemmKnobs(bm=4, nvec=1, kunroll=2, parallel="none")) is None


def test_task_rejects_operands_that_do_not_multiply():
    with pytest.raises(te.TeError, match="inner sizes 5 and 6 differ"):
        LlvmGemmTask((4, 5), (6, 7))


def _products_model(path) -> str:
    """(2, 10, 24) -> relu(x @ W + b) (a dense over 20 rows) -> scores h @ h^T (two activations) -> scores @ h."""
    b = OnnxBuilder(3)
    w = b.const((np.random.default_rng(3).standard_normal((24, 40)) * 0.2).astype(np.float32), "w")
    bias = b.const(np.linspace(-0.5, 0.5, 40).astype(np.float32), "b")
    h = b.op("Relu", [b.op("Add", [b.op("MatMul", ["input", w]), bias])])
    s = b.op("MatMul", [h, b.op("Transpose", [h], perm=[0, 2, 1])])
    out = b.op("MatMul", [s, h])
    onnx.save(b.model("products", "input", (2, 10, 24), out), str(path))
    return str(path)


def test_a_models_products_are_tasks_and_the_one_row_classifier_is_not(tmp_path):
    tasks = extract_llvm_tasks(_products_model(tmp_path / "p.onnx"))
    assert [(t.a, t.b, t.bias, t.act) for t in tasks] == [
        ((20, 24), (24, 40), True, "relu"), ((2, 10, 40), (2, 40, 10), False, None),
        ((2, 10, 10), (2, 10, 40), False, None)]
    assert all(isinstance(t, LlvmGemmTask) and t.make_space().transfer_family == "llvm_gemm" for t in tasks)
    bld = OnnxBuilder(7)
    y = bld.op("Flatten", [bld.op("GlobalAveragePool", [bld.conv_bn("input", 3, 8, 3)])])
    onnx.save(bld.model("cls", "input", (1, 3, 8, 8), bld.gemm(y, 8, 4)), str(tmp_path / "c.onnx"))
    assert [type(t).__name__ for t in extract_llvm_tasks(str(tmp_path / "c.onnx"))] == ["LlvmConvTask"]


def test_xgb_tunes_convs_and_products_of_one_network_with_a_model_each(tmp_path):
    """One network's conv and GEMM tasks: their features differ in length, so each family gets its own transfer
    data (a shared one would stack rows of two lengths); the log holds every trial."""
    pytest.importorskip("xgboost")
    tasks = [LlvmGemmTask((12, 16), (16, 32)), lc.LlvmConvTask(Conv2dSpec(1, 8, 6, 6, 16, 3, 3, (1, 1), (1, 1, 1, 1))),
             LlvmGemmTask((20, 8), (8, 16), bias=True)]
    assert len({len(t.make_space().features(t.default_knobs())) for t in tasks}) == 2
    log = tmp_path / "t.log"
    with lc.LlvmMeasurer() as m:
        res = tune_tasks(tasks, m, "xgb", 6, 3, str(log), 0)
    assert [r.trials for r in res] == [6, 6, 6] and all(r.cycles > 0 for r in res)
    recs = lc.load_llvm_records(log)
    assert len(recs) == 18 and sum(isinstance(k, CpuGemmKnobs) for _, k, _, _ in recs) == 12


def _line(task, knobs, ns=100):
    return task.record_line(knobs, Result(ns, None, 0.0), "test")


def _other(task):
    d = task.default_knobs()
    sp = task.make_space()
    return next(k for k in map(sp.knobs, sp.candidates()) if k.bm != d.bm and k.parallel == d.parallel)


@pytest.mark.parametrize("logged_wins", [True, False])
def test_build_applies_logged_gemm_knobs_only_where_faster(tmp_path, monkeypatch, logged_wins):
    from compiler.executor import build

    path = _products_model(tmp_path / "p.onnx")
    tasks = extract_llvm_tasks(path)
    chosen = {t.key: _other(t) for t in tasks}
    log = tmp_path / "t.log"
    log.write_text("".join(_line(t, chosen[t.key]) + "\n" for t in tasks))
    monkeypatch.setattr(LlvmGemmTask, "bound_call", lambda self, k: (self.key, k))
    monkeypatch.setattr(lc, "time_call", lambda call, repeats=5, flush=False:
                        (50 if logged_wins else 200) if call[1] == chosen[call[0]] else 100)
    monkeypatch.setattr(llvm_log, "layer_times", lambda mods, feeds: [
        {n.name: t for n in m.graph.nodes} for m, t in zip(mods, (1.0, 0.5))])
    x = np.random.default_rng(0).standard_normal((2, 10, 24)).astype(np.float32)
    base = build(path, target="llvm", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningLogWarning)  # every task has a usable record
        tuned = build(path, target="llvm", progress=False, tuning_log=log)
    used = sorted(repr(plan.key[-1]) for plan, _ in tuned.cpu._plans.values() if plan.key[0] == "gemm")
    defaults = sorted(repr(t.default_knobs()) for t in tasks)
    assert used == (sorted(map(repr, chosen.values())) if logged_wins else defaults)
    assert tuned.compiled.stats["tuned_tasks"] == (3 if logged_wins else 0)
    h = np.maximum(x.reshape(20, 24).astype(np.float64) @ _weights(path)[0] + _weights(path)[1], 0).reshape(2, 10, 40)
    want = np.matmul(np.matmul(h, h.transpose(0, 2, 1)), h)
    for mod in (base, tuned):
        np.testing.assert_allclose(np.asarray(mod(input=x)), want, rtol=1e-4, atol=1e-3)


def _weights(path) -> tuple[np.ndarray, np.ndarray]:
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    return next(v for v in inits.values() if v.shape == (24, 40)), next(v for v in inits.values() if v.shape == (40,))


def test_gemm_records_with_bad_configs_warn_and_are_skipped(tmp_path):
    task = LlvmGemmTask((12, 16), (16, 32))
    good = json.loads(_line(task, CpuGemmKnobs(bm=4, nvec=1)))
    conv_conf = dict(good, config={"ob": 8, "xt": 2, "parallel": "none", "unroll": 1, "order": "rc_ky_kx"})
    not_obj = dict(good, config=[4, 1])
    log = tmp_path / "bad.log"
    log.write_text("\n".join(json.dumps(o) for o in (good, conv_conf, not_obj)) + "\n")
    with pytest.warns(TuningLogWarning) as caught:
        recs = lc.load_llvm_records(log)
    assert [r[1] for r in recs] == [CpuGemmKnobs(bm=4, nvec=1)]
    msgs = [str(w.message) for w in caught]
    assert any("unknown knobs ['ob', 'order', 'unroll', 'xt']" in m and ":2:" in m for m in msgs)
    assert any("config must be an object" in m and ":3:" in m for m in msgs)


def test_plans_refuse_knobs_of_another_kind():
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans_float import plan_dense
    from compiler.graph.ir import Node, TensorInfo
    from compiler.topi.conv2d_gpu import GpuConvKnobs

    w = np.ones((16, 8), np.float32)
    many = [TensorInfo((6, 16), np.dtype(np.float32)), None]
    node = Node("MatMul", ["x", "w"], ["y"], {}, name="mm")
    assert plan_dense(node, many, {"w": w}, "llvm", knobs=CpuGemmKnobs(bm=3, nvec=1)).key[-1] == \
        CpuGemmKnobs(bm=3, nvec=1)
    with pytest.raises(UnsupportedOnTarget, match="got GpuConvKnobs for 'llvm'"):
        plan_dense(node, many, {"w": w}, "llvm", knobs=GpuConvKnobs())
    with pytest.raises(UnsupportedOnTarget, match="this dense has 1"):
        plan_dense(node, [TensorInfo((1, 16), np.dtype(np.float32)), None], {"w": w}, "llvm", knobs=CpuGemmKnobs())
    with pytest.raises(UnsupportedOnTarget, match="kunroll=4 must divide the reduction \\(6\\)"):
        plan_dense(node, [TensorInfo((6, 6), np.dtype(np.float32)), None], {"w": np.ones((6, 8), np.float32)},
                   "llvm", knobs=CpuGemmKnobs(kunroll=4))
