"""A Module whose last run found every node's call bound replays those calls: no per-node dispatch, the same results
as onnxruntime / the ``ref`` executor for new input values, the same profile rows, and the general path again
wherever a record it rests on changed or another thread runs it."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

from compiler.backend import set_num_threads
from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.zoo import mobilenet_v2_small, resnet18_small

SHAPE = (1, 3, 32, 32)


def _rel_err(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())


class _NoDispatch:
    """Replaces the CPU backend's per-node entry points: a replayed run calls neither."""

    def __init__(self, mod) -> None:
        self.mod = mod

    def __enter__(self):
        def refuse(*_a, **_k):
            raise AssertionError("a replayed run dispatched a node")
        self.mod.cpu.run_node_into = self.mod.cpu.run_node = refuse
        return self

    def __exit__(self, *exc) -> None:
        del self.mod.cpu.run_node_into, self.mod.cpu.run_node


@pytest.mark.parametrize("make", [mobilenet_v2_small, resnet18_small])
def test_fp32_replay_follows_the_input(make):
    model = make()
    mod = build(model, target="llvm", progress=False)
    rng = np.random.default_rng(11)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    first = mod(input=x)
    general_rows = [(r["name"], r["op"], r["cpu_backend"]) for r in mod.profile()]
    assert mod._replay is not None and len(mod._replay.steps) == len(mod.graph.nodes)
    with _NoDispatch(mod):
        np.testing.assert_array_equal(mod(input=x), first)
        x[...] = rng.standard_normal(SHAPE)  # the same array, new values
        assert _rel_err(mod(input=x), ort_run(model, {"input": x})[0]) < 1e-5
        y = rng.standard_normal(SHAPE).astype(np.float32)  # a new array: copied into the module's input buffer
        got = mod(input=y)
        assert _rel_err(got, ort_run(model, {"input": y})[0]) < 1e-5
        np.testing.assert_array_equal(mod.run()[0], got)  # no new input: the module's input buffer is unchanged
        rows = mod.profile()
    assert [(r["name"], r["op"], r["cpu_backend"]) for r in rows] == general_rows
    assert all(r["time_ms"] >= 0 for r in rows)
    got[...] = 0  # the outputs are copies: the next run's do not alias them
    assert not np.array_equal(mod(input=y), got)


@pytest.mark.parametrize("native", [True, False])
def test_int8_replay_is_bit_exact(native):
    """The replay as one native function (where this machine has one: every step's Python call refused) and as
    Python calls."""
    from compiler.backend.llvm.native_replay import clock_address
    from tests.compiler.executor.test_native_replay import python_calls_refused

    if native and not clock_address():
        pytest.skip("the native replay needs libc's clock_gettime (64-bit Linux)")
    rng = np.random.default_rng(5)
    calib = [{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(mobilenet_v2_small(), calib, per_channel=False, defaults=True)
    mod = build(q, target="llvm", progress=False)
    ref = build(q, target="ref", progress=False, fuse_residual=False)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    mod(input=x)
    assert mod._replay is not None
    if native:
        assert mod._replay.native is not None
        python_calls_refused(mod)
    else:
        mod._replay = mod._replay._replace(native=None)
    backend = mod.accel

    def refuse(*_a, **_k):
        raise AssertionError("a replayed run called the accelerator backend")
    backend.conv2d = backend.dense = refuse
    try:
        with _NoDispatch(mod):
            for threads in (1, 2):
                set_num_threads(threads)
                x = rng.standard_normal(SHAPE).astype(np.float32)
                np.testing.assert_array_equal(mod(input=x), ref(input=x))
    finally:
        set_num_threads(None)
        del backend.conv2d, backend.dense


def test_replay_gives_way_to_the_general_path():
    """A record the replay rests on changed (the backend planned its nodes again), or another thread runs the module:
    the general path runs (and records a new replay on its own thread)."""
    model = mobilenet_v2_small()
    mod = build(model, target="llvm", progress=False)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    mod(input=x)
    replay = mod._replay
    assert replay is not None
    calls = []
    into = mod.cpu.run_node_into

    def counting(*a, **k):
        calls.append(1)
        return into(*a, **k)
    mod.cpu.run_node_into = counting
    try:
        mod(input=x)
        assert calls == []  # replayed
        mod.cpu.prepare(mod.graph)  # new kernels: their bound calls are forgotten
        y = rng.standard_normal(SHAPE).astype(np.float32)
        assert _rel_err(mod(input=y), ort_run(model, {"input": y})[0]) < 1e-5
        assert len(calls) == len(mod.graph.nodes) and mod._replay is not replay
        calls.clear()
        out = []
        t = threading.Thread(target=lambda: out.append(mod(input=x)))
        t.start()
        t.join()
        assert len(calls) == len(mod.graph.nodes)  # not the thread that recorded it
        assert _rel_err(out[0], ort_run(model, {"input": x})[0]) < 1e-5
    finally:
        del mod.cpu.run_node_into


def test_keep_details_runs_the_general_path():
    mod = build(mobilenet_v2_small(), target="llvm", progress=False)
    x = np.random.default_rng(4).standard_normal(SHAPE).astype(np.float32)
    mod(input=x)
    assert mod._replay is not None
    mod.keep_details = True
    with pytest.raises(AssertionError, match="dispatched"):
        with _NoDispatch(mod):
            mod(input=x)


def test_replayed_layer_error_names_the_layer():
    """An error raised by a replayed call (a device that refuses, here) names the layer, as the general path does,
    and the next run takes the general path."""
    model = mobilenet_v2_small()
    mod = build(model, target="llvm", progress=False)
    x = np.random.default_rng(6).standard_normal(SHAPE).astype(np.float32)
    mod(input=x)
    replay = mod._replay
    n, target, call, prof = replay.steps[3]

    def broken() -> None:
        raise RuntimeError("device refused the call")
    # the Python replay (a native replay runs the kernels' own code: tests/compiler/executor/test_native_replay.py)
    mod._replay = replay._replace(steps=replay.steps[:3] + ((n, target, broken, prof),) + replay.steps[4:], native=None)
    with pytest.raises(RuntimeError, match=f"layer {n.name!r} .*device refused"):
        mod(input=x)
    assert mod._replay is None
    got = mod(input=x)  # the general path, then a new replay
    assert mod._replay is not None
    assert _rel_err(got, ort_run(model, {"input": x})[0]) < 1e-5
