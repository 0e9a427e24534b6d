"""``vta demo``: the digits report (fast path: a fake backend stands in for the simulator)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.executor import register_accel_backend
from compiler.graph.ref_backend import RefAccelBackend
from isa import preset_names
from vta.cli import main


class CountingRef(RefAccelBackend):
    """The reference backend plus a made-up cycle count (MACs / 256), to exercise the report."""

    def conv2d(self, *a, **k):
        out = super().conv2d(*a, **k)
        self.last_profile.update(cycles=self.last_profile["macs"] // 256, utilization=1.0)
        return out

    def dense(self, *a, **k):
        out = super().dense(*a, **k)
        self.last_profile.update(cycles=self.last_profile["macs"] // 256, utilization=1.0)
        return out


def test_demo_report(capsys):
    register_accel_backend("counting-ref", CountingRef, replace=True)
    assert main(["demo", "--target", "counting-ref", "--no-progress"]) == 0
    out = capsys.readouterr().out
    res = json.loads(out.strip().splitlines()[-1])
    assert res["target"] == "counting-ref" and res["test_images"] == 450
    assert abs(res["accuracy"] - res["int8_ort_accuracy"]) <= 0.005 and res["identical_predictions"] >= 0.99
    assert res["float_ort_accuracy"] >= 0.95
    assert np.isclose(res["latency_us_per_image"], res["cycles_per_image"] / res["clock_mhz"])
    assert "onnxruntime float accuracy" in out and "identical predictions" in out and "cycles per image" in out
    assert "AccelConv2D" in out


def test_demo_unknown_target_one_line(capsys):
    assert main(["demo", "--target", "nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope' is not registered" in err and "Traceback" not in err


@pytest.mark.parametrize("preset", preset_names())
def test_demo_runs_on_every_preset(preset, capsys):
    """`vta demo --config P` on the simulator for every preset (its first 24 test images: on tiny, batch tiles),
    predicting exactly what onnxruntime's int8 model predicts."""
    assert main(["demo", "--config", preset, "--images", "24", "--no-progress"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["target"] == "sim" and res["config"] == preset and res["test_images"] == 24
    assert res["identical_predictions"] == 1.0 and res["accuracy"] == res["int8_ort_accuracy"] >= 0.9
    assert res["cycles_per_image"] > 0 and res["accel_layers"] == 3


def test_demo_images_out_of_range_is_one_line(capsys):
    assert main(["demo", "--images", "0"]) == 2
    err = capsys.readouterr().err
    assert "--images 0" in err and "1..450" in err and "Traceback" not in err
