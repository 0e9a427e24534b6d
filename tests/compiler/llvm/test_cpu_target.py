"""The LLVM target CPU: $VTA_LLVM_CPU / $VTA_LLVM_FEATURES / use_cpu, the feature levels' vector widths, and the
refusal to run code compiled for features this machine lacks."""
import numpy as np
import pytest

import compiler
from compiler import te
from compiler.schedule import create_schedule
from compiler.backend.llvm.host import (HostLacksFeatures, float_lanes, host_cpu, int8_dot, make_target, missing_features,
                                  target_cpu, use_cpu, vector_bits)


def test_levels_have_the_vector_width_of_their_isa():
    assert [vector_bits(make_target(lv)) for lv in ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")] == \
        [128, 128, 256, 512]
    assert [float_lanes(make_target(lv)) for lv in ("x86-64-v2", "x86-64-v3", "x86-64-v4")] == [4, 8, 16]
    assert int8_dot(make_target("x86-64-v4")) is None  # VNNI is not part of v4
    assert int8_dot(make_target("x86-64-v4", "+avx512vnni")) == "avx512vnni"
    assert int8_dot(make_target("x86-64-v3", "+avxvnni")) == "avxvnni"
    assert vector_bits(make_target("x86-64-v4", "-avx512f")) == 256


def test_environment_picks_the_target(monkeypatch):
    monkeypatch.setenv("VTA_LLVM_CPU", "x86-64-v2")
    monkeypatch.setenv("VTA_LLVM_FEATURES", "+avx2")
    t = target_cpu()
    assert (t.label, t.cpu, t.features) == ("x86-64-v2", "x86-64-v2", "+avx2")
    assert vector_bits() == 256
    with use_cpu("x86-64-v4"):  # in-process override wins over the environment
        assert float_lanes() == 16
    monkeypatch.delenv("VTA_LLVM_CPU")
    monkeypatch.delenv("VTA_LLVM_FEATURES")
    assert target_cpu().label == "host" and target_cpu().enabled == host_cpu()[1]


@pytest.mark.parametrize("cpu,features,match", [("skylake", "", "choose one of host, x86-64"),
                                                ("x86-64-v3", "avx2", "write \\+name or -name"),
                                                ("x86-64-v3", "+notafeature", "not valid")])
def test_bad_target_is_a_clear_error(monkeypatch, cpu, features, match):
    monkeypatch.setenv("VTA_LLVM_CPU", cpu)
    monkeypatch.setenv("VTA_LLVM_FEATURES", features)
    with pytest.raises(ValueError, match=match):
        target_cpu()


def _axpy():
    x = te.placeholder((64,), "float32", "x")
    y = te.compute((64,), lambda i: x[i] * 3.0 + 1.0, name="y")
    s = create_schedule(y)
    _, ii = s[y].split(y.op.axes[0], 16)
    s[y].vectorize(ii)
    return s


@pytest.mark.parametrize("level,register", [("x86-64-v2", "xmm"), ("x86-64-v3", "ymm"), ("x86-64-v4", "zmm")])
def test_code_is_compiled_for_the_level_and_run_only_where_the_host_has_it(level, register):
    with use_cpu(level):
        f = compiler.build_op(_axpy())
        assert register in f.asm()
        x = np.arange(64, dtype=np.float32)
        if missing_features():
            with pytest.raises(HostLacksFeatures, match="compiled only and never run"):
                f(x)
        else:
            np.testing.assert_array_equal(f(x), x * 3 + 1)
    # the same schedule compiled for the host is another kernel, and runs
    np.testing.assert_array_equal(compiler.build_op(_axpy())(np.ones(64, np.float32)), np.full(64, 4, np.float32))


def test_missing_features_names_what_the_host_lacks():
    host = host_cpu()[1]
    want = sorted({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} - host)
    assert missing_features(make_target("x86-64-v4")) == [f for f in want]
    assert missing_features(make_target("host")) == []


@pytest.mark.parametrize("level", ["x86-64-v2", "x86-64-v4"])
def test_a_whole_model_builds_for_every_level(level):
    """The operator library's schedules compile for a level (a model built for it runs where the host has it)."""
    import onnxruntime as ort

    from compiler.executor import build
    from compiler.zoo.builder import OnnxBuilder

    b = OnnxBuilder(5)
    y = b.conv_bn("input", 8, 16, 3)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    model = b.model("m", "input", (1, 8, 10, 10), b.gemm(y, 16, 10))
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 10)).astype(np.float32)
    with use_cpu(level):
        mod = build(model, target="llvm", progress=False)
        runs = not missing_features()
    if not runs:
        with pytest.raises(HostLacksFeatures):
            mod(input=x)
        return
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    np.testing.assert_allclose(mod(input=x), ref, rtol=1e-5, atol=1e-5)
