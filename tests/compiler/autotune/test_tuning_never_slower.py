"""A tuning log never makes a layer or the network slower than the default build (the regression: a 4-trial XGB
log of ResNet-18 made two layers slower, because the tuner was seeded with the analytic choice rather than the
build's measured default and measured kernels without their fused residual Add)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from compiler.autotune import extract_tasks, measure, tune_tasks
from compiler.autotune.network import default_knobs
from compiler.executor import build
from compiler.zoo import resnet18

CALIB = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
X = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)


def _model():
    return resnet18(1, image_size=32, num_classes=10, base_width=16, seed=0)


def _run(t, batch):
    return [measure(t, k) for k in batch]


def _layer_cycles(mod) -> dict[str, int]:
    mod.run({"input": X})
    return {r["name"]: r["cycles"] for r in mod.profile() if r["target"] == "accel"}


@pytest.fixture(scope="module")
def base():
    mod = build(_model(), "pynq-z1", calibration=CALIB, progress=False)
    return mod, _layer_cycles(mod), extract_tasks(mod.compiled, mod.accel)


def _tuned_cycles(log) -> tuple[dict[str, int], np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = build(_model(), "pynq-z1", calibration=CALIB, progress=False, tuning_log=log)
    return _layer_cycles(mod), mod.get_output(0)


@pytest.mark.parametrize("kind,trials,with_default", [("random", 2, False), ("xgb", 4, True)])
def test_a_log_never_slows_a_layer_or_the_network(base, tmp_path, kind, trials, with_default):
    mod, before, tasks = base
    log = tmp_path / "t.log"
    tune_tasks(tasks, _run, kind, n_trial=trials, batch_size=4, log=str(log), include_default=with_default)
    after, out = _tuned_cycles(log)
    assert after.keys() == before.keys()
    slower = {k: (before[k], after[k]) for k in before if after[k] > before[k]}
    assert not slower, f"layers slower with the log (before, after): {slower}"
    assert sum(after.values()) <= sum(before.values())
    np.testing.assert_array_equal(out, mod.get_output(0))  # same arithmetic, whatever the tiling


def test_the_tuner_measures_the_builds_own_default_first(base, tmp_path):
    mod, before, tasks = base
    used = {rep.comp.kernel.knobs for rep in mod.accel._replays.values()}
    log = tmp_path / "one.log"
    res = tune_tasks(tasks, _run, "random", n_trial=1, batch_size=1, log=str(log))
    assert [r.knobs for r in res] == [default_knobs(t) for t in tasks]
    assert {r.knobs for r in res} <= used  # what the build without a log compiled
    after, _ = _tuned_cycles(log)
    assert after == before
