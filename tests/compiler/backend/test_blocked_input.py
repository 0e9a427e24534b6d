"""The CPU conv schedule's channel-blocked padded input (``Conv2dSpec.in_block``: flat float32 tiles reading an
``(N, C/8, H, W, 8)`` copy; unpadded strided 1x1 convs: only the pixels they read) against numpy: padding, ragged
flat tiles, batches, dilation, the strided 1x1 subsample, every knob; which specs take it; refusals. Per x86-64
feature level (conftest)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from compiler import te
from compiler.backend.build import build_op
from compiler.schedule import create_schedule
from compiler.topi import conv2d_direct as cd

RNG = np.random.default_rng(5)
S = cd.Conv2dSpec


def _check(spec: cd.Conv2dSpec, knobs: cd.CpuConvKnobs | None = None, residual: bool = True,
           in_block: int | None = 8) -> None:
    """Build ``spec`` (``knobs.apply``-ed when given) with bias, residual and relu; compare with numpy (``in_block``:
    the channel block the spec must take, None: any)."""
    sp = knobs.apply(spec) if knobs is not None else cd.with_in_block(spec)
    assert in_block is None or sp.in_block == in_block
    x = RNG.standard_normal((sp.n, sp.c, sp.h, sp.w)).astype(np.float32)
    w = RNG.standard_normal((sp.o, sp.c, sp.kh, sp.kw)).astype(np.float32)
    b = RNG.standard_normal(sp.o).astype(np.float32)
    r = RNG.standard_normal((sp.n, sp.o, sp.oh, sp.ow)).astype(np.float32)
    op = cd.conv2d(sp, bias=True, residual=residual, act="relu")
    s = create_schedule(op.out)
    cd.schedule_cpu(op, s, knobs)
    fn = build_op(s, args=op.inputs + [op.out])
    args = [x, cd.pack_weight(sp, w), b] + ([r.reshape(cd.output_shape(sp))] if residual else [])
    got = np.asarray(fn(*args)).reshape(r.shape)
    want = conv2d_nchw(x, w, stride=sp.stride, pads=sp.pads, dilations=sp.dilations)
    want = np.maximum(want + b.reshape(1, -1, 1, 1) + (r if residual else 0), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


CASES = [
    S(1, 16, 9, 9, 16, 3, 3, (1, 1), (1, 1, 1, 1)),             # 81 pixels: 13 tiles of 6 + a ragged 3
    S(2, 8, 6, 7, 32, 3, 3, (1, 1), (1, 1, 1, 1)),              # batch 2, one input block, 2 output blocks
    S(1, 24, 8, 10, 16, 3, 3, (1, 1), (2, 0, 1, 2), (2, 1)),    # odd pads, dilation (2, 1), 3 input blocks
    S(1, 16, 11, 13, 16, 1, 1, (2, 2)),                         # strided 1x1: the 6x7 subsample, ragged rows
    S(2, 8, 9, 8, 16, 1, 1, (3, 2)),                            # strides (3, 2), batch 2
    S(1, 8, 20, 19, 32, 3, 3, (1, 1), (1, 1, 1, 1)),            # pixel tiles outside the channel blocks
    S(2, 8, 12, 10, 16, 3, 3, (1, 1), (1, 1, 1, 1)),            # the same with a batch of 2
]


@pytest.mark.parametrize("spec", CASES, ids=["ragged", "batch2", "pads-dilation", "1x1-stride2",
                                             "1x1-stride32",
                                             "pixels-outer", "pixels-outer-batch2"])
def test_blocked_input_matches_numpy(spec):
    _check(spec)


@pytest.mark.parametrize("knobs", [cd.CpuConvKnobs(16, 6, "none", 0, "rc_ky_kx"),
                                   cd.CpuConvKnobs(16, 4, "outer", 1, "ky_kx_rc"),
                                   cd.CpuConvKnobs(16, 5, "fused", 2, "rc_ky_kx"),
                                   cd.CpuConvKnobs(32, 3, "fused", 2, "ky_kx_rc")],
                         ids=["none-u0", "outer-kykxrc", "fused-u2", "ob32-u2"])
@pytest.mark.parametrize("spec", [S(1, 16, 10, 9, 32, 3, 3, (1, 1), (1, 1, 1, 1)),
                                  S(1, 8, 20, 19, 32, 3, 3, (1, 1), (1, 1, 1, 1))], ids=["blocks-outer", "pixels-outer"])
def test_blocked_input_under_every_knob(knobs, spec):
    _check(spec, knobs, residual=False)


def test_flat_tiles_of_five_where_they_run_fewer_slots():
    """6-pixel tiles, or 5 where ceil(P/5) * 6 < ceil(P/6) * 7 (small maps: 7x7 takes 10 tiles of 5, not 9 of 6)."""
    assert [cd.flat_tile(p) for p in (1, 4, 6, 7, 25, 36, 49, 81, 196, 784, 3136)] == [1, 4, 6, 5, 5, 6, 5, 6, 6, 6, 6]
    assert cd.Conv2dSpec(1, 512, 7, 7, 512, 3, 3, (1, 1), (1, 1, 1, 1)).tile == 5
    assert cd.Conv2dSpec(1, 256, 14, 14, 512, 3, 3, (2, 2), (1, 1, 1, 1)).tile == 5  # a stride-2 conv to 7x7
    assert cd.Conv2dSpec(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1, 1, 1)).tile == 6
    assert cd.default_cpu_knobs(cd.Conv2dSpec(1, 960, 7, 7, 320, 1, 1)).xt == 5


def test_avx512_flat_convs_take_two_zmm_blocks():
    """16 float32 lanes: flat convs whose output channels split into 32s take 32-channel blocks (two zmm vectors)
    and 8..6-pixel tiles by the slot count; AVX2 keeps 16 x 6/5; others as they were. Both compute the conv."""
    assert [cd.flat_tile(p, 16) for p in (1, 6, 7, 49, 196, 784, 3136)] == [1, 6, 7, 7, 7, 8, 8]
    strided = S(1, 64, 56, 56, 128, 3, 3, (2, 2), (1, 1, 1, 1))
    wide = cd.cpu_spec(strided, 16)
    assert (wide.block, wide.tile, wide.in_block, wide.flat) == (32, 8, 0, True)
    assert cd.default_cpu_knobs(wide) == cd.CpuConvKnobs(32, 8, "fused", 1, "rc_ky_kx")
    assert (cd.cpu_spec(strided, 8).block, cd.cpu_spec(strided, 8).tile) == (16, 6)
    seven = cd.cpu_spec(S(1, 512, 7, 7, 512, 3, 3, (1, 1), (1, 1, 1, 1)), 16)
    assert (seven.block, seven.tile, seven.in_block) == (32, 7, 8)
    assert cd.cpu_spec(S(1, 64, 14, 14, 48, 1, 1), 16).block == 16              # 48 channels: no 32s
    assert cd.cpu_spec(S(1, 64, 14, 14, 64, 3, 3, groups=2), 16).block == 16    # grouped: not flat, as before
    assert cd.cpu_spec(S(1, 64, 32, 32, 64, 1, 1), 16).pixel_vectors            # 1x1 with pixel vectors: as before
    for spec in (S(1, 16, 9, 9, 32, 3, 3, (1, 1), (1, 1, 1, 1)), S(1, 8, 13, 11, 64, 3, 3, (2, 2), (1, 1, 1, 1)),
                 S(2, 16, 7, 7, 32, 1, 1, (2, 2)), S(1, 3, 37, 33, 64, 7, 7, (2, 2), (3, 3, 3, 3))):  # (a 7x7/2 stem)
        sp = cd.cpu_spec(spec, 16)
        assert sp.block == 32
        _check(sp, in_block=None)


def test_pixel_tiles_outer_where_the_weights_are_smaller():
    assert cd.pixels_outer(cd.cpu_spec(S(1, 8, 20, 19, 32, 3, 3, (1, 1), (1, 1, 1, 1)), 8))
    assert cd.pixels_outer(cd.cpu_spec(S(2, 8, 12, 10, 16, 3, 3, (1, 1), (1, 1, 1, 1)), 8))
    assert cd.pixels_outer(cd.cpu_spec(S(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1, 1, 1)), 8))      # 147 KB vs 876 KB
    assert not cd.pixels_outer(cd.cpu_spec(S(1, 16, 10, 9, 32, 3, 3, (1, 1), (1, 1, 1, 1)), 8))
    assert not cd.pixels_outer(cd.cpu_spec(S(1, 128, 28, 28, 128, 3, 3, (1, 1), (1, 1, 1, 1)), 8))  # 590 vs 460 KB
    assert not cd.pixels_outer(cd.cpu_spec(S(1, 256, 56, 56, 256, 3, 3, (1, 1), (1, 1, 1, 1)), 8))  # > 256 KB


def test_which_specs_take_a_blocked_input():
    ok = S(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1, 1, 1))
    assert cd.cpu_spec(ok, 8).in_block == 8 and cd.default_cpu_knobs(ok).apply(ok).in_block == 8
    assert cd.cpu_spec(S(1, 64, 56, 56, 128, 1, 1, (2, 2)), 8).in_block == 8       # strided 1x1: the subsample
    assert cd.cpu_spec(S(1, 64, 56, 56, 128, 3, 3, (2, 2), (1, 1, 1, 1)), 8).in_block == 0  # strided 3x3
    assert cd.cpu_spec(S(1, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3, 3, 3)), 8).in_block == 0  # 3-channel stem
    assert cd.cpu_spec(S(1, 12, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1)), 8).in_block == 0     # 12 % 8 channels
    assert cd.cpu_spec(S(1, 16, 8, 8, 16, 3, 3, groups=2), 8).in_block == 0                 # grouped
    assert cd.cpu_spec(S(1, 16, 8, 8, 24, 3, 3), 8).in_block == 0                           # 8-channel blocks
    assert cd.cpu_spec(dataclasses.replace(ok, dtype="int8"), 8).in_block == 0
    assert cd.CpuConvKnobs(8, 4).apply(ok).in_block == 0                                   # not flat
    one = S(1, 16, 7, 7, 16, 1, 1, (1, 1))  # unpadded 1x1, unit stride: its NCHW input is the flat layout
    assert cd.cpu_spec(one, 8).in_block == 0 and cd.cpu_spec(one, 16).in_block == 0
    assert cd.CpuConvKnobs(16, 5, "fused").apply(one).in_block == 0
    assert cd.cpu_spec(S(1, 16, 7, 7, 16, 1, 1, (1, 1), (1, 1, 1, 1)), 8).in_block == 8   # padded 1x1: the copy


def test_unit_stride_pointwise_reads_its_input_plain():
    """An unpadded 1x1 conv with unit stride (4 flat tiles of 14 on a 7x7 map, a ragged last one) reads its input
    NCHW (the plain copy's zero row under the ragged tile), not channel-blocked; the conv is numpy's."""
    spec = S(1, 16, 7, 7, 16, 1, 1, (1, 1), pixel_tile=14, oc_block=16)
    op = cd.conv2d(cd.with_in_block(spec))
    assert op.pad.shape == (1, 16, 8, 7)
    _check(spec, in_block=0)
    _check(S(2, 24, 5, 6, 32, 1, 1, (1, 1)), cd.CpuConvKnobs(32, 7, "fused", 1, "ky_kx_rc"), in_block=0)


def test_blocked_input_refusals():
    with pytest.raises(te.TeError, match="in_block=8 needs a float32 flat conv"):
        cd.conv2d(S(1, 12, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1), in_block=8))
    with pytest.raises(te.TeError, match="in_block=8 needs"):
        S(1, 16, 8, 8, 16, 3, 3, (2, 2), (1, 1, 1, 1), in_block=8).check()
    spec = S(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1), in_block=8)
    with pytest.raises(te.TeError, match="in_block is a float32 layout"):
        cd.conv2d(spec, stage=([], lambda acc, ch: acc, "float32"))


def test_tuning_records_do_not_name_the_blocked_input():
    """The llvm tuner's task identity stays what logs recorded before ``in_block`` existed (apply chooses it)."""
    from compiler.autotune.llvm_conv import LlvmConvTask

    task = LlvmConvTask(S(1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1, 1, 1)), True, False, "relu", (), "conv")
    assert "in_block" not in task.ident["spec"] and "in_block" not in task.key
    assert cd.CpuConvKnobs(16, 6, "fused").apply(task.spec).in_block == 8


