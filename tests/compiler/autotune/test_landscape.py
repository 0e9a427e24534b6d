"""The tuner benchmark's random-search baseline: exact expected trials on a landscape, censoring, valid samples."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.autotune import ConvSpace, GridTuner, Result, Task
from compiler.autotune.landscape import LandscapeSpace, expected_random_trials, ratio_to_expected, valid_sample
from compiler.topi.conv2d import ConvShape
from isa import make_config
from jit_runtime.host_ops.requant import Requant


def _brute_force(costs, target) -> float:
    """Mean position of the first qualifying cost over every ordering (uniform sampling without replacement)."""
    firsts = [next(i for i, c in enumerate(perm, 1) if c <= target) for perm in itertools.permutations(costs)]
    return sum(firsts) / len(firsts)


@pytest.mark.parametrize("costs, target, want", [
    ([10, 20, 30, 40], 10, 2.5),        # one of 4: its position is uniform over 1..4
    ([10, 10, 30], 10, 4 / 3),          # two of 3: first at 1 w.p. 2/3, else at 2
    ([7], 7, 1.0),
    ([5, 3, 3, 9, 4], 3.0, 2.0),        # (5 + 1) / (2 + 1)
    ([1, 2, 3, 4, 5, 6], 6, 1.0),       # everything qualifies
])
def test_expected_random_trials_hand_computed(costs, target, want):
    assert expected_random_trials(costs, target) == pytest.approx(want)
    assert _brute_force(costs, target) == pytest.approx(want)


def test_expected_random_trials_matches_brute_force_on_random_landscapes():
    rng = np.random.default_rng(3)
    for _ in range(20):
        costs = list(rng.integers(100, 110, size=int(rng.integers(1, 7))))
        target = float(min(costs)) / 0.99
        assert expected_random_trials(costs, target) == pytest.approx(_brute_force(costs, target))


def test_expected_random_trials_nothing_qualifies_and_bad_input():
    assert expected_random_trials([5, 6, 7], 4) == 4.0  # a sample with no hit: exhausted, then the hit
    with pytest.raises(ValueError, match="non-empty"):
        expected_random_trials([], 1.0)


def test_ratio_to_expected_censoring_never_flatters():
    assert ratio_to_expected(2, 4.0, 16) == 0.5
    assert ratio_to_expected(None, 4.0, 16) == pytest.approx(17 / 4)   # counts trials + 1
    assert ratio_to_expected(None, 100.0, 16) == 1.0                   # but never better than random
    with pytest.raises(ValueError, match="> 0"):
        ratio_to_expected(1, 0.0, 16)


class _Toy:
    """A 4x5 grid space whose valid points are those with an even sum."""

    dims = (4, 5)

    def __len__(self):
        return 20

    def at(self, i):
        return divmod(i, 5)

    def knobs(self, p):
        return p

    def reject(self, k):
        return None if sum(k) % 2 == 0 else "odd"


def test_valid_sample_whole_space_and_subsample():
    valid = {(a, b) for a in range(4) for b in range(5) if (a + b) % 2 == 0}
    pts, whole = valid_sample(_Toy(), 0, np.random.default_rng(0))
    assert whole and sorted(pts) == sorted(valid) and len(pts) == len(set(pts))
    pts, whole = valid_sample(_Toy(), 4, np.random.default_rng(1))
    assert not whole and len(set(pts)) == 4 and set(pts) <= valid
    assert valid_sample(_Toy(), 4, np.random.default_rng(1))[0] == pts  # seeded: the same sample


def test_cold_space_drops_only_the_analytic_estimate():
    cfg = make_config("pynq-z1")
    task = Task(cfg, ConvShape(1, 1, 2, 2, 3, 3, 3, 3, (1, 1), (1, 1, 1, 1)), None,
                Requant(shift=8, relu=True, out_min=0, out_max=127), "small")
    sp = ConvSpace(task, max_vthreads=2)
    cold = sp.without_estimate()
    k = next(sp.knobs(p) for p in sp.grid() if sp.reject(sp.knobs(p)) is None)
    full, part = sp.features(k), cold.features(k)
    assert len(part) == len(full) - 1 and np.array_equal(part, full[:-1])
    assert cold._cache is sp._cache and sp.estimate_feature  # shared lowering cache; the original keeps it


def _small_space():
    cfg = make_config("pynq-z1")
    task = Task(cfg, ConvShape(1, 1, 2, 2, 3, 3, 3, 3, (1, 1), (1, 1, 1, 1)), None,
                Requant(shift=8, relu=True, out_min=0, out_max=127), "small")
    return task, ConvSpace(task, max_vthreads=2)


def test_landscape_space_holds_only_its_points():
    task, sp = _small_space()
    valid = [p for p in sp.grid() if sp.reject(sp.knobs(p)) is None]
    inside, outside = valid[::2], valid[1::2]
    land = LandscapeSpace(sp, inside)
    assert len(land) == len(inside) and land.candidates() == inside and list(land.grid()) == inside
    assert land.point(sp.knobs(inside[0])) == inside[0] and land.reject(sp.knobs(inside[0])) is None
    assert land.point(sp.knobs(outside[0])) is None
    assert land.reject(sp.knobs(outside[0])) == "outside the measured landscape"
    with pytest.raises(ValueError, match="at least one point"):
        LandscapeSpace(sp, [])


def test_xgb_tuner_ranks_a_landscape_without_annealing(monkeypatch):
    pytest.importorskip("xgboost")
    from compiler.autotune.xgb_tuner import XGBTuner

    task, sp = _small_space()
    valid = [p for p in sp.grid() if sp.reject(sp.knobs(p)) is None]
    land = LandscapeSpace(sp, valid[::2])
    # a synthetic cost: larger tiles and more threads are faster (the model must find the corner)
    cost = {sp.knobs(p): 1000 * (4 - p[0]) * (4 - p[1]) * (4 - p[2]) + 10 * (3 - p[3] % 4) + 100 for p in valid}
    monkeypatch.setattr(XGBTuner, "_anneal", lambda self, n: pytest.fail("a landscape is ranked, not annealed"))
    tuner = XGBTuner(task, land, seed=0)
    tuner.tune(12, lambda t, batch: [Result(cost[k], None, 0.0) for k in batch], 4)
    assert len(tuner.history) == 12 and not tuner.rejected
    assert {land.point(k) for k, _ in tuner.history} <= set(land.points)



def test_bench_tuners_go_on_past_their_budget_until_the_target():
    """bench_tuner's run_tuner: the budget first (all of it, even past the target), then on until 0.99 of the
    landscape's best; with no budget it stops at the target."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from bench_tuner import run_tuner

    task, sp = _small_space()
    valid = [p for p in sp.grid() if sp.reject(sp.knobs(p)) is None][:40]
    land_sp = LandscapeSpace(sp, valid)
    costs = {sp.knobs(p): 1000 + 100 * (39 - i) for i, p in enumerate(valid)}  # the grid meets the best (1000) last
    land = {"points": valid, "costs": list(costs.values())}
    measure = lambda t, batch: [Result(costs[k], None, 0.0) for k in batch]  # noqa: E731
    for trials, expect in ((8, 40), (0, 40)):
        tuner = GridTuner(task, land_sp, seed=0)
        run_tuner(tuner, trials, land, measure, 4)
        assert len(tuner.history) == expect and tuner.best_cycles == 1000
    costs = {sp.knobs(p): 1000 + 100 * (i - 5) ** 2 for i, p in enumerate(valid)}  # the best (1000): the 6th
    land["costs"] = list(costs.values())
    for trials, expect in ((12, 12), (0, 8)):
        tuner = GridTuner(task, land_sp, seed=0)
        run_tuner(tuner, trials, land, measure, 4)
        assert len(tuner.history) == expect and tuner.best_cycles == 1000
