"""A replayed run as one native function (llvm): the same results and profile as the general path with none of the
Python calls, inputs checked as ``set_input`` checks them (wrong shape/dtype/name refused, NaN/Inf reported, other
layouts copied), and the general path wherever the native one cannot hold."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from compiler.backend.llvm.native_replay import clock_address
from compiler.executor import build
from compiler.frontend.errors import ModelInputError, NonFiniteInputWarning
from compiler.quant.ort_tools import ort_run
from compiler.zoo import mobilenet_v2_small

SHAPE = (1, 3, 32, 32)
pytestmark = pytest.mark.skipif(not clock_address(), reason="the native replay needs libc's clock_gettime (64-bit Linux)")


def _rel_err(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())


def python_calls_refused(mod) -> None:
    """Every recorded step's Python call raises: only the native function may run them."""
    def refuse() -> None:
        raise AssertionError("a native replay made a step's Python call")
    rep = mod._replay
    mod._replay = rep._replace(steps=tuple((n, t, refuse, p) for n, t, _c, p in rep.steps))


@pytest.fixture(scope="module")
def fp32():
    model = mobilenet_v2_small()
    mod = build(model, target="llvm", progress=False)
    mod(input=np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32))
    assert mod._replay is not None and mod._replay.native is not None
    general = [(r["name"], r["op"], r["cpu_backend"]) for r in mod.profile()]
    python_calls_refused(mod)
    return model, mod, general


def test_native_run_follows_the_input_and_profiles(fp32):
    model, mod, general = fp32
    rng = np.random.default_rng(3)
    for _ in range(2):
        x = rng.standard_normal(SHAPE).astype(np.float32)
        assert _rel_err(mod(input=x), ort_run(model, {"input": x})[0]) < 1e-5
    rows = mod.profile()
    assert [(r["name"], r["op"], r["cpu_backend"]) for r in rows] == general
    assert all(r["time_ms"] >= 0 for r in rows) and sum(r["time_ms"] for r in rows) > 0
    x[...] = rng.standard_normal(SHAPE)
    mod.set_input("input", x)  # set earlier, run with no inputs: the module's buffer as it stands
    assert _rel_err(mod.run()[0], ort_run(model, {"input": x})[0]) < 1e-5
    x[...] = 0  # changed after set_input: not seen
    assert _rel_err(mod.run()[0], ort_run(model, {"input": mod._inputs["input"]})[0]) < 1e-5


def test_native_run_copies_other_layouts(fp32):
    model, mod, _ = fp32
    x = np.asfortranarray(np.random.default_rng(4).standard_normal(SHAPE).astype(np.float32))
    assert not x.flags.c_contiguous
    assert _rel_err(mod(input=x), ort_run(model, {"input": np.ascontiguousarray(x)})[0]) < 1e-5
    y = np.random.default_rng(5).standard_normal((1, 3, 32, 64)).astype(np.float32)[..., ::2]  # a strided view
    assert _rel_err(mod(input=y), ort_run(model, {"input": np.ascontiguousarray(y)})[0]) < 1e-5


def test_native_run_refuses_bad_inputs(fp32):
    _, mod, _ = fp32
    x = np.zeros(SHAPE, np.float32)
    with pytest.raises(ModelInputError, match="dtype float64; the model expects float32"):
        mod(input=x.astype(np.float64))
    with pytest.raises(ModelInputError, match=r"shape \(1, 3, 32, 31\)"):
        mod(input=x[..., :31])
    with pytest.raises(ModelInputError, match="unknown input 'image'"):
        mod(input=x, image=x)
    with pytest.raises(ModelInputError, match="unknown input 'image'"):
        mod(image=x)
    with pytest.raises(ModelInputError, match=r"input 'input' has shape \(\)"):
        mod(input=None)  # not "no new input": None is refused as the general path refuses it


def test_native_run_reports_non_finite_inputs(fp32):
    _, mod, _ = fp32
    x = np.random.default_rng(6).standard_normal(SHAPE).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    x[0, 2, 0, 0] = np.inf
    with pytest.warns(NonFiniteInputWarning, match=r"input 'input' holds 2 NaN/Inf value\(s\) \(first at index "
                                                    r"\(0, 1, 2, 3\)\)"):
        mod(input=x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod(input=np.zeros(SHAPE, np.float32))  # finite: no warning


def test_general_path_where_native_cannot_hold():
    """keep_details, another thread's run or a changed record: the general path (which records a new replay)."""
    import threading

    model = mobilenet_v2_small()
    mod = build(model, target="llvm", progress=False)
    x = np.random.default_rng(8).standard_normal(SHAPE).astype(np.float32)
    mod(input=x)
    replay = mod._replay
    mod.cpu.prepare(mod.graph)  # new kernels: the bound calls the replay rests on are forgotten
    assert _rel_err(mod(input=x), ort_run(model, {"input": x})[0]) < 1e-5
    assert mod._replay is not replay and mod._replay.native is not None
    replay = mod._replay
    out = []
    t = threading.Thread(target=lambda: out.append(mod(input=x)))
    t.start()
    t.join()
    assert _rel_err(out[0], ort_run(model, {"input": x})[0]) < 1e-5
    assert mod._replay is not replay and mod._replay.thread == t.ident  # recorded by the other thread
