"""Search space validity, tuners against an exhaustive search of a small space, the cost model's ranking."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.autotune.measure import kernel_cycles
from compiler.autotune import ConvSpace, GridTuner, LocalMeasurer, RandomTuner, RayMeasurer, Result, Task, measure
from compiler.autotune.xgb_tuner import CostModel, TransferData, XGBTuner, target
from jit_runtime.host_ops.requant import Requant
from compiler.topi.conv2d import ConvShape
from compiler.topi.knobs import ConvKnobs, choose_conv_knobs
from compiler.backend.accel.measure import measure_conv
from isa import make_config

CFG = make_config("pynq-z1")
RQ = Requant(shift=8, relu=True, out_min=0, out_max=127)
SMALL = Task(CFG, ConvShape(1, 1, 2, 2, 3, 3, 3, 3, (1, 1), (1, 1, 1, 1)), None, RQ, "small")
MAX_VT = 2  # the small space: at most 2 virtual threads


def _exhaustive(task: Task) -> dict[ConvKnobs, int]:
    """Cycles of every knob setting that builds and runs, found by brute force (not through the space)."""
    cs = task.shape
    out = {}
    for oc, h, ic, v, axis, order, epi in itertools.product(range(1, cs.ocb + 1), range(1, cs.oh + 1),
                                                            range(1, cs.icb + 1), range(1, MAX_VT + 1), ("oc", "h"),
                                                            ("oc", "h"), ("fused", "deferred")):
        if v == 1 and (axis, epi) != ("oc", "fused"):
            continue  # the same program as axis "oc", "fused"
        n_tiles = -(-cs.ocb // oc) if axis == "oc" else -(-cs.oh // h)
        if cs.ocb % oc or cs.icb % ic or n_tiles < v:
            continue
        k = ConvKnobs(oc, h, ic, v, axis, order, epi)
        try:
            out[k] = measure_conv(task.cfg, cs, k, task.bias, task.requant)
        except Exception:  # noqa: BLE001 - settings that cannot build are not candidates
            pass
    return out


@pytest.fixture(scope="module")
def truth():
    return _exhaustive(SMALL)


def _lookup(truth):
    """Measurement by table: the exhaustive search's cycles (a setting outside it would raise KeyError)."""
    return lambda t, batch: [Result(truth[k], None, 0.0) for k in batch]


def test_space_accepts_exactly_the_settings_that_work(truth):
    sp = ConvSpace(SMALL, max_vthreads=MAX_VT)
    valid = {sp.knobs(p) for p in sp.grid() if sp.reject(sp.knobs(p)) is None}
    assert valid and valid <= set(truth)  # nothing the space accepts fails to build and run
    assert len(valid) >= 0.9 * len(truth)  # and it keeps almost all that do (the analytic fit is conservative)


@pytest.mark.parametrize("cls", [GridTuner, RandomTuner, XGBTuner])
def test_tuners_with_the_whole_budget_find_the_exhaustive_optimum(cls, truth):
    extra = {"chains": 8, "steps": 12} if cls is XGBTuner else {}
    tuner = cls(SMALL, ConvSpace(SMALL, max_vthreads=MAX_VT), seed=1, **extra)
    tuner.tune(10_000, _lookup(truth), batch_size=16)
    assert tuner.invalid_measured == 0
    assert tuner.best_cycles == min(truth.values())


def test_analytic_choice_is_no_better_than_the_exhaustive_optimum(truth):
    k = choose_conv_knobs(CFG, SMALL.shape, *SMALL.epilogue_size())
    assert truth[k] >= min(truth.values())


def test_rejected_settings_name_their_reason():
    task = Task(CFG, ConvShape(1, 1, 4, 4, 56, 56, 3, 3, (1, 1), (1, 1, 1, 1)), None, RQ)
    sp = ConvSpace(task)
    assert sp.reject(ConvKnobs(3, 2, 4, 1)) == "oc_tile does not divide the output channel blocks"
    assert sp.reject(ConvKnobs(4, 56, 4, 1)) == "inp scratchpad overflow"
    assert sp.reject(ConvKnobs(4, 2, 1, 4, "oc")) == "fewer oc tiles than virtual threads"
    assert sp.reject(ConvKnobs(1, 2, 1, 2, "h", "h", "sideways")).startswith("bad knob: ConvKnobs.epilogue")
    tuner = RandomTuner(task, sp, seed=0)
    batch = tuner.next_batch(4)
    assert len(batch) == 4 and all(sp.reject(k) is None for k in batch)
    assert sum(tuner.rejected.values()) > 0 and set(tuner.rejected) <= {
        "inp scratchpad overflow", "wgt scratchpad overflow", "acc scratchpad overflow", "uop kernel too large",
        "fewer oc tiles than virtual threads", "fewer h tiles than virtual threads"}


