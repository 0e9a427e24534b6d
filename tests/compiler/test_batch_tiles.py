"""Batch is an axis that tiles like any other: a batch whose program would pass the backend's instruction budget
runs as batch tiles (one program compiled per tile size, found analytically, launched once per tile), bit-exact
with the numpy reference, its cycles the sum of the tile programs' cycles by the timing contract."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend.accel.backend import SimAccelBackend
from compiler.graph.ref_backend import RefAccelBackend
from jit_runtime.host_ops.requant import Requant
from compiler.topi.conv2d import ConvShape
from compiler.backend.accel.measure import measure_dw
from compiler.topi.depthwise import DwShape
from compiler.backend.accel.measure import measure_conv
from isa import make_config

RQ = Requant(pre_shift=2, multiplier=300, shift=12, relu=True)
RNG = np.random.default_rng(28)


def _i8(shape):
    return RNG.integers(-128, 128, shape, dtype=np.int8)


def _backend(cfg, budget: int) -> SimAccelBackend:
    be = SimAccelBackend(cfg, tune=1)  # the analytic tiling: the test's cycle check times the same knobs
    be.max_program_insns = budget
    return be


def test_conv_batch_runs_as_tiles_bit_exact_with_summed_cycles():
    cfg = make_config("tiny")
    x, w = _i8((7, 2, 6, 6, 1, 4)), _i8((3, 2, 3, 3, 4, 4))
    bias = RNG.integers(-500, 500, 12)
    args = dict(stride=(1, 1), padding=(1, 1, 1, 1), groups=1, requant=RQ)
    whole = _backend(cfg, 10 ** 9)
    whole.conv2d(x[:2], w, bias, **args)
    (rep2,) = whole._replays.values()
    be = _backend(cfg, 3 * rep2.program.n_insns // 2)  # about three images' instructions per program
    nb_t = be.batch_tile(x, w, bias, **args)
    assert 1 < nb_t < 7
    got = be.conv2d(x, w, bias, **args)
    np.testing.assert_array_equal(got, RefAccelBackend(cfg).conv2d(x, w, bias, **args))
    prof = be.last_profile
    tiles = [nb_t] * (7 // nb_t) + ([7 % nb_t] if 7 % nb_t else [])
    assert prof["batch_tiles"] == len(tiles)
    reps = list(be._replays.values())
    assert sorted(r.comp.kernel.shape.nb for r in reps) == sorted(set(tiles))  # one program per tile size
    knobs = {r.comp.kernel.knobs for r in reps}
    assert len(knobs) == 1  # the last, smaller tile keeps the others' tiling
    (k,) = knobs
    assert prof["cycles"] == sum(measure_conv(cfg, ConvShape(nb, 1, 2, 3, 6, 6, 3, 3, (1, 1), (1, 1, 1, 1)), k, bias,
                                              RQ) for nb in tiles)
    assert prof["macs"] == 7 * ConvShape(1, 1, 2, 3, 6, 6, 3, 3, (1, 1), (1, 1, 1, 1)).macs(cfg)
    assert max(r.program.n_insns for r in reps) <= be.max_program_insns * 1.25  # a budget, by an estimate


def test_a_small_batch_is_one_program():
    cfg = make_config("pynq-z1")
    x, w = _i8((5, 1, 4, 4, 1, 16)), _i8((1, 1, 1, 1, 16, 16))
    be = SimAccelBackend(cfg, tune=1)
    args = dict(stride=(1, 1), padding=(0, 0, 0, 0), groups=1, requant=RQ)
    assert be.batch_tile(x, w, None, **args) == 5
    be.conv2d(x, w, None, **args)
    assert "batch_tiles" not in be.last_profile and [r.comp.kernel.shape.nb for r in be._replays.values()] == [5]


class _RowsAsHeight(SimAccelBackend):
    def dense_rows_axis(self, x, w, bias, requant) -> str:
        return "h"


def test_dense_rows_run_as_tiles():
    cfg = make_config("tiny")
    x = _i8((40, 64 // 4, 1, 4))  # 40 rows of 64
    w = _i8((8 // 4, 64 // 4, 4, 4))
    bias = RNG.integers(-500, 500, 8)
    be = _RowsAsHeight(cfg, tune=1)
    whole = _RowsAsHeight(cfg, tune=1)
    whole.dense(x, w, bias, requant=RQ)
    (rep,) = whole._replays.values()
    be.max_program_insns = rep.program.n_insns // 3
    got = be.dense(x, w, bias, requant=RQ)
    np.testing.assert_array_equal(got, RefAccelBackend(cfg).dense(x, w, bias, requant=RQ))
    assert be.last_profile["batch_tiles"] > 1
    assert be.last_profile["macs"] == 40 * 64 * 8


@pytest.mark.parametrize("nb", [5])
def test_depthwise_batch_runs_as_tiles(nb):
    cfg = make_config("tiny")
    x, w = _i8((nb, 2, 6, 6, 1, 4)), _i8((2, 1, 3, 3, 4, 4))
    w[..., 1:] = 0  # packed depthwise weights: one input column per output channel
    args = dict(stride=(1, 1), padding=(1, 1, 1, 1), groups=8, requant=RQ)
    be = _backend(cfg, 1)  # one image per program
    assert be.depthwise_on_dwmac(x, w, 8)
    assert be.batch_tile(x, w, None, **args) == 1
    got = be.conv2d(x, w, None, **args)
    np.testing.assert_array_equal(got, RefAccelBackend(cfg).conv2d(x, w, None, **args))
    assert be.last_profile["batch_tiles"] == nb
    (rep,) = be._replays.values()
    one = DwShape(1, 2, 6, 6, 3, 3, (1, 1), (1, 1, 1, 1))
    assert be.last_profile["cycles"] == nb * measure_dw(cfg, one, rep.comp.kernel.knobs, None, RQ)


def test_tuning_tasks_are_batch_tiles_and_their_knobs_reach_every_tile():
    """`vta tune` tunes the program a layer compiles: a batch-tiled conv's task is its tile, and a log's knobs for it
    build every tile (the last, smaller one too)."""
    from compiler.autotune.task import extract_tasks
    from compiler.executor import build
    from compiler.topi.knobs import ConvKnobs
    from compiler.zoo.builder import OnnxBuilder

    b = OnnxBuilder(3)
    y = b.conv_bn("input", 4, 8, 3)
    model = b.model("t", "input", (5, 4, 6, 6), b.conv_bn(y, 8, 8, 3))
    calib = np.random.default_rng(0).standard_normal((2, 4, 6, 6)).astype(np.float32)
    mod = build(model, "tiny", target="sim", calibration=calib, progress=False)
    be = mod.accel
    be.max_program_insns = 48  # the first conv: tiles of 3 and 2 images; the second: one image per program
    tasks = extract_tasks(mod.compiled, be)
    assert tasks and all(1 <= t.shape.nb < 5 for t in tasks)
    pinned = ConvKnobs(oc_tile=1, h_tile=2, ic_tile=1, vthreads=1)
    keys = {t.key for t in tasks}
    from compiler.autotune.task import Task

    asked: list[bool] = []

    def log(cs, bias, rq):  # a tuning log holding a record for every task
        asked.append(Task(be.config, cs, bias, rq).key in keys)
        return pinned
    be.tuned = log
    mod(input=np.random.default_rng(1).standard_normal((5, 4, 6, 6)).astype(np.float32))
    assert asked and all(asked)  # every compiled program's shape is a task: the log covers it
    by_layer: dict = {}
    for r in be._replays.values():
        by_layer.setdefault(r.comp.kernel.shape.icb, set()).add((r.comp.kernel.shape.nb, r.comp.kernel.knobs))
    assert {nb for nb, _ in by_layer[1]} == {3, 2} and len({k for _, k in by_layer[1]}) == 1  # the last tile: same
