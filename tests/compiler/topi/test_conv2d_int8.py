"""The llvm target's int8 convs on the packed layout (compiler.topi.conv2d_int8): bit-exact with the ``ref`` backend
(numpy) for ragged maps, strides, padding values, 1x1 layers read in place, depthwise and both requant forms; the
codegen's int16 pair product (pmaddwd / vpdpwssd) and u8 x s8 quad product (vpdpbusd; pmaddwd without VNNI) per
feature level, the quads' layout and bias offset; the per-tensor requant form vs numpy."""
import dataclasses
import re

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.backend.llvm.host import missing_features, use_cpu
from compiler.backend.plans.accel import TargetAccelBackend
from compiler.graph.ref_backend import RefAccelBackend
from compiler.schedule import create_schedule
from compiler.topi import conv2d_int8, requant_int
from compiler.topi.conv2d_direct import Conv2dSpec
from isa import make_config
from jit_runtime.host_ops.layout import pack_activation, pack_weight
from jit_runtime.host_ops.requant import Requant, apply_requant

CFG = make_config()


def _requant(rng, o: int, uniform: bool, zp: int, relu: bool) -> Requant:
    lo = zp if relu else -128
    if uniform:  # per-tensor scale, shift >= 33: the int32 high-word form
        return Requant(0, np.full(o, int(rng.integers(1 << 30, 1 << 31))), np.full(o, 38), relu, lo, 127, zero_point=zp)
    return Requant(0, rng.integers(1 << 20, 1 << 22, o), rng.integers(18, 26, o), relu, lo, 127, zero_point=zp)