@pytest.mark.parametrize("lanes,step,dtype,width", [(8, 1, "float32", 19), (8, 2, "float32", 12), (4, 3, "int32", 9),
                                                     (16, 1, "float32", 35), (8, 1, "int32", 8)])
def test_blocked_copy_transposes_in_registers(lanes, step, dtype, width):
    """The blocked copy's shape (columns unrolled by ``lanes`` around ``lanes`` channels vectorized, a ragged last
    group, a padded border, input columns ``step`` apart): each ``lanes`` x ``lanes`` block is read as row windows
    and transposed with shuffles (no element loaded on its own), and the copy is exact."""
    c, rows, w_in = 2 * lanes, 3, (width - 2) * step + 1
    x = te.placeholder((c, rows, w_in), dtype, "x")
    zero = te.const(0, dtype) if dtype == "int32" else te.const(0.0, "float32")
    y = te.compute((c // lanes, rows, width, lanes), lambda j, r, q, ci: te.select(
        (q >= 1) & (q < width - 1), x[j * lanes + ci, r, (q - 1) * step], zero), name="y", dtype=dtype)
    s = create_schedule(y)
    q, ci = s[y].leaf_iter_vars[-2:]
    qo, qi = s[y].split(q, lanes)
    s[y].reorder(qo, qi, ci)
    s[y].unroll(qi)
    s[y].vectorize(ci)
    fn = build_op(s, args=[x, y])
    scalar = "i32" if dtype == "int32" else "float"
    assert f"load {scalar}," not in fn.llvm_ir and "shufflevector" in fn.llvm_ir
    xv = (RNG.standard_normal((c, rows, w_in)) * 100).astype(dtype)
    want = np.zeros((c // lanes, rows, width, lanes), dtype)
    want[:, :, 1:width - 1, :] = xv[:, :, ::step][:, :, :width - 2].reshape(c // lanes, lanes, rows, width - 2) \
        .transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(np.asarray(fn(xv)), want)
