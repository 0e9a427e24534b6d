"""The llvm target's Winograd F(2x2, 3x3) conv (:mod:`compiler.topi.conv2d_winograd`) against numpy's direct conv:
even and odd maps, asymmetric and no padding, batches, every knob, the epilogue; where the default takes it; the
tuner's space; refusals. Per x86-64 feature level (conftest)."""
from __future__ import annotations

import numpy as np
import pytest

from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from compiler import te
from compiler.backend.build import build_op
from compiler.schedule import create_schedule
from compiler.topi import conv2d_direct as cd
from compiler.topi import conv2d_winograd as cw

RNG = np.random.default_rng(11)
S = cd.Conv2dSpec
W = "winograd"


def _run(spec: cd.Conv2dSpec, knobs: cd.CpuConvKnobs, bias: bool = True, residual: bool = True,
         act: str | None = "relu") -> tuple[np.ndarray, np.ndarray]:
    x = RNG.standard_normal((spec.n, spec.c, spec.h, spec.w)).astype(np.float32)
    w = RNG.standard_normal((spec.o, spec.c, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(spec.o).astype(np.float32)
    r = RNG.standard_normal((spec.n, spec.o, spec.oh, spec.ow)).astype(np.float32)
    op = cw.op_for(spec, knobs, bias, residual, act)
    s = create_schedule(op.out)
    cw.schedule_cpu(op, s, knobs)
    fn = build_op(s, args=op.inputs + [op.out])
    args = [x, cw.pack_weight(spec, w, knobs.ob)] + ([b] if bias else [])
    args += [r.reshape(cw.output_shape(spec, knobs.ob))] if residual else []
    got = np.asarray(fn(*args)).reshape(r.shape)
    want = conv2d_nchw(x.astype(np.float64), w.astype(np.float64), stride=(1, 1), pads=spec.pads)
    want = want + (b.reshape(1, -1, 1, 1) if bias else 0) + (r if residual else 0)
    return got, (np.maximum(want, 0) if act == "relu" else want)


CASES = [
    (S(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(16, 6, "fused", 1, "rc_ky_kx", W)),
    (S(1, 24, 7, 7, 32, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(16, 4, "fused", 1, "rc_ky_kx", W)),  # odd map
    (S(2, 8, 9, 6, 16, 3, 3, (1, 1), (2, 0, 1, 2)), cd.CpuConvKnobs(8, 5, "outer", 0, "rc_ky_kx", W)),   # pads, batch
    (S(1, 16, 10, 12, 24, 3, 3), cd.CpuConvKnobs(8, 3, "none", 1, "rc_ky_kx", W)),                      # no padding
    (S(1, 32, 5, 11, 32, 3, 3, (1, 1), (0, 1, 0, 1)), cd.CpuConvKnobs(32, 1, "fused", 0, "rc_ky_kx", W)),
    (S(3, 8, 4, 4, 8, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(8, 8, "fused", 1, "rc_ky_kx", W)),    # tile > tiles
    (S(1, 16, 3, 1, 16, 3, 3, (1, 1), (0, 1, 0, 1)), cd.CpuConvKnobs(16, 2, "fused", 1, "rc_ky_kx", W)),  # 1x1 map
    # parallel="rows": one row of tiles a task, its transforms in local buffers
    (S(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(16, 4, "rows", 1, "rc_ky_kx", W)),
    (S(1, 24, 7, 7, 32, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(16, 2, "rows", 1, "rc_ky_kx", W)),   # odd map
    (S(2, 8, 9, 6, 16, 3, 3, (1, 1), (2, 0, 1, 2)), cd.CpuConvKnobs(8, 3, "rows", 0, "rc_ky_kx", W)),    # pads, batch
    (S(1, 16, 1, 14, 16, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(8, 7, "rows", 1, "rc_ky_kx", W)),  # one row
    (S(3, 32, 12, 10, 16, 3, 3, (1, 1), (0, 0, 0, 0)), cd.CpuConvKnobs(16, 1, "rows", 1, "rc_ky_kx", W)),  # unpadded
]


@pytest.mark.parametrize("spec,knobs", CASES, ids=["8x8", "odd-7x7", "pads-batch2", "unpadded", "kb32-tile1",
                                                   "batch3-tile8", "1x1-map", "rows-8x8", "rows-odd-7x7",
                                                   "rows-pads-batch2", "rows-one-row", "rows-batch3-unpadded"])
def test_winograd_matches_numpy(spec, knobs):
    got, want = _run(spec, knobs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())


def test_winograd_large_parallel_and_plain_epilogues():
    """A map large enough to run parallel (ResNet-18's 28x28 shape, fewer channels), no bias/residual/act, staged
    and per tile row (the default here)."""
    spec = S(1, 32, 28, 28, 32, 3, 3, (1, 1), (1, 1, 1, 1))
    assert spec.macs >= cw.PARALLEL_MIN_MACS and cw.default_knobs(spec, 8).parallel == "rows"
    for bias, residual, act in ((False, False, None), (True, False, "relu")):
        for knobs in (cw.default_knobs(spec, 8), cd.CpuConvKnobs(16, 6, "fused", 1, "rc_ky_kx", W)):
            got, want = _run(spec, knobs, bias, residual, act)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())


def test_where_the_default_takes_winograd():
    """AVX2's choices (8 float32 lanes a vector; AVX-512's: the test below)."""
    # per tile row where the transformed weights (16 C K floats) fit 1 MB: a (KB, T) whose T divides a row's tiles
    assert cw.default_knobs(S(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1, 1, 1)), 8) == \
        cd.CpuConvKnobs(16, 4, "rows", 1, "rc_ky_kx", W)  # 28 tiles a row: 6 and 5 do not divide it
    assert cw.default_knobs(S(1, 128, 28, 28, 128, 3, 3, (1, 1), (1, 1, 1, 1)), 8) == \
        cd.CpuConvKnobs(8, 7, "rows", 1, "rc_ky_kx", W)  # 14 tiles a row
    # staged beyond: 256 -> 256 is 4 MB of transformed weights that each row's task would read again
    assert cw.default_knobs(S(1, 512, 7, 7, 512, 3, 3, (1, 1), (1, 1, 1, 1)), 8) == \
        cd.CpuConvKnobs(16, 4, "fused", 1, "rc_ky_kx", W)  # 16 tiles: 4 x 4
    assert cw.default_knobs(S(1, 256, 14, 14, 256, 3, 3, (1, 1), (1, 1, 1, 1)), 8).xt == 5  # 49 tiles: 10 x 5
    assert cw.default_rows_knobs(S(1, 64, 8, 26, 64, 3, 3, (1, 1), (1, 1, 1, 1)), 8) is None  # 13 tiles a row: prime
    assert cw.default_rows_knobs(S(1, 8, 8, 8, 12, 3, 3, (1, 1), (1, 1, 1, 1)), 8) is None  # 12 outputs: no KB of 8, 16
    assert cw.default_tile(49, 8) == 5 and cw.default_tile(3, 8) == 3
    assert cw.default_knobs(S(1, 16, 56, 56, 16, 3, 3, (1, 1), (1, 1, 1, 1)), 8) is None    # too few channels
    # 26 MB transformed at 112x112: too much for the staged schedule's last-level cache, per tile row it stays local
    assert cw.default_knobs(S(1, 64, 112, 112, 64, 3, 3, (1, 1), (1, 1, 1, 1)), 8).parallel == "rows"
    assert cw.default_knobs(S(1, 256, 112, 112, 256, 3, 3, (1, 1), (1, 1, 1, 1)), 8) is None  # and 4 MB of weights
    assert cw.default_knobs(S(1, 64, 56, 56, 64, 3, 3, (2, 2), (1, 1, 1, 1)), 8) is None    # stride 2
    assert cw.default_knobs(S(1, 64, 56, 56, 40, 3, 3, (1, 1), (1, 1, 1, 1)), 8) is None    # 40 channels: not 16s
    assert cw.default_knobs(S(1, 64, 56, 56, 64, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)), 8) is None  # dilated


def test_avx512_default_takes_two_zmm_blocks():
    """16 float32 lanes (AVX-512): 32-channel GEMM blocks and up to 8 tiles where the channels split into 32s,
    else AVX2's blocks; the same convs take Winograd as on AVX2."""
    conv = lambda c, hw, o=None: S(1, c, hw, hw, o or c, 3, 3, (1, 1), (1, 1, 1, 1))  # noqa: E731
    assert cw.default_knobs(conv(64, 56), 16) == cd.CpuConvKnobs(32, 7, "rows", 1, "rc_ky_kx", W)  # 28 tiles a row
    assert cw.default_knobs(conv(128, 28), 16) == cd.CpuConvKnobs(32, 7, "rows", 1, "rc_ky_kx", W)  # 14 tiles a row
    assert cw.default_knobs(conv(256, 14), 16) == cd.CpuConvKnobs(32, 7, "fused", 1, "rc_ky_kx", W)  # 49: 7 x 7
    assert cw.default_knobs(conv(512, 7), 16) == cd.CpuConvKnobs(32, 8, "fused", 1, "rc_ky_kx", W)  # 16: 2 x 8
    assert cw.default_knobs(conv(48, 56), 16) == cd.CpuConvKnobs(16, 4, "rows", 1, "rc_ky_kx", W)  # 48: no 32s
    assert cw.default_tile(49, 16) == 7 and cw.default_tile(16, 16) == 8 and cw.default_tile(3, 16) == 3
    assert cw.default_tile(196, 16) == 7 and cw.default_tile(64, 16) == 8 and cw.default_tile(16, 8) == 4
    for spec in (conv(16, 56), conv(64, 56, 40), S(1, 64, 56, 56, 64, 3, 3, (2, 2), (1, 1, 1, 1))):
        assert cw.default_knobs(spec, 16) is None and cw.default_knobs(spec, 8) is None
    for lanes in (8, 16):  # the default's kernel computes the conv (a 7x7 map: 16 tiles, T 8 on AVX-512)
        for spec in (conv(32, 14, 64), conv(64, 7)):
            got, want = _run(spec, cw.default_knobs(spec, lanes), True, True, "relu")
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())


@pytest.mark.parametrize("spec,knobs,msg", [
    (S(1, 16, 8, 8, 16, 5, 5), cd.CpuConvKnobs(16, 6, algo=W), "3x3 convs"),
    (S(1, 16, 8, 8, 16, 3, 3, (2, 2)), cd.CpuConvKnobs(16, 6, algo=W), "unit stride"),
    (S(1, 16, 8, 8, 16, 3, 3, groups=2), cd.CpuConvKnobs(8, 6, algo=W), "one group"),
    (S(1, 16, 8, 8, 24, 3, 3), cd.CpuConvKnobs(16, 6, algo=W), "must divide the 24"),
    (S(1, 16, 8, 8, 16, 3, 3), cd.CpuConvKnobs(16, 6, unroll=2, algo=W), "allows 0, 1"),
    (S(1, 16, 8, 8, 16, 3, 3), cd.CpuConvKnobs(16, 6, order="ky_kx_rc", algo=W), "channels only"),
    (S(1, 16, 8, 8, 16, 3, 3), cd.CpuConvKnobs(16, 6, algo="fft"), "allowed: ('direct', 'winograd', 'pixels')"),
    (S(1, 16, 8, 8, 16, 3, 3), cd.CpuConvKnobs(16, 6, "rows"), "parallel='rows' is the Winograd conv's"),
    (S(1, 16, 8, 8, 16, 3, 3), cd.CpuConvKnobs(16, 6, "sideways", algo=W), "allowed: ('none', 'outer', 'fused', 'rows')"),
])
def test_bad_winograd_knobs_are_refused(spec, knobs, msg):
    with pytest.raises(te.TeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        knobs.check(spec)


@pytest.mark.parametrize("spec,knobs,msg", [
    (S(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(16, 3, "rows", algo=W),
     "needs xt .* to divide the 4 tiles of a row, got xt=3"),
    (S(1, 512, 8, 200, 512, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(16, 4, "rows", algo=W),
     "6553600 bytes for 512 -> 512 channels and 100 tiles a row; at most 524288"),
])
def test_bad_row_knobs_are_refused_by_the_winograd_conv(spec, knobs, msg):
    """``parallel="rows"``: a register tile must not straddle two rows, and the row's local buffers (on the task's
    stack) are bounded."""
    knobs.check(spec)  # valid knobs as such: the refusal depends on the map
    with pytest.raises(te.TeError, match=msg):
        cw.check_knobs(spec, knobs)
    with pytest.raises(te.TeError, match=msg):
        cw.op_for(spec, knobs)


def test_winograd_op_refuses_other_convs_as_the_knobs_do():
    spec = S(1, 16, 8, 8, 16, 3, 3, (2, 2))
    with pytest.raises(te.TeError, match=r"conv2d_winograd: takes float32 3x3 convs .* stride \(2, 2\)"):
        cw.conv2d(spec, 16, 6)
    with pytest.raises(te.TeError, match=r"algo='winograd' takes float32 3x3 convs .* stride \(2, 2\)"):
        cd.CpuConvKnobs(16, 6, algo=W).check(spec)


def test_schedules_refuse_the_other_algorithm():
    spec = S(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1))
    op = cd.conv2d(spec)
    with pytest.raises(te.TeError, match="algo='direct'"):
        cd.schedule_cpu(op, create_schedule(op.out), cd.CpuConvKnobs(16, 6, algo=W))
    wop = cw.conv2d(spec, 16, 6)
    with pytest.raises(te.TeError, match="do not match"):
        cw.schedule_cpu(wop, create_schedule(wop.out), cd.CpuConvKnobs(16, 4, algo=W))


def test_tuner_space_covers_winograd_for_3x3_unit_stride_only():
    from compiler.autotune.llvm_conv import CpuConvSpace, LlvmConvTask

    t = LlvmConvTask(S(1, 64, 14, 14, 64, 3, 3, (1, 1), (1, 1, 1, 1)), bias=True, act="relu")
    sp = t.make_space()
    algos = {sp.knobs(p).algo for p in sp.candidates()}
    assert algos == {"direct", "winograd"}
    assert t.default_knobs().algo == W
    assert "same program" in sp.reject(cd.CpuConvKnobs(16, 6, "fused", 1, "ky_kx_rc", W))
    small = CpuConvSpace(LlvmConvTask(S(1, 16, 4, 4, 16, 3, 3, (1, 1), (1, 1, 1, 1))))  # 4 tiles of 2x2
    assert "exceeds" in small.reject(cd.CpuConvKnobs(16, 5, "fused", 1, "rc_ky_kx", W))
    assert small.reject(cd.CpuConvKnobs(16, 4, "fused", 1, "rc_ky_kx", W)) is None
    wino = [p for p in sp.candidates() if sp.knobs(p).algo == W]
    # ob 8/16/32 x unroll 0/1 x (xt 1..8 (49 tiles) x none/outer/fused + xt 1 and 7 (dividing a row's 7 tiles) x rows)
    assert len(wino) == 3 * 2 * (8 * 3 + 2)
    rows = {(sp.knobs(p).ob, sp.knobs(p).xt) for p in wino if sp.knobs(p).parallel == "rows"}
    assert {xt for _, xt in rows} == {1, 7}
    assert "divide the 7 tiles" in sp.reject(cd.CpuConvKnobs(16, 4, "rows", 1, "rc_ky_kx", W))
    assert "Winograd conv's" in sp.reject(cd.CpuConvKnobs(16, 4, "rows", 1, "rc_ky_kx"))
    assert sp.features(sp.knobs(wino[0])).shape == sp.features(t.default_knobs()).shape
    strided = CpuConvSpace(LlvmConvTask(S(1, 64, 14, 14, 64, 3, 3, (2, 2), (1, 1, 1, 1))))
    assert {strided.knobs(p).algo for p in strided.candidates()} == {"direct"}
    # a measured Winograd setting is the kernel its knobs describe: same result as the default's
    k = cd.CpuConvKnobs(8, 3, "outer", 0, "rc_ky_kx", W)
    outs = []
    for knobs in (k, t.default_knobs(), cd.default_cpu_knobs(t.spec)):
        fn, args = t.kernel(knobs), t.inputs(knobs)
        outs.append(np.asarray(fn(*args)).reshape(1, 64, 14, 14))
    np.testing.assert_allclose(outs[0], outs[2], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(outs[1], outs[2], rtol=1e-5, atol=1e-4)


def test_a_model_built_for_llvm_takes_winograd_where_the_default_says():
    """An ONNX model: a 3x3 conv with enough channels (Winograd), then a strided one (direct); against ORT."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    import compiler

    w1 = (RNG.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    b1 = RNG.standard_normal(32).astype(np.float32)
    w2 = (RNG.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 6, 6])],
                          [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.ir_version = 8
    x = RNG.standard_normal((1, 32, 12, 12)).astype(np.float32)
    mod = compiler.build(model, target="llvm", progress=False)
    got = mod.run({"x": x})[0]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    kinds = sorted(plan.key[0] for plan, _ in mod.cpu._plans.values() if plan.key[0].startswith("conv2d"))
    assert kinds == ["conv2d", "conv2d_winograd"]