def _check(c, h, w, o, k, stride, pad, groups=1, pad_value=0, uniform=False, zp=0, relu=False, seed=0, packed=True,
           n=1, quads=None):
    """The target backend's conv (``quads``: forced on or off; None: where the CPU has VNNI) vs the ref backend."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, c, h, w), dtype=np.int8)
    if groups > 1:  # depthwise: the accelerator's packing puts each channel's taps in input column 0 of its block
        wt = np.zeros((o, CFG.block_in, k, k), np.int8)
        wt[:, 0] = rng.integers(-128, 128, (o, k, k))
    else:
        wt = rng.integers(-128, 128, (o, c, k, k), dtype=np.int8)
    bias = rng.integers(-(1 << 16), 1 << 16, o)
    rq = _requant(rng, o, uniform, zp, relu)
    xp, wp = pack_activation(x, CFG.batch, CFG.block_in), pack_weight(wt, CFG.block_out, CFG.block_in)
    kw = dict(stride=(stride, stride), padding=pad, groups=groups, requant=rq, pad_value=pad_value)
    want = RefAccelBackend(CFG).conv2d(xp, wp, bias, **kw)
    tb = TargetAccelBackend(CFG)
    tb.int8_quads = quads
    got = tb.conv2d(xp, wp, bias, **kw)
    assert got.shape == want.shape and got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(tb.conv2d(xp, wp, bias, **kw), want)  # the prepared second call
    spec = tb._conv_spec(xp.shape, wp.shape, (stride, stride), pad, groups, pad_value)
    ps = tb._packed_spec(spec, rq)
    assert (ps is not None) == packed
    if packed and quads is not None:
        assert ps.quads == (quads and groups == 1)


@pytest.mark.parametrize("c,h,w,o,k,stride,pad,pad_value", [
    (16, 5, 7, 16, 3, 1, (1, 1, 1, 1), -3),     # ragged last tile (35 pixels), zero-point border
    (32, 9, 9, 32, 3, 2, (1, 1, 1, 1), 7),      # stride 2: phase-split columns
    (16, 11, 6, 48, 3, 2, (0, 1, 2, 0), 0),     # asymmetric pads, odd rows
    (48, 7, 7, 32, 1, 1, (0, 0, 0, 0), 0),      # 1x1, 49 pixels: no tile of 3..6 divides them, so via pad
    (16, 6, 6, 32, 1, 1, (0, 0, 0, 0), 0),      # 1x1 read in place, tiles of 6
    (32, 6, 6, 32, 1, 1, (0, 0, 0, 0), 0),      # 1x1 with 32 channels: via the int16 copy (whole: 6 tiles)
    (32, 16, 16, 48, 1, 1, (0, 0, 0, 0), 0),    # 1x1, 64 tiles of 4: the copy per block of 8 tiles (panel_tiles)
    (48, 12, 14, 32, 1, 1, (0, 0, 0, 0), 0),    # 1x1, 28 tiles of 6: blocks of 2
    (16, 9, 8, 16, 1, 2, (0, 0, 0, 0), 0),      # 1x1 stride 2
    (16, 8, 8, 32, 5, 1, (2, 2, 2, 2), -128),   # 5x5
    (3, 13, 11, 16, 7, 2, (3, 3, 3, 3), -128),  # a 3-channel stem: 2 of the block's 8 channel pairs reduced
    (5, 8, 8, 32, 3, 1, (1, 1, 1, 1), 9),       # 5 channels: 3 pairs (2 quads)
])
@pytest.mark.parametrize("quads", [False, True])
def test_packed_conv_matches_ref(c, h, w, o, k, stride, pad, pad_value, quads):
    """Both reductions on any host: quads run as ``vpdpbusd`` where the CPU has VNNI, else as ``pmaddwd`` pairs of
    the zero-extended copy (the same values)."""
    _check(c, h, w, o, k, stride, pad, pad_value=pad_value, quads=quads)


@pytest.mark.parametrize("uniform,zp,relu", [(False, 3, False), (True, -128, False), (True, -20, True),
                                             (True, 5, True)])
def test_packed_conv_requant_forms(uniform, zp, relu):
    _check(32, 6, 10, 32, 3, 1, (1, 1, 1, 1), uniform=uniform, zp=zp, relu=relu, seed=3, quads=False)
    _check(32, 6, 10, 32, 3, 1, (1, 1, 1, 1), uniform=uniform, zp=zp, relu=relu, seed=3, quads=True)


@pytest.mark.parametrize("c,h,stride,pad_value,uniform", [(32, 9, 1, 5, False), (48, 10, 2, 0, True),
                                                          (16, 7, 2, -2, True), (32, 7, 1, -128, True),
                                                          (16, 13, 2, 3, False)])
def test_packed_depthwise_matches_ref(c, h, stride, pad_value, uniform):
    """Row tiles: 7 columns (a ragged 4 + 3 tile pair), 5 and 9 columns."""
    _check(c, h, h, c, 3, stride, (1, 1, 1, 1), groups=c, pad_value=pad_value, uniform=uniform, seed=5)


def test_packed_depthwise_5x5_asymmetric_pads_matches_ref():
    _check(16, 11, 8, 16, 5, 2, (2, 1, 0, 2), groups=16, pad_value=-1, seed=6)


@pytest.mark.parametrize("k,stride,pad", [(2, 1, (0, 0, 1, 1)), (2, 2, (1, 0, 0, 1)), (4, 1, (1, 2, 2, 1)),
                                           (4, 2, (2, 1, 1, 2)), (1, 1, (0, 0, 0, 0)), (7, 2, (3, 3, 3, 3))])
def test_packed_depthwise_even_and_odd_kernels_match_ref(k, stride, pad):
    """Depthwise kernels of 1 to 7 taps a row, strides 1 and 2, asymmetric pads."""
    _check(32, 9, 11, 32, k, stride, pad, groups=32, pad_value=-7, seed=11 + k)


@pytest.mark.parametrize("ow,tile", [(112, 4), (56, 4), (14, 4), (7, 4), (5, 3), (2, 2), (1, 1)])
def test_depthwise_row_tile(ow, tile):
    """Fewest tiles x (pixels + 2) over 1..4 pixels (AVX2: 8 accumulator vectors), the last ragged."""
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(1, 16, 3, ow, 16, 3, 3, (1, 1), (1, 1, 1, 1), groups=16,
                                                 dtype="int8"), 1, 16, 16)
    assert spec.tile(256) == tile


@pytest.mark.parametrize("k,stride,groups", [(3, 1, 1), (1, 1, 1), (3, 2, 32)])
def test_packed_conv_two_images(k, stride, groups):
    for quads in (False, True):
        _check(32, 7, 6, 32, k, stride, (k // 2,) * 4, groups=groups, n=2, seed=21, quads=quads)


def test_packed_1x1_per_block_copy_two_images():
    """Two images through the per-block int16 copy (256 pixels: 64 tiles of 4 in 8 blocks, per image)."""
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(2, 32, 16, 16, 32, 1, 1, dtype="int8"), 1, 16, 16)
    assert spec.panel_tiles(256) == 8
    _check(32, 16, 16, 32, 1, 1, (0, 0, 0, 0), n=2, seed=22)


def test_grouped_conv_falls_back_to_the_unpacked_kernel():
    _check(32, 6, 6, 32, 3, 1, (1, 1, 1, 1), groups=2, packed=False)


@pytest.mark.parametrize("k,groups", [(1, 1), (3, 1), (3, 40)])
def test_block_padding_channels_keep_the_per_tensor_form(k, groups):
    """24 (depthwise: 40) real output channels padded to 32 (48): the padding channels (zero weights and bias,
    multiplier 0) take the per-tensor scale, so the int32 form applies; bit-exact with ref (their zero point)."""
    from compiler.backend.plans.accel import fill_idle_channels
    from compiler.graph.accel_interface import pad_requant

    c, o = (40, 40) if groups > 1 else (48, 24)
    _check(c, 6, 7, o, k, 1, (k // 2,) * 4, groups=groups, uniform=True, zp=-6, relu=True, seed=8)
    rq = pad_requant(Requant(0, np.full(24, 1 << 30), np.full(24, 40), zero_point=3), 32)
    assert requant_int.uniform_scale(rq) is None
    w = np.zeros((32, 16, 1, 1), np.int8)
    w[:24] = 1
    filled = fill_idle_channels(rq, w, np.r_[np.arange(24), np.zeros(8, int)])
    assert requant_int.uniform_scale(filled) == (1 << 30, 40)
    w[30, 3] = 1  # a padding channel with a weight is not idle
    assert requant_int.uniform_scale(fill_idle_channels(rq, w, None)) is None


@pytest.mark.parametrize("c,hw,direct,flat", [(16, 6, True, True), (16, 7, False, False), (32, 6, False, True)])
def test_which_1x1_convs_read_their_input_in_place(c, hw, direct, flat):
    """In place: up to DIRECT_MAX_CHANNELS (16) input channels and a pixel count that a tile of 3..6 divides (49 has
    none); wider layers take the int16 copy, over flattened pixels where such a tile divides them."""
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(1, c, hw, hw, 32, 1, 1, dtype="int8"), 1, 16, 16)
    assert spec.direct is direct and spec.pointwise is flat
    assert (spec.data_shape[2:4] == (hw * hw, 1)) is flat


@pytest.mark.parametrize("c,hw,tiles", [(144, 56, 28), (32, 56, 98), (32, 112, 112), (96, 14, 0), (16, 56, 0),
                                        (64, 7, 0)])
def test_1x1_copy_blocks_fit_l1_and_leave_parallel_chunks(c, hw, tiles):
    """Pixel tiles (AVX2: 4 or 6 pixels) per block of the int16 copy: the most dividing the tile count with C x
    pixels x 2 bytes <= 32 KB and >= 8 blocks; 0 (one whole copy) where that is under 2 tiles, none for in-place
    layers (16 channels) and maps no tile divides (49 pixels). 56x56: 784 tiles of 4 (144 ch: 56 fit -> 28; 32 ch:
    128 fit, 98 blocks at most -> 98); 112x112: 3136 tiles, 128 fit -> 112; 14x14: 49 tiles, 6 at most -> 1."""
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(1, c, hw, hw, 32, 1, 1, dtype="int8"), 1, 16, 16)
    assert spec.panel_tiles(256) == tiles


def test_zero_weight_channels_are_skipped():
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(1, 16, 6, 6, 16, 3, 3, dtype="int8"), 1, 16, 16)
    w = np.zeros((16, 16, 3, 3), np.int8)
    w[3, 4, 1, 1] = 1  # channel 4 is the last with a weight: pairs (0,1) (2,3) (4,5)
    assert conv2d_int8.used_pairs(spec, w) == 3
    w[0, 15, 0, 0] = -1
    assert conv2d_int8.used_pairs(spec, w) == 0  # all 8 pairs: the plain kernel
    with pytest.raises(te.TeError, match="pairs=9"):
        conv2d_int8.PackedConvSpec(spec.conv, 1, 16, 16, pairs=9).check()


def test_spec_errors_say_what_is_allowed():
    spec = Conv2dSpec(1, 32, 6, 6, 32, 3, 3, dilations=(2, 2), dtype="int8")
    with pytest.raises(te.TeError, match="only \\(1, 1\\)"):
        conv2d_int8.PackedConvSpec(spec, 1, 16, 16).check()
    with pytest.raises(te.TeError, match="multiple of 16"):
        conv2d_int8.PackedConvSpec(Conv2dSpec(1, 16, 6, 6, 8, 3, 3, dtype="int8"), 1, 16, 8).check()
    dw = Conv2dSpec(1, 16, 6, 6, 16, 3, 3, groups=16, dtype="int8")
    with pytest.raises(te.TeError, match="quads need .*no depthwise conv"):
        conv2d_int8.PackedConvSpec(dw, 1, 16, 16, quads=True).check()


def test_quad_weights_and_bias_offset():
    """Quads: weights ``(O/16, C/BI, KH, KW, BI/4, 16, 4)`` int8 in the reduction's order (checked element by
    element), and the per-channel offset ``128 * sum(w)`` the copy's ``x + 128`` adds (hand-computed case)."""
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(1, 32, 6, 6, 32, 3, 3, dtype="int8"), 1, 16, 16, quads=True)
    w = np.random.default_rng(9).integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    wp = conv2d_int8.pack_weight_pairs(spec, w)
    assert wp.shape == (2, 2, 3, 3, 4, 16, 4) and wp.dtype == np.int8
    for oo, cb, ky, kx, rj, oi, k in [(0, 0, 0, 0, 0, 0, 0), (1, 1, 2, 1, 3, 15, 3), (1, 0, 1, 2, 2, 7, 1)]:
        assert wp[oo, cb, ky, kx, rj, oi, k] == w[oo * 16 + oi, cb * 16 + rj * 4 + k, ky, kx]
    ones = np.ones((32, 32, 3, 3), np.int8)
    ones[5] = -2
    off = conv2d_int8.u8_offset(spec, ones)
    assert off[0] == 128 * 32 * 9 and off[5] == -2 * 128 * 32 * 9
    assert not conv2d_int8.u8_offset(dataclasses.replace(spec, quads=False), ones).any()