@pytest.fixture(scope="module")
def layer_trials():
    """40 random valid settings of a small layer with their cycles and features (measured once)."""
    task = Task(CFG, ConvShape(1, 1, 2, 4, 8, 8, 3, 3, (1, 1), (1, 1, 1, 1)), None, RQ)
    sp = ConvSpace(task)
    rng = np.random.default_rng(0)
    pts = [sp.at(int(i)) for i in rng.permutation(len(sp))]
    ks = [k for k in (sp.knobs(p) for p in pts) if sp.reject(k) is None][:40]
    cyc = np.array([kernel_cycles(task, k) for k in ks], dtype=float)
    X = np.stack([sp.features(k) for k in ks])
    y = np.array([target(task, c) for c in cyc])
    return X, y, cyc


@pytest.mark.parametrize("objective", ["rank", "reg"])
def test_cost_model_ranks_held_back_trials(objective, layer_trials):
    """Trained on 28 of a layer's measurements, the model orders 12 held-back ones (Spearman rho > 0.6)."""
    X, y, cyc = layer_trials
    model = CostModel(seed=0, objective=objective)
    model.fit(X[:28], y[:28])
    pred = model.predict(X[28:])
    rank = lambda a: np.argsort(np.argsort(a))  # noqa: E731
    rho = np.corrcoef(rank(pred), rank(cyc[28:]))[0, 1]
    assert rho > 0.6, rho


def test_rank_objective_orders_within_each_group():
    """Ranking compares rows of one group only: two interleaved groups (the model gathers each group's rows,
    labels and weights itself) with far apart costs; each group's held-back rows come out in cost order."""
    rng = np.random.default_rng(0)
    x = rng.random((120, 3))
    g = np.tile([1, 0], 60)
    cost = lambda x, g: np.where(g == 0, x[:, 0] + 0.5 * x[:, 1], 1000.0 + 3 * x[:, 0] + x[:, 1])  # noqa: E731
    model = CostModel(seed=0, objective="rank")
    model.fit(x[:100], cost(x[:100], g[:100]), weight=np.where(g[:100] == 0, 4.0, 1.0), groups=g[:100])
    for grp in (0, 1):
        sel = np.flatnonzero(g[100:] == grp) + 100
        pred, true = model.predict(x[sel]), cost(x[sel], g[sel])
        rho = np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(true)))[0, 1]
        assert rho > 0.8, (grp, rho)


def test_bad_model_settings_are_clear_errors():
    with pytest.raises(ValueError, match=r"objective 'l2'.*\['rank', 'reg'\]"):
        CostModel(objective="l2")
    with pytest.raises(ValueError, match=r"explore must be in \[0, 1\], got 1.5"):
        XGBTuner(SMALL, explore=1.5)


def test_timing_only_measurement_equals_the_full_simulator():
    """The tuner's measurement skips the arithmetic; its cycles must equal the cycle-accurate simulator's run
    with data, for settings with one or more threads, both loop orders and a deferred epilogue."""
    rq = Requant(multiplier=np.arange(1000, 1064), shift=12, relu=True, out_min=0, out_max=127)
    task = Task(CFG, ConvShape(1, 1, 4, 4, 10, 10, 3, 3, (2, 2), (1, 1, 1, 1)),
                np.arange(-32, 32).astype(np.int32), rq)
    for k in (ConvKnobs(2, 2, 2, 1), ConvKnobs(2, 1, 4, 2, "oc", "h", "deferred"), ConvKnobs(4, 1, 1, 3, "h")):
        assert ConvSpace(task).reject(k) is None
        # the one timing-only measurement (the chooser's, the tuner's, the DSE's) against the kernel built as a
        # module and run on the full simulator
        assert kernel_cycles(task, k) == measure_conv(CFG, task.shape, k, task.bias, rq) == kernel_cycles(
            task, k, device="sim") > 0


