"""Every preset runs the zoo's model families (small inputs): built for the simulator, bit-exact with the numpy
reference backend of the same compiled graph."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from compiler.executor import build
from compiler.executor.module import Module
from compiler.graph.ref_backend import RefAccelBackend
from compiler.zoo import mobilenet_v2, mobilenet_v3_style, resnet18
from compiler.zoo.mobilenet import V2_SETTINGS
from compiler.zoo.mobilenet_v3 import V3_SMALL
from isa import preset_names

logging.getLogger().setLevel(logging.ERROR)
SIZE = 16
MODELS = {
    "resnet18": lambda: resnet18(image_size=SIZE, num_classes=10, base_width=8),
    "mobilenet_v2": lambda: mobilenet_v2(image_size=SIZE, num_classes=10, width=0.25, settings=V2_SETTINGS[:3],
                                         last_channels=32),
    "mobilenet_v3": lambda: mobilenet_v3_style(image_size=SIZE, num_classes=10, width=0.5, settings=V3_SMALL[:3],
                                               last_channels=32),
}


@pytest.mark.parametrize("preset", preset_names())
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_runs_on_every_preset(name, preset):
    rng = np.random.default_rng(4)
    calib = rng.standard_normal((2, 3, SIZE, SIZE)).astype(np.float32)
    x = rng.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)
    sim = build(MODELS[name](), preset, target="sim", calibration=calib, progress=False)
    ref = Module(sim.compiled, RefAccelBackend(sim.compiled.config))  # the same compiled graph, one compilation
    got = sim(input=x)
    np.testing.assert_array_equal(got, ref(input=x))
    assert got.shape == (1, 10) and sim.profile_summary()["accel_cycles"] > 0