def _pair_dot_op(dtype_a: str, lanes: int = 16):
    """``y[i, j] = int32(a[i, 0]) * int32(b[j, 0]) + int32(a[i, 1]) * int32(b[j, 1])``, j vectorized."""
    a = te.placeholder((4, 2), dtype_a, "a")
    b = te.placeholder((lanes, 2), "int16", "b")
    y = te.compute((4, lanes), lambda i, j: a[i, 0].astype("int32") * b[j, 0].astype("int32")
                   + a[i, 1].astype("int32") * b[j, 1].astype("int32"), name="y", dtype="int32")
    s = create_schedule(y)
    s[y].vectorize(s[y].leaf_iter_vars[1])
    return s, [a, b, y]


@pytest.mark.parametrize("level,features,insn", [("x86-64-v2", "", "pmaddwd\t"), ("x86-64-v3", "", "vpmaddwd\t"),
                                                 ("x86-64-v3", "+avxvnni", "vpdpwssd"), ("x86-64-v4", "", "vpmaddwd\t"),
                                                 ("x86-64-v4", "+avx512vnni", "vpdpwssd")])
def test_pair_products_use_the_levels_dot_instruction(level, features, insn):
    """Extremes included: (-128)(-128) * 2 = 32768 (pmaddubsw would saturate) and (-32768)^2 * 2 wraps like int32."""
    a = np.array([[-128, -128], [127, -128], [0, 5], [-128, 127]], np.int8)
    b = np.full((16, 2), -128, np.int16)
    b[1:] = np.random.default_rng(1).integers(-32768, 32768, (15, 2))
    want = (a[:, None, :].astype(np.int64) * b[None].astype(np.int64)).sum(-1).astype(np.int32)
    with use_cpu(level, features):
        s, args = _pair_dot_op("int8")
        f = compiler.build_op(s, args=args)
        asm = f.asm()
        if insn == "vpdpwssd":  # the accumulator add is fused only in a reduction; here: pmaddwd at least
            assert "vpmaddwd" in asm or "vpdpwssd" in asm
        else:
            assert insn in asm
        if not missing_features():
            np.testing.assert_array_equal(f(a, b), want)
    s, args = _pair_dot_op("int16")
    a16 = np.full((4, 2), -32768, np.int16)
    b16 = np.full((16, 2), -32768, np.int16)
    want16 = (a16[:, None, :].astype(np.int64) * b16[None].astype(np.int64)).sum(-1)
    np.testing.assert_array_equal(compiler.build_op(s, args=args)(a16, b16), want16.astype(np.int64).astype(np.int32))