def test_model_transfers_to_the_next_task():
    """A model trained on one layer's trials proposes a first batch for another layer better than random."""
    a = Task(CFG, ConvShape(1, 1, 2, 4, 8, 8, 3, 3, (1, 1), (1, 1, 1, 1)), None, RQ)
    b = Task(CFG, ConvShape(1, 1, 4, 4, 10, 10, 3, 3, (2, 2), (1, 1, 1, 1)), None, RQ)
    run = lambda t, batch: [measure(t, k) for k in batch]  # noqa: E731
    transfer = TransferData()
    first = RandomTuner(a, seed=0)  # any trials of another layer train the model
    first.tune(20, run, batch_size=20)
    transfer.add([first.space.features(k) for k, _ in first.history], [target(a, r.cycles) for _, r in first.history])
    warm = XGBTuner(b, seed=0, transfer=transfer, chains=8, steps=15)
    cold = RandomTuner(b, seed=0)
    warm.tune(6, run, batch_size=6)
    cold.tune(6, run, batch_size=6)
    assert np.median([r.cycles for _, r in warm.history]) < np.median([r.cycles for _, r in cold.history])


def test_process_pool_measures_the_same_cycles():
    sp = ConvSpace(SMALL)
    ks = [sp.knobs(p) for p in sp.grid() if sp.reject(sp.knobs(p)) is None][:3]
    with LocalMeasurer(2) as pool:
        got = [r.cycles for r in pool(SMALL, ks)]
    assert got == [measure_conv(CFG, SMALL.shape, k, None, RQ) for k in ks]


def test_ray_without_ray_installed_is_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # ray is an optional extra: as if it were not installed
    with pytest.raises(ValueError, match=r"pip install 'vta-stack\[ray\]'"):
        RayMeasurer("auto")


def test_topi_tune_picks_the_exhaustive_best_among_its_candidates(truth):
    """compiler.backend.accel.measure simulates the analytic ranking's top candidates: with all of them it must pick the
    fastest of those settings according to the exhaustive search."""
    from compiler.topi.knobs import rank_conv_knobs
    from compiler.backend.accel.measure import tune_conv_knobs

    n_consts, n_alu = SMALL.epilogue_size()
    ranked = [k for _, k in rank_conv_knobs(CFG, SMALL.shape, n_consts, n_alu)]
    got = tune_conv_knobs(CFG, SMALL.shape, None, RQ, n_consts, n_alu, top=len(ranked))
    assert truth[got] == min(truth[k] for k in ranked)


@pytest.mark.parametrize("nb", [6, 16])
def test_measured_choice_on_a_large_batch_times_two_and_three_blocks(monkeypatch, nb):
    """The measured chooser times a batch of more than PROBE_BLOCKS blocks on two and three blocks and extrapolates
    the per-block step (a 450-image batch would otherwise cost 450 images' timing: 20 s in the digits demo); the
    extrapolation equals the whole batch's cycles for the chosen candidate, which is the fastest of the candidates
    timed whole. (One block alone ranks them wrongly: pipelining across blocks differs between tilings.)"""
    import dataclasses

    from compiler.backend.accel import measure as tune
    from compiler.topi.knobs import rank_conv_knobs

    batch = dataclasses.replace(SMALL.shape, nb=nb)
    n_consts, n_alu = SMALL.epilogue_size()
    seen = []
    real = tune.measure_conv

    def spy(cfg, cs, knobs, *a, **k):
        seen.append(cs.nb)
        return real(cfg, cs, knobs, *a, **k)

    monkeypatch.setattr(tune, "measure_conv", spy)
    got = tune.tune_conv_knobs(CFG, batch, None, RQ, n_consts, n_alu, top=4)
    assert seen == [2, 3] * 4
    ranked = [k for _, k in rank_conv_knobs(CFG, batch, n_consts, n_alu)[:4]]
    whole = {k: real(CFG, batch, k, None, RQ) for k in ranked}
    assert whole[got] == min(whole.values())
    assert tune.batch_cycles(lambda shape: real(CFG, shape, got, None, RQ), batch) == whole[got]


