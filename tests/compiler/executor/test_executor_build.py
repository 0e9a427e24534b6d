"""build(): backend registry, module API, profile rows, memory plan report."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.executor import build, register_accel_backend
from compiler.executor.registry import available_accel_backends, create_accel_backend
from compiler.graph.accel_interface import BlockConfig
from compiler.graph.memory_plan import check_plan
from compiler.graph.ref_backend import RefAccelBackend
from compiler.zoo.builder import OnnxBuilder

RNG = np.random.default_rng(5)


def _model():
    b = OnnxBuilder(7)
    y = b.conv_bn("input", 3, 16, 3)
    y = b.conv_bn(y, 16, 16, 3, stride=2)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    return b.model("m", "input", (2, 3, 8, 8), b.gemm(y, 16, 4))


CALIB = RNG.standard_normal((8, 3, 8, 8)).astype(np.float32)


def test_unregistered_target_is_a_clear_error(monkeypatch):
    with pytest.raises(ValueError, match="no accelerator backend registered as 'nosuch'.*'ref'"):
        build(_model(), target="nosuch", calibration=CALIB)
    import compiler.executor.registry as reg

    monkeypatch.delitem(reg._REGISTRY, "sim", raising=False)
    with pytest.raises(ValueError, match="no accelerator backend registered as 'sim'.*'ref'"):
        build(_model(), target="sim", calibration=CALIB)


def test_sim_backend_is_registered_on_demand():
    assert "sim" in available_accel_backends()  # registered by compiler.executor.registry


def test_registered_backend_is_used_and_profiled():
    calls = []

    class Counting(RefAccelBackend):
        def conv2d(self, *a, **k):
            out = super().conv2d(*a, **k)
            calls.append("conv2d")
            self.last_profile = dict(self.last_profile, cycles=1000, utilization=0.5)
            return out

    register_accel_backend("counting-test", Counting, replace=True)
    cfg = BlockConfig(batch=2, block_in=16, block_out=16, clock_mhz=200.0)
    m = build(_model(), config=cfg, target="counting-test", calibration=CALIB)
    ref = build(_model(), config=cfg, target="ref", calibration=CALIB)
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    m.set_input("input", x)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), ref.run({"input": x})[0])
    assert calls == ["conv2d", "conv2d"]
    rows = m.profile()
    conv_rows = [r for r in rows if r["op"] == "AccelConv2D"]
    assert [r["cycles"] for r in conv_rows] == [1000, 1000] and conv_rows[0]["utilization"] == 0.5
    assert all(r["bytes"] > 0 and r["macs"] > 0 for r in conv_rows)
    assert all(r["cycles"] is None and r["time_ms"] >= 0 for r in rows if r["target"] == "cpu")
    summary = m.profile_summary()
    assert summary["accel_cycles"] == sum(r["cycles"] for r in rows if r["target"] == "accel")
    assert summary["accel_time_ms"] == pytest.approx(summary["accel_cycles"] / 200e3)


def test_duplicate_registration_needs_replace():
    register_accel_backend("dup-test", RefAccelBackend)
    with pytest.raises(ValueError, match="already registered"):
        register_accel_backend("dup-test", lambda c: RefAccelBackend(c))
    assert isinstance(create_accel_backend("dup-test", BlockConfig()), RefAccelBackend)


def test_before_run_is_part_of_the_backend_interface():
    """``AccelBackend.before_run``: the built-in backends inherit its no-op default (the llvm one overrides it), the
    Module calls it once as each run starts, before it checks and stages the inputs (a sleeping pool worker wakes
    meanwhile), and a backend that only has conv2d/dense (no subclass) still runs."""
    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.backend.plans.accel import TargetAccelBackend
    from compiler.executor.module import Module
    from compiler.graph.accel_interface import AccelBackend

    assert all(AccelBackend in c.__mro__ for c in (RefAccelBackend, SimAccelBackend, TargetAccelBackend))
    assert RefAccelBackend(BlockConfig()).before_run() is None
    assert SimAccelBackend.before_run is AccelBackend.before_run is RefAccelBackend.before_run
    assert TargetAccelBackend.before_run is not AccelBackend.before_run
    events = []

    class Logged(RefAccelBackend):
        def before_run(self):
            events.append("before_run")

        def conv2d(self, *a, **k):
            events.append("conv2d")
            return super().conv2d(*a, **k)

    class Plain:  # the structural interface only: conv2d, dense, config, last_profile
        def __init__(self, config):
            self.ref = RefAccelBackend(config)
            self.config, self.last_profile = config, {}

        def conv2d(self, *a, **k):
            out = self.ref.conv2d(*a, **k)
            self.last_profile = self.ref.last_profile
            return out

        def dense(self, *a, **k):
            out = self.ref.dense(*a, **k)
            self.last_profile = self.ref.last_profile
            return out

    class LoggedModule(Module):
        def set_input(self, name, array):
            events.append("set_input")
            super().set_input(name, array)

    m = build(_model(), target="ref", calibration=CALIB)
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = m(input=x)
    logged = LoggedModule(m.compiled, Logged(m.compiled.config), m.cpu)
    for _ in range(2):
        np.testing.assert_array_equal(logged(input=x), want)
    assert events == ["before_run", "set_input", "conv2d", "conv2d"] * 2
    assert not hasattr(Plain, "before_run")
    np.testing.assert_array_equal(Module(m.compiled, Plain(m.compiled.config), m.cpu)(input=x), want)


def test_module_call_forms_and_errors():
    m = build(_model(), target="ref", calibration=CALIB)
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    a = m(input=x)
    b = m.run({"input": x})[0]
    np.testing.assert_array_equal(a, b)
    assert a.shape == (2, 4) and a.dtype == np.float32
    with pytest.raises(IndexError):
        m.get_output(1)
    np.testing.assert_array_equal(m.get_output(m.output_names[0]), a)


@pytest.mark.parametrize("target", ["ref", "llvm"])
def test_set_input_copies_the_array_then_runs_repeat_it(target):
    """As TVM's ``set_input``: the array is copied when bound, so a caller's later change does not reach the next
    run, and runs without a new input repeat the same result (no node writes the module's input buffers)."""
    m = build(_model(), target=target, calibration=CALIB)
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = build(_model(), target="ref", calibration=CALIB)(input=x.copy())
    m.set_input("input", x)
    x[...] = 0.0
    for _ in range(2):
        np.testing.assert_array_equal(m.run()[0], want)
    assert not np.array_equal(m(input=x), want)  # a new set_input is seen


def test_set_input_casts_nothing():
    """As onnxruntime: an input of another dtype (float64 for float32, int for float) is an error naming the dtype
    the model expects and how to convert, never a silent cast."""
    from compiler.frontend.errors import ModelInputError

    m = build(_model(), target="ref", calibration=CALIB)
    x = RNG.standard_normal((2, 3, 8, 8))
    for bad in (x, x.astype(np.float16), (x * 10).astype(np.int32)):
        with pytest.raises(ModelInputError, match=rf"dtype {bad.dtype}; the model expects float32.*astype\(np.float32\)"):
            m.set_input("input", bad)
        with pytest.raises(ModelInputError, match="the model expects float32"):
            m(input=bad)
    m.set_input("input", x.astype(np.float32))  # the conversion the message names
    np.testing.assert_array_equal(m.run()[0], m(input=x.astype(np.float32)))


def test_float_model_requires_calibration_or_quantize_false():
    with pytest.raises(ValueError, match="calibration=.*quantize=False"):
        build(_model(), target="ref")
    m = build(_model(), target="ref", quantize=False)
    assert all(r["target"] == "cpu" for r in (m.run({"input": CALIB[:2]}) and m.profile()))


def test_config_validation():
    class Bad:
        batch, block_in = 1, 16

    with pytest.raises(ValueError, match="block_out"):
        build(_model(), config=Bad(), target="ref", quantize=False)


def test_memory_plan_reported():
    m = build(_model(), target="ref", calibration=CALIB)
    plan = m.compiled.memory_plan
    check_plan(plan)
    assert plan.peak_bytes < plan.no_reuse_bytes
    assert m.compiled.stats["peak_bytes"] == plan.peak_bytes


def test_intermediates_live_in_the_planned_arena():
    """Every node output is placed at its planned offset in one arena of peak_bytes; outputs survive later runs."""
    m = build(_model(), target="ref", calibration=CALIB)
    plan = m.compiled.memory_plan
    assert m.arena_bytes == plan.peak_bytes < plan.no_reuse_bytes
    x1, x2 = RNG.standard_normal((2, 2, 3, 8, 8)).astype(np.float32)
    y1 = m(input=x1).copy()
    kept = m(input=x1)
    y2 = m(input=x2)
    np.testing.assert_array_equal(kept, y1)  # returned outputs are copies, not arena views
    assert not np.array_equal(y1, y2)
    # the same module with every tensor in its own array gives the same answers: no live tensor is clobbered
    separate = build(_model(), target="ref", calibration=CALIB)
    separate._place = lambda name, value: np.array(value)
    np.testing.assert_array_equal(separate(input=x2), y2)
    np.testing.assert_array_equal(separate(input=x1), y1)