@pytest.mark.parametrize("level,insn", [("x86-64-v2", "pmaddwd\t"), ("x86-64-v3", "vpmaddwd\t"),
                                        ("x86-64-v4", "vpmaddwd\t")])
def test_narrow_products_use_pmaddwd(level, insn):
    """``int32(int8) * int32(int16)`` lane by lane: pmaddwd of (a, sign) x (b, 0) pairs, no pmulld; extremes exact."""
    a = te.placeholder((3, 16), "int8", "a")
    b = te.placeholder((16,), "int16", "b")
    y = te.compute((3, 16), lambda i, j: a[i, j].astype("int32") * b[j].astype("int32"), name="y", dtype="int32")
    av = np.array([[-128] * 16, [127] * 16, list(range(-8, 8))], np.int8)
    bv = np.array([-32768, 32767, -1, 0] * 4, np.int16)
    with use_cpu(level):
        s = create_schedule(y)
        s[y].vectorize(s[y].leaf_iter_vars[1])
        f = compiler.build_op(s, args=[a, b, y])
        asm = f.asm()
        assert insn in asm and "pmulld" not in asm
        if not missing_features():
            np.testing.assert_array_equal(f(av, bv), av.astype(np.int32) * bv.astype(np.int32))


def test_padded_copy_loads_vectors_not_bytes():
    """A select-guarded contiguous load (a padded copy) is one vector load in the interior (was a byte gather)."""
    x = te.placeholder((6, 32), "int8", "x")
    p = te.compute((8, 32), lambda i, j: te.select((i >= 1) & (i < 7), x[i - 1, j], te.const(-3, "int8")),
                   name="p", dtype="int8")
    s = create_schedule(p)
    s[p].vectorize(s[p].leaf_iter_vars[1])
    f = compiler.build_op(s, args=[x, p])
    assert "load <32 x i8>" in f.llvm_ir  # the interior (the border keeps a clamped lane-by-lane load)
    xv = np.random.default_rng(2).integers(-128, 128, (6, 32), dtype=np.int8)
    want = np.full((8, 32), -3, np.int8)
    want[1:7] = xv
    np.testing.assert_array_equal(f(xv), want)