def test_cold_first_batch_is_spread_and_batches_are_diverse(truth):
    """Without data the XGB tuner's first batch is valid, distinct and spread over the feature space (no two points
    closer than in a uniform random sample of the same size, on average); model batches keep at most half of their
    slots on one thread combination."""
    sp = ConvSpace(SMALL, max_vthreads=MAX_VT)
    tuner = XGBTuner(SMALL, sp, seed=1, chains=8, steps=10)
    first = tuner.next_batch(6)
    assert len(set(first)) == 6 and all(sp.reject(k) is None for k in first)

    def min_gap(ks):
        F = np.stack([sp.features(k) for k in ks]).astype(np.float64)
        d = np.linalg.norm(F[:, None] - F[None], axis=2) + np.eye(len(ks)) * 1e9
        return d.min()
    rng = np.random.default_rng(0)
    valid = [sp.knobs(p) for p in sp.grid() if sp.reject(sp.knobs(p)) is None]
    rand_gaps = [min_gap([valid[i] for i in rng.choice(len(valid), 6, replace=False)]) for _ in range(20)]
    assert min_gap(first) >= np.median(rand_gaps)
    tuner.update(first, _lookup(truth)(SMALL, first))
    batch = tuner.next_batch(6)
    combos = [sp.point(k)[3] for k in batch]
    assert max(combos.count(c) for c in combos) <= 3


def test_spearman_and_the_exploration_boost(truth):
    from compiler.autotune.xgb_tuner import _spearman

    assert _spearman(np.array([1.0, 2, 3, 4]), np.array([10.0, 20, 30, 40])) == pytest.approx(1.0)
    assert _spearman(np.array([1.0, 2, 3, 4]), np.array([4.0, 3, 2, 1])) == pytest.approx(-1.0)
    assert _spearman(np.array([1.0, 1, 1]), np.array([1.0, 2, 3])) == 0.0
    sp = ConvSpace(SMALL, max_vthreads=MAX_VT)
    tuner = XGBTuner(SMALL, sp, seed=0, chains=8, steps=10)
    tuner.tune(12, _lookup(truth), batch_size=6)
    pts = [sp.point(k) for k, _ in tuner.history[6:]]
    assert all(p in tuner._predicted for p in pts)  # model-proposed points carry the prediction they were picked by
    # a batch ranked in reverse by the model switches the extra exploration on
    ks = [k for k, _ in tuner.history[6:]][:4]
    for i, k in enumerate(sorted(ks, key=lambda k: truth[k])):
        tuner._predicted[sp.point(k)] = -float(i)
    tuner.update(ks, _lookup(truth)(SMALL, ks))
    assert tuner._boost == tuner.explore_when_wrong


def test_tune_stops_after_the_batch_that_reaches_stop_at(truth):
    """``stop_at``: the loop ends after the batch whose measurements reach the target, not before, not later."""
    sp = ConvSpace(SMALL, max_vthreads=MAX_VT)
    distinct = {truth[k]: k for k in truth if sp.point(k) is not None and sp.reject(k) is None}
    order = [distinct[c] for c in sorted(distinct, reverse=True)]  # valid settings of distinct cost, slowest first
    assert len(order) >= 20
    target = truth[order[9]]  # reached by the 10th setting measured: in the 3rd batch of 4
    tuner = RandomTuner(SMALL, sp, seed=0)
    tuner.propose = lambda n: [tuner.space.point(k) for k in order if tuner.space.point(k) not in tuner.visited][:n]
    tuner.tune(10_000, _lookup(truth), batch_size=4, stop_at=target)
    assert len(tuner.history) == 12 and tuner.best_cycles <= target
    assert min(r.cycles for _, r in tuner.history[:8]) > target  # not reached in the first two batches
    full = RandomTuner(SMALL, ConvSpace(SMALL, max_vthreads=MAX_VT), seed=0)
    full.tune(20, _lookup(truth), batch_size=4)  # no stop_at: the whole budget
    assert len(full.history) == 20


def test_neighbour_steps_tiles_and_jumps_the_thread_combination():
    """A move changes exactly one axis: a tile by 1-2 positions within its range, the thread combination (the
    last axis) to a different value; an axis of one value cannot move."""
    sp = ConvSpace(SMALL, max_vthreads=MAX_VT)
    rng = np.random.default_rng(0)
    moved = set()
    for _ in range(400):
        p = sp.sample(rng)
        q = sp.neighbour(p, rng)
        diff = [a for a in range(len(p)) if p[a] != q[a]]
        assert len(diff) <= 1 and all(0 <= q[a] < sp.dims[a] for a in range(len(q)))
        if diff:
            a = diff[0]
            moved.add(a)
            assert sp.dims[a] > 1
            if a < 3:
                assert 1 <= abs(q[a] - p[a]) <= 2
    assert moved == {a for a in range(len(sp.dims)) if sp.dims[a] > 1}