def test_scalar_condition_selects_whole_vectors():
    """Selects in a vector loop by the kind of their condition's conjuncts: all the same for every lane (a padded
    copy's row and column tests) is one vector select on their broadcast (a scalar ``select i1`` of vectors became a
    branch, slower in the int8 stem's copy); per-lane ones keep their mask; a mix selects lane by lane on the
    per-lane ones and then whole vectors on the uniform ones. Values as numpy's, border rows and columns included."""
    x = te.placeholder((5, 4, 16), "int8", "x")
    p = te.compute((7, 6, 16), lambda i, j, k: te.select((i >= 1) & (i < 6) & (j >= 1) & (j < 5), x[i - 1, j - 1, k],
                                                          te.const(-7, "int8")), name="p", dtype="int8")
    s = create_schedule(p)
    s[p].vectorize(s[p].leaf_iter_vars[2])
    f = compiler.build_op(s, args=[x, p])
    assert re.search(r"select\s+<16 x i1>", f.llvm_ir) and not re.search(r"select\s+i1 %\S+, <16 x i8>", f.llvm_ir)
    xv = np.random.default_rng(4).integers(-128, 128, (5, 4, 16), dtype=np.int8)
    want = np.full((7, 6, 16), -7, np.int8)
    want[1:6, 1:5] = xv
    np.testing.assert_array_equal(f(xv), want)
    y = te.placeholder((7, 6, 16), "int8", "y")
    q = te.compute((7, 6, 16), lambda i, j, k: te.select(k < 9, y[i, j, k], te.const(5, "int8")), name="q",
                   dtype="int8")
    s = create_schedule(q)
    s[q].vectorize(s[q].leaf_iter_vars[2])
    g = compiler.build_op(s, args=[y, q])
    assert re.search(r"select\s+<16 x i1>", g.llvm_ir)
    np.testing.assert_array_equal(g(want), np.where(np.arange(16) < 9, want, np.int8(5)))
    r = te.compute((7, 6, 16), lambda i, j, k: te.select((i >= 2) & (k < 9), y[i, j, k], te.const(5, "int8")),
                   name="r", dtype="int8")
    s = create_schedule(r)
    s[r].vectorize(s[r].leaf_iter_vars[2])
    h = compiler.build_op(s, args=[y, r])
    assert re.search(r"select\s+<16 x i1>", h.llvm_ir) and re.search(r"select\s+i1 %\S+, <16 x i8>", h.llvm_ir)
    mask = (np.arange(7)[:, None, None] >= 2) & (np.arange(16)[None, None, :] < 9)
    np.testing.assert_array_equal(h(want), np.where(mask, want, np.int8(5)))


@pytest.mark.parametrize("level,features", [("x86-64-v3", "+avxvnni"), ("x86-64-v4", "+avx512vnni")])
def test_conv_reduction_fuses_into_vpdpwssd_on_vnni(level, features):
    with use_cpu(level, features):
        asm = _conv_asm(False, features)
    assert "vpdpwssd" in asm


def _conv_asm(quads: bool, features: str) -> str:
    """Assembly of a 32 -> 32 channel 3x3 packed conv (pairs or quads) for the current target."""
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(1, 32, 6, 6, 32, 3, 3, (1, 1), (1, 1, 1, 1), dtype="int8"), 1, 16,
                                      16, quads=quads)
    rq = Requant(0, np.full(32, 1 << 30), np.full(32, 38), zero_point=0)
    extra, fn, dt = requant_int.requant_stage(rq, 32, specialize=True)
    op = conv2d_int8.conv2d_packed(spec, (extra, fn, dt), 512 if "512" in features else 256)
    s = create_schedule(op.out)
    conv2d_int8.schedule_packed(op, s)
    return compiler.build_op(s, args=op.inputs + [op.out]).asm()


def _quad_dot_op(lanes: int = 16):
    """``y[i, j] = acc[i, j] + sum_k int32(u[i, k]) * int32(s[j, k])`` (u uint8, s int8), j vectorized."""
    u = te.placeholder((4, 4), "uint8", "u")
    sw = te.placeholder((lanes, 4), "int8", "s")
    acc = te.placeholder((4, lanes), "int32", "acc")
    y = te.compute((4, lanes), lambda i, j: acc[i, j] + u[i, 0].astype("int32") * sw[j, 0].astype("int32")
                   + u[i, 1].astype("int32") * sw[j, 1].astype("int32") + u[i, 2].astype("int32")
                   * sw[j, 2].astype("int32") + u[i, 3].astype("int32") * sw[j, 3].astype("int32"), name="y",
                   dtype="int32")
    s = create_schedule(y)
    s[y].vectorize(s[y].leaf_iter_vars[1])
    return s, [u, sw, acc, y]


@pytest.mark.parametrize("level,features,insn", [("x86-64-v2", "", "pmaddwd\t"), ("x86-64-v3", "", "vpmaddwd\t"),
                                                 ("x86-64-v3", "+avxvnni", "{vex}\tvpdpbusd\t%ymm"),
                                                 ("x86-64-v4", "", "vpmaddwd\t"),
                                                 ("x86-64-v4", "+avx512vnni", "vpdpbusd\t%zmm")])
def test_quad_products_use_the_levels_dot_instruction(level, features, insn):
    """u8 x s8 quads: ``vpdpbusd`` with VNNI (AVX-VNNI: the VEX form on ymm), else pmaddwd pairs of the widened
    bytes. Extremes exact: 4 * 255 * (-128) and 4 * 255 * 127 (pmaddubsw would saturate), an accumulator at the
    int32 edge wraps like int32 adds."""
    u = np.array([[255] * 4, [255, 0, 255, 0], [0, 1, 2, 3], [128, 127, 200, 3]], np.uint8)
    sw = np.random.default_rng(3).integers(-128, 128, (16, 4)).astype(np.int8)
    sw[0], sw[1] = -128, 127
    acc = np.random.default_rng(4).integers(-(1 << 31), 1 << 31, (4, 16)).astype(np.int32)
    acc[0, :2] = [-(1 << 31), (1 << 31) - 1]
    want = (acc.astype(np.int64) + u.astype(np.int64) @ sw.astype(np.int64).T).astype(np.int32)
    with use_cpu(level, features):
        s, args = _quad_dot_op()
        f = compiler.build_op(s, args=args)
        assert insn in f.asm()
        if not missing_features():
            np.testing.assert_array_equal(f(u, sw, acc), want)


@pytest.mark.parametrize("level,features,insn", [("x86-64-v3", "+avxvnni", "{vex}\tvpdpbusd"),
                                                 ("x86-64-v4", "+avx512vnni", "vpdpbusd\t%zmm"),
                                                 ("x86-64-v4", "", "vpdpbusd")])
def test_quad_conv_reduction_runs_on_vpdpbusd(level, features, insn):
    """The quads' conv: ``vpdpbusd`` on the accumulator registers, none without VNNI; through the backend, bit-exact
    with ref (where this machine has the level and features; else compile-only)."""
    with use_cpu(level, features):
        asm = _conv_asm(True, features)
        if not missing_features():
            _check(32, 9, 7, 48, 3, 2, (1, 0, 1, 1), pad_value=-5, seed=12, quads=True)
    assert (insn in asm) == bool(features)

    rng = np.random.default_rng(7)
    edge = [-(1 << 31), (1 << 31) - 1, 0, -1, 1]
    acc = np.concatenate([rng.integers(-(1 << 31), 1 << 31, 4000), edge]).astype(np.int32)
    for mult, shift, zp, relu in [((1 << 31) - 1, 33, 0, False), (1958494510, 39, -128, False), (1 << 30, 63, 4, True),
                                  (-1234567, 40, 0, False)]:
        rq = Requant(0, np.full(8, mult), np.full(8, shift), relu, zp if relu else -128, 127, zero_point=zp)
        assert requant_int.uniform_scale(rq) == (mult, shift)
        extra, fn, dt = requant_int.requant_stage(rq, 8, specialize=True)
        a = te.placeholder((acc.size // 8, 8), "int32", "acc")
        y = te.compute(a.shape, lambda i, c: fn(a[i, c], c), name="y", dtype=dt)
        s = create_schedule(y)
        s[y].vectorize(s[y].leaf_iter_vars[1])
        bias = rng.integers(-1000, 1000, 8).astype(np.int32)
        x = acc[: a.shape[0] * 8].reshape(a.shape)
        got = compiler.build_op(s, args=[a, *extra, y])(x, bias, np.zeros(8, np.int32), np.zeros(8, np.int32))
        np.testing.assert_array_equal(got, apply_requant(x, bias, rq, 1).astype(np.int8))
    assert requant_int.uniform_scale(Requant(0, np.full(4, 5), np.full(4, 20))) is None  # shift < 33: general form


@pytest.mark.parametrize("h,w,k,stride,pads,ceil", [(9, 9, 3, 2, (1, 1, 1, 1), 0), (8, 7, 2, 2, (0, 0, 0, 0), 1),
                                                    (6, 6, 3, 1, (1, 0, 1, 2), 0)])
def test_packed_max_pool_matches_numpy(h, w, k, stride, pads, ceil):
    from compiler.backend.plans.compile import compile_plan
    from compiler.backend.plans.plans_int8 import plan_packed_maxpool
    from compiler.graph.ir import Node, TensorInfo
    from jit_runtime.host_ops.pool_kernels import packed_max_pool

    attrs = {"kernel_shape": (k, k), "strides": (stride, stride), "pads": pads, "ceil_mode": ceil}
    x = np.random.default_rng(4).integers(-128, 128, (1, 3, h, w, 1, 16), dtype=np.int8)
    x[0, 0, 0, 0, 0, :4] = -128  # a window that sees only -128 and the border
    plan = plan_packed_maxpool(Node("PackedMaxPool", ["x"], ["y"], attrs, "pool"), [TensorInfo(x.shape, np.int8)],
                               {}, "llvm")
    got = np.asarray(compile_plan(plan, "llvm")(*plan.args([x])))
    np.testing.assert_array_equal(got.reshape(plan.out_shape), packed_max_pool(attrs, x))


@pytest.mark.parametrize("n,k,m,uniform", [(1, 1280, 1000, True), (1, 40, 24, False)])
def test_packed_dense_matches_ref(n, k, m, uniform):
    from jit_runtime.host_ops.layout import pack_activation as pack

    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, (n, k), dtype=np.int8)
    w = rng.integers(-128, 128, (m, k), dtype=np.int8)
    bias = rng.integers(-(1 << 16), 1 << 16, m)
    rq = _requant(rng, m, uniform, -7, False)
    xp, wp = pack(x, CFG.batch, CFG.block_in), pack_weight(w, CFG.block_out, CFG.block_in)
    want = RefAccelBackend(CFG).dense(xp, wp, bias, requant=rq)
    tb = TargetAccelBackend(CFG)
    for _ in range(2):  # the prepared second call too
        got = tb.dense(xp, wp, bias, requant=rq)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert len(tb._layers) == 1  # it ran as a packed 1x1 conv
    wp = next(iter(tb._layers.values()))[3][-1][0]
    assert wp.dtype == np.int8  # one pixel: int8 pair weights (half the bytes)


def test_packed_conv_on_sse_level_matches_ref():
    """x86-64-v2 (128-bit, SSE pmaddwd, 2-pixel tiles) runs on every x86-64 host: bit-exact too."""
    with use_cpu("x86-64-v2"):
        _check(32, 7, 9, 32, 3, 2, (1, 1, 1, 1), pad_value=-4, uniform=True, zp=-9, seed=11)
        _check(16, 6, 6, 16, 1, 1, (0, 0, 0, 0), seed=12)
        _check(32, 6, 6, 32, 3, 1, (1, 1, 1, 1), groups=32, seed=13)


@pytest.mark.parametrize("k,groups,conv_is_a,shift,relu", [(1, 1, True, 12, False), (3, 1, False, 0, True),
                                                           (3, 32, True, 7, False), (3, 2, False, 9, True)])
def test_fused_residual_add_matches_conv_then_qadd(k, groups, conv_is_a, shift, relu):
    """The QAdd in the packed kernel's output stage (1x1 in place, 3x3, depthwise), and a grouped conv's fallback
    (the unpacked kernel, the Add on the host): bit-exact with the ref conv followed by numpy ``qadd``."""
    from compiler.topi.residual import Residual
    from jit_runtime.host_ops.int_elementwise import QAddParams, qadd

    rng = np.random.default_rng(31)
    c = 32
    x = rng.integers(-128, 128, (1, c, 7, 9), dtype=np.int8)
    wt = np.zeros((c, CFG.block_in, k, k), np.int8) if groups == c else rng.integers(-128, 128, (c, c // groups, k, k),
                                                                                     dtype=np.int8)
    if groups == c:
        wt[:, 0] = rng.integers(-128, 128, (c, k, k))
    bias = rng.integers(-(1 << 16), 1 << 16, c)
    rq = _requant(rng, c, True, -3, False)
    xp, wp = pack_activation(x, CFG.batch, CFG.block_in), pack_weight(wt, CFG.block_out, CFG.block_in)
    other = rng.integers(-128, 128, (1, c // 16, 7, 9, 1, 16), dtype=np.int8)
    zy = 5
    p = QAddParams(int(rng.integers(-32768, 32768)), int(rng.integers(1, 32768)), shift, -128, 127, zy,
                   zy if relu else -128, 127)
    kw = dict(stride=(1, 1), padding=(k // 2,) * 4, groups=groups, requant=rq, pad_value=-3)
    y = RefAccelBackend(CFG).conv2d(xp, wp, bias, **kw)
    want = qadd(y, other, p) if conv_is_a else qadd(other, y, p)
    tb = TargetAccelBackend(CFG)
    res = Residual(p, conv_is_a)
    assert tb.supports_residual(res) is None
    for _ in range(2):  # the prepared second call too
        np.testing.assert_array_equal(tb.conv2d(xp, wp, bias, residual=other, residual_add=res, **kw), want)
    with pytest.raises(ValueError, match="give both"):
        tb.conv2d(xp, wp, bias, residual=other, **kw)


def test_residual_add_outside_int32_rounding_is_refused():
    from compiler.topi.residual import Residual
    from jit_runtime.host_ops.int_elementwise import QAddParams

    why = TargetAccelBackend(CFG).supports_residual(Residual(QAddParams(3, 4, 40, 0, 0, 0)))
    assert "shift 40" in why


def test_prepared_layer_writes_into_each_given_array():
    """The prepared call remembers its arrays' addresses weakly: a new output (or input) array is written (read)
    where it lies, an array given again is the one returned."""
    rng = np.random.default_rng(41)
    x = rng.integers(-128, 128, (1, 16, 6, 6), dtype=np.int8)
    wt = rng.integers(-128, 128, (16, 16, 3, 3), dtype=np.int8)
    rq = _requant(rng, 16, True, 0, False)
    xp, wp = pack_activation(x, CFG.batch, CFG.block_in), pack_weight(wt, CFG.block_out, CFG.block_in)
    kw = dict(stride=(1, 1), padding=(1, 1, 1, 1), groups=1, requant=rq)
    want = RefAccelBackend(CFG).conv2d(xp, wp, None, **kw)
    tb = TargetAccelBackend(CFG)
    for _ in range(3):
        out = np.zeros(want.shape, np.int8)
        assert tb.conv2d(xp.copy(), wp, None, out=out, **kw) is out
        np.testing.assert_array_equal(out, want)
    same = np.zeros(want.shape, np.int8)
    for _ in range(2):
        same[...] = 0
        assert tb.conv2d(xp, wp, None, out=same, **kw) is same
        np.testing.assert_array_equal(same, want)
