"""The CPU conv schedule's pixel-vector layouts (1x1 and depthwise convs, pixels in the vector lanes), the max pool row
schedule and the codegen's window loads they rely on, against numpy: ragged and small shapes, stride 2, dilation,
batches; per x86-64 feature level (conftest)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from compiler import te
from compiler.backend.llvm.host import float_lanes
from compiler.backend.build import build_op
from compiler.schedule import create_schedule
from compiler.topi import conv2d_direct as cd

RNG = np.random.default_rng(11)
S = cd.Conv2dSpec


def _run(spec: cd.Conv2dSpec, act: str | None = "clip", residual: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(kernel output as NCHW, numpy reference) of ``spec`` with bias, residual and ``act``."""
    x = RNG.standard_normal((spec.n, spec.c, spec.h, spec.w)).astype(np.float32)
    w = RNG.standard_normal((spec.o, spec.cg, spec.kh, spec.kw)).astype(np.float32)
    b = RNG.standard_normal(spec.o).astype(np.float32)
    r = RNG.standard_normal((spec.n, spec.o, spec.oh, spec.ow)).astype(np.float32)
    params = (0.0, 6.0) if act == "clip" else ()
    op = cd.conv2d(spec, bias=True, residual=residual, act=act, act_params=params)
    s = create_schedule(op.out)
    cd.schedule_cpu(op, s)
    fn = build_op(s, args=op.inputs + [op.out])
    args = [x.reshape(cd.input_shape(spec)), cd.pack_weight(spec, w), b]
    if residual:
        args.append(r.reshape(cd.output_shape(spec)))
    got = np.asarray(fn(*args)).reshape(r.shape)
    want = conv2d_nchw(x, w, stride=spec.stride, pads=spec.pads, dilations=spec.dilations, groups=spec.groups)
    want = want + b.reshape(1, -1, 1, 1) + (r if residual else 0)
    if act == "clip":
        want = np.clip(want, 0, 6)
    elif act == "relu":
        want = np.maximum(want, 0)
    return got, want


POINTWISE = [  # (spec, channels x pixels per tile): dividing and ragged pixel tiles, pixels or channels outer
    (S(1, 16, 8, 8, 24, 1, 1), (6, 16)),     # 64 pixels: 4 tiles of 16, pixel tiles outer (64 >= 24 channels)
    (S(2, 5, 4, 6, 7, 1, 1), (1, 8)),        # batch 2, 24 pixels in 3 tiles of 8, 7 output channels: 1 per tile
    (S(1, 12, 5, 5, 8, 1, 1), (4, 16)),      # 25 pixels: 16 + a ragged 9 over the zero-padded panel
    (S(1, 9, 3, 7, 48, 1, 1), (6, 16)),      # 21 pixels (16 + 5 ragged), channel tiles outer (48 > 21)
    (S(2, 3, 2, 2, 6, 1, 1), (3, 4)),        # 4 pixels: one tile, a whole plane per tile
    (S(1, 8, 16, 16, 8, 1, 1), (4, 16)),     # 256 pixels: 16 tiles in 8 blocks of 2 (pointwise_block_tiles)
    (S(2, 4, 15, 17, 6, 1, 1), (3, 16)),     # 255 pixels: blocks of 2 tiles, the last one's ragged tile over the panel
]


@pytest.mark.parametrize("spec,tile", POINTWISE, ids=["divides", "batch-7ch", "ragged", "channels-outer", "tiny",
                                                      "blocks", "ragged-blocks"])
def test_pointwise_pixel_vectors_match_numpy(spec, tile):
    sp = dataclasses.replace(spec, pixel_vectors=True, oc_block=tile[0], pixel_tile=tile[1])
    assert (sp.block, sp.tile) == tile and cd.output_shape(sp) == (sp.n, sp.o // tile[0], tile[0], sp.oh * sp.ow)
    got, want = _run(sp)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_pointwise_pixel_blocks_fit_l1_and_leave_parallel_chunks():
    """Tiles per pixel block: the most dividing the tile count with a C x block-pixels float32 panel <= 32 KB and
    at least 8 blocks; one where nothing larger divides."""
    def tiles(c, hw, o, tile):
        return cd.pointwise_block_tiles(dataclasses.replace(S(1, c, hw, hw, o, 1, 1), pixel_vectors=True,
                                                            oc_block=tile[0], pixel_tile=tile[1]))
    assert tiles(16, 112, 96, (6, 16)) == 28   # 784 tiles; 16 ch x 16 px x 4 B: 32 fit; 28 divides 784
    assert tiles(144, 56, 24, (6, 16)) == 2    # 196 tiles; 3 fit, 2 divides
    assert tiles(16, 112, 96, (12, 32)) == 14  # AVX-512's 32-pixel tiles: 392 tiles, 16 fit, 14 divides
    assert tiles(64, 14, 384, (6, 16)) == 1    # 13 tiles (196 pixels, one ragged): fewer than 2 x 8 blocks
    assert tiles(8, 16, 8, (4, 16)) == 2       # 16 tiles: 64 would fit, 8 blocks at least
    # the shared rule (the int8 1x1 convs' per-block copy takes it too): 0 where no block fits
    assert cd.block_tiles(196, 1000, 32000, 8) == 14  # 24 allowed: 14 is the largest divisor of 196
    assert cd.block_tiles(13, 100, 32000, 8) == 1 and cd.block_tiles(64, 10 ** 6, 32000, 1) == 0


DEPTHWISE = [
    S(1, 3, 9, 20, 3, 3, 3, (1, 1), (1, 1, 1, 1), groups=3),          # 20 wide: the whole row (16 + 4 pieces)
    S(1, 3, 9, 70, 3, 3, 3, (1, 1), (1, 1, 1, 1), groups=3),          # 70 wide: ragged last tile (64 + 6 on AVX2)
    S(2, 4, 11, 13, 4, 3, 3, (2, 2), (1, 0, 2, 1), groups=4),         # stride 2, odd pads, batch 2
    S(1, 2, 10, 19, 2, 5, 5, (2, 2), (2, 2, 2, 2), (2, 1), groups=2),  # 5x5, stride 2, dilation (2, 1)
    S(1, 5, 7, 7, 5, 3, 3, (1, 1), (1, 1, 1, 1), groups=5),           # 7 wide: two 4-pixel tiles, the second ragged
    S(1, 24, 14, 14, 24, 3, 3, (2, 2), (1, 1, 1, 1), groups=24),      # MobileNetV2's stride 2 to 7x7: the same
    S(1, 8, 16, 32, 8, 3, 3, (1, 1), (0, 0, 0, 0), groups=8),         # no padding, whole tiles
]


@pytest.mark.parametrize("spec", DEPTHWISE, ids=["whole-row", "ragged-row", "stride2", "5x5-dilated", "narrow",
                                                 "narrow-stride2", "no-pad"])
def test_depthwise_pixel_vectors_match_numpy(spec):
    lanes = float_lanes()  # the feature level's: 4, 8 or 16
    xt = cd.depthwise_row_tile(spec, lanes)
    if not xt:
        pytest.skip(f"rows of {spec.ow} are narrower than half of {lanes} lanes: the channel-vector layout")
    assert 1 <= xt <= spec.ow
    sp = dataclasses.replace(spec, pixel_vectors=True, pixel_tile=xt)
    sp = dataclasses.replace(sp, row_tile=cd.depthwise_rows(sp, lanes))
    assert 1 <= sp.row_tile <= sp.oh and sp.block == 1 and cd.cpu_spec(spec, lanes) == sp
    got, want = _run(sp, act="relu")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


NARROW = [  # strided, output rows narrower than half an AVX-512 vector: channel vectors over a channel-blocked copy
    S(1, 24, 12, 12, 24, 3, 3, (2, 2), (1, 1, 1, 1), groups=24),        # stride 2 to 6x6 (4 + 2 pieces), 3 blocks
    S(2, 8, 9, 12, 8, 5, 5, (1, 2), (2, 2, 2, 2), (2, 1), groups=8),    # 5x5, 6-wide rows, dilation, batch 2
    S(1, 8, 6, 6, 8, 3, 3, (2, 2), (1, 1, 1, 1), groups=8),             # padded rows of 8 to 3 pixels
    S(1, 8, 5, 5, 8, 3, 3, (2, 2), (1, 1, 1, 1), groups=8),             # padded rows of 7: under one 8-lane block
]


@pytest.mark.parametrize("spec", NARROW, ids=["stride2", "5x5-dilated", "tiny", "under-a-block"])
def test_narrow_strided_depthwise_takes_channel_vectors(spec):
    """On 16 lanes these rows take the channel-vector layout (8-channel blocks); its blocked input copy reads the
    NCHW rows as windows and transposes them in registers where a row holds a block (no element loaded alone),
    and the conv is numpy's at every feature level. Unit stride keeps rows (7x7 maps)."""
    sp = cd.cpu_spec(spec, 16)
    assert not sp.pixel_vectors and sp.block == 8 and cd.depthwise_row_tile(spec, 16) == 0
    assert cd.depthwise_row_tile(spec, 8) == (spec.ow if 2 * spec.ow >= 8 else 0)
    assert cd.depthwise_row_tile(S(1, 8, 7, 7, 8, 3, 3, (1, 1), (1, 1, 1, 1), groups=8), 16) == 4  # 7 wide: 4s
    got, want = _run(sp)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if cd.conv2d(sp).pad.shape[-2] >= 8:
        op = cd.conv2d(sp, bias=True)
        s = create_schedule(op.out)
        cd.schedule_cpu(op, s)
        ir = build_op(s, args=op.inputs + [op.out]).llvm_ir
        assert "load float," not in ir and "shufflevector" in ir


BANDED = [  # channel planes past L1: built per output row tile (the rows it reads), ragged row tiles and rows
    S(2, 3, 72, 150, 3, 3, 3, (2, 2), (1, 0, 2, 1), groups=3),          # stride 2, odd pads, batch 2
    S(1, 2, 61, 140, 2, 3, 3, (2, 2), (1, 1, 1, 1), (1, 2), groups=2),  # dilated columns
]


@pytest.mark.parametrize("spec", BANDED, ids=["stride2-batch2", "dilated"])
def test_depthwise_plane_in_row_bands_matches_numpy(spec):
    lanes = float_lanes()
    sp = cd.cpu_spec(spec, lanes)
    assert sp.pixel_vectors and sp.oh % sp.row_tile != 0  # a ragged last band
    assert cd.depthwise_plane_bands(sp, cd.conv2d(sp).pad.shape)
    got, want = _run(sp)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_depthwise_plane_bands_where_the_plane_outgrows_l1():
    wide = S(1, 96, 112, 112, 96, 3, 3, (2, 2), (1, 1, 1, 1), groups=96)   # 52 KB planes, 1 row of 17 read twice
    one = S(1, 32, 112, 112, 32, 3, 3, (1, 1), (1, 1, 1, 1), groups=32)    # stride 1, 4-row tiles: 2 rows of 6
    small = S(1, 144, 56, 56, 144, 3, 3, (2, 2), (1, 1, 1, 1), groups=144)  # 13 KB planes
    sp = cd.cpu_spec(wide, 8)
    assert cd.depthwise_plane_bands(sp, cd.conv2d(sp).pad.shape)
    for spec in (one, small):
        sp = cd.cpu_spec(spec, 8)
        assert not cd.depthwise_plane_bands(sp, cd.conv2d(sp).pad.shape)


DIRECT = [  # (spec, channels x pixels per tile): a few input channels, any kernel, stride, padding
    (S(1, 3, 20, 22, 8, 3, 3, (2, 2), (1, 1, 1, 1)), (4, 8)),          # a stem: 11 wide = 8 + a ragged 3
    (S(2, 2, 9, 17, 6, 3, 2, (1, 1), (0, 1, 2, 0), (2, 1)), (3, 16)),    # batch 2, dilated, 16 wide
    (S(1, 1, 8, 12, 5, 5, 5, (1, 3), (2, 2, 2, 2)), (5, 4)),            # stride 3 columns, 4 wide
    (S(1, 3, 40, 46, 8, 7, 7, (2, 2), (3, 3, 3, 3)), (4, 16)),          # ResNet's 7x7/2 stem: 23 wide = 16 + 7
]


@pytest.mark.parametrize("spec,tile", DIRECT, ids=["stem", "dilated-batch", "stride3", "stem7x7"])
def test_direct_pixel_vector_rows_match_numpy(spec, tile):
    sp = dataclasses.replace(spec, pixel_vectors=True, oc_block=tile[0], pixel_tile=tile[1])
    assert (sp.block, sp.tile) == tile and cd.output_shape(sp) == (sp.n, sp.o // tile[0], tile[0], sp.oh, sp.ow)
    got, want = _run(sp)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cpu_spec_picks_the_layout_per_shape():
    """1x1 unit-stride and depthwise float32 convs take pixel vectors where their tiles fit; others keep channels."""
    pw = S(1, 32, 28, 28, 192, 1, 1)
    assert cd.pointwise_tiles(pw, 8) == (6, 16) and cd.pointwise_tiles(pw, 16) == (12, 32)
    assert cd.pointwise_tiles(S(1, 64, 14, 14, 384, 1, 1), 8) == (6, 16)  # 196 pixels: 13 tiles of 16, 12 padded
    assert cd.pointwise_tiles(S(1, 64, 14, 14, 64, 1, 1), 8) == (4, 16)   # 6 does not divide 64
    assert cd.pointwise_tiles(S(1, 960, 7, 7, 160, 1, 1), 8) == (0, 0)  # 49 pixels: channel vectors
    assert cd.pointwise_tiles(S(1, 8, 2, 2, 8, 1, 1), 8) == (0, 0)      # fewer pixels than lanes
    assert cd.depthwise_row_tile(S(1, 8, 56, 56, 8, 3, 3, pads=(1, 1, 1, 1), groups=8), 8) == 8  # 8 | 56, 16 not
    assert cd.depthwise_row_tile(S(1, 8, 30, 30, 8, 3, 3, groups=8), 8) == 28   # 28 <= 4 vectors: the whole row
    assert cd.depthwise_row_tile(S(1, 8, 30, 30, 8, 3, 3, groups=8), 16) == 28
    assert cd.depthwise_row_tile(S(1, 8, 62, 62, 8, 3, 3, groups=8), 8) == 16   # ragged 60 = 16 * 3 + 12
    assert cd.depthwise_row_tile(S(1, 8, 62, 62, 8, 3, 3, groups=8), 16) == 60  # 60 = 32 + 16 + 8 + 4 pieces
    assert [cd.row_vectors(xt, 16) for xt in (14, 16, 28, 56, 7)] == [3, 1, 3, 4, 3]
    assert [cd.row_vectors(xt, 8) for xt in (14, 16, 28, 56, 7)] == [3, 2, 4, 7, 3]
    # rows: at most 12 accumulator registers (24 strided on AVX-512), dividing the rows: 14-wide on 16 lanes: 3 a
    # row, 2 rows (strided: 7 rows of 14 output rows); 112-wide: 1 a row, 8 rows (strided: 56 rows, 8 of 4 vectors)
    dw14 = cd.cpu_spec(S(1, 384, 14, 14, 384, 3, 3, (1, 1), (1, 1, 1, 1), groups=384), 16)
    assert (dw14.tile, dw14.row_tile) == (14, 2)
    dw14s = cd.cpu_spec(S(1, 384, 28, 28, 384, 3, 3, (2, 2), (1, 1, 1, 1), groups=384), 16)
    assert (dw14s.tile, dw14s.row_tile) == (14, 7)
    dw112 = cd.cpu_spec(S(1, 32, 112, 112, 32, 3, 3, (1, 1), (1, 1, 1, 1), groups=32), 16)
    assert (dw112.tile, dw112.row_tile) == (16, 8)
    dw56s = cd.cpu_spec(S(1, 96, 112, 112, 96, 3, 3, (2, 2), (1, 1, 1, 1), groups=96), 16)
    assert (dw56s.tile, dw56s.row_tile) == (56, 4)
    assert cd.depthwise_row_tile(S(1, 8, 5, 5, 8, 3, 3, groups=8), 8) == 0      # 3 wide: channel vectors
    # 7-pixel rows (4 + 2 + 1 pieces: three operations a tap) take two 4-pixel tiles, the second ragged, every row in
    # one tile (one register a row), on every target and stride; 5 and 6 (two pieces, as many as 4-pixel tiles) and
    # 14 (8 + 4 + 2: three, against four tiles) keep their pieces
    for lanes in (4, 8, 16):
        for stride, size in (((1, 1), 7), ((2, 2), 14), ((2, 2), 13)):
            sp = cd.cpu_spec(S(1, 96, size, size, 96, 3, 3, stride, (1, 1, 1, 1), groups=96), lanes)
            assert (sp.pixel_vectors, sp.tile, sp.row_tile) == (True, 4, 7), (lanes, stride, size)
        for w in (5, 6):  # whole rows below 16 lanes; under half of 16 lanes (and not 7 wide): channel vectors
            assert cd.depthwise_row_tile(S(1, 8, w, w, 8, 3, 3, pads=(1, 1, 1, 1), groups=8), lanes) == \
                (w if lanes < 16 else 0)
        assert cd.depthwise_row_tile(S(1, 8, 14, 14, 8, 3, 3, pads=(1, 1, 1, 1), groups=8), lanes) != 4
    for spec in (S(1, 16, 8, 8, 16, 1, 1, (2, 2)), S(1, 16, 8, 8, 16, 3, 3),
                 S(1, 16, 8, 8, 16, 1, 1, pads=(1, 1, 1, 1)), S(1, 16, 8, 8, 16, 1, 1, dtype="int8"), S(1, 16, 8, 8, 16, 1, 1, groups=2),
                 S(1, 5, 8, 8, 16, 3, 3, (2, 2), (1, 1, 1, 1))):  # 5 input channels: not a stem
        assert all(not cd.cpu_spec(spec, lanes).pixel_vectors for lanes in (4, 8, 16))
    for lanes in (4, 8, 16):  # the backend passes the target's lanes; the tiles follow them
        dw = cd.cpu_spec(S(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1), groups=16), lanes)
        assert dw.pixel_vectors and dw.tile == 8 and dw.row_tile == cd.depthwise_rows(dw, lanes) >= 1
        stem = cd.cpu_spec(S(1, 3, 224, 224, 32, 3, 3, (2, 2), (1, 1, 1, 1)), lanes)  # 27 taps: direct rows
        assert stem.pixel_vectors and (stem.block, stem.tile) == cd.direct_row_tiles(stem, lanes) != (0, 0)
    assert cd.direct_row_tiles(S(1, 3, 224, 224, 32, 3, 3, (2, 2), (1, 1, 1, 1)), 8) == (4, 16)
    assert cd.direct_row_tiles(S(1, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3, 3, 3)), 8) == (4, 16)
    for lanes in (8, 16):  # >= 75 taps with outputs in 32s: the channel-vector layout (ResNet's 7x7/2 stem)
        for wide in (S(1, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3, 3, 3)), S(1, 3, 64, 64, 32, 5, 5, (2, 2), (2,) * 4)):
            sp = cd.cpu_spec(wide, lanes)
            assert not sp.pixel_vectors and sp.block == 2 * lanes and sp.flat
        assert cd.cpu_spec(S(1, 3, 64, 64, 48, 5, 5, (2, 2), (2,) * 4), lanes).pixel_vectors  # 48 outputs: rows
        assert cd.cpu_spec(S(1, 3, 64, 64, 64, 3, 3, (2, 2), (1,) * 4), lanes).pixel_vectors  # 27 taps: rows
    assert not cd.cpu_spec(S(1, 3, 224, 224, 64, 11, 11, (4, 4), (2, 2, 2, 2)), 8).pixel_vectors  # 363 taps
    knobs = cd.CpuConvKnobs(16, 6, "none")
    assert not knobs.apply(cd.cpu_spec(pw, 8)).pixel_vectors  # tuning knobs set the channel-vector layout


def test_pixel_vectors_refuse_what_they_cannot_tile():
    with pytest.raises(te.TeError, match="depthwise convs, one-group direct convs and 1x1"):
        cd.conv2d(S(1, 8, 8, 8, 8, 3, 3, groups=2, pixel_vectors=True))
    with pytest.raises(te.TeError, match="oc_block dividing"):
        cd.conv2d(S(1, 8, 8, 8, 8, 3, 3, pixel_vectors=True))
    with pytest.raises(te.TeError, match="divide the 10 output channels"):
        cd.conv2d(S(1, 8, 4, 4, 10, 1, 1, pixel_vectors=True, oc_block=4, pixel_tile=8))
    with pytest.raises(te.TeError, match="row tile"):
        cd.conv2d(S(1, 4, 6, 6, 4, 3, 3, groups=4, pixel_vectors=True, pixel_tile=9, row_tile=1))
    with pytest.raises(te.TeError, match="1..4 rows, got float32, 4 x 0"):  # rows per tile not chosen
        cd.conv2d(S(1, 4, 6, 6, 4, 3, 3, groups=4, pixel_vectors=True, pixel_tile=4))
    with pytest.raises(te.TeError, match="oc_block dividing"):
        cd.conv2d(S(1, 3, 6, 6, 10, 3, 3, pixel_vectors=True, oc_block=4, pixel_tile=4))
    op = cd.conv2d(S(1, 8, 4, 4, 8, 1, 1, pixel_vectors=True, oc_block=4, pixel_tile=8))
    with pytest.raises(te.TeError, match="layout .* is not the op's"):
        cd.schedule_cpu(op, create_schedule(op.out), cd.CpuConvKnobs(8, 6))
    with pytest.raises(te.TeError, match="do not match the op's spec"):
        cd.schedule_cpu(op, create_schedule(op.out), cd.CpuConvKnobs(2, 8, algo="pixels"))
    cd.schedule_cpu(op, create_schedule(op.out), cd.CpuConvKnobs(4, 8, "none", algo="pixels"))  # its own knobs
    with pytest.raises(te.TeError, match="GPU"):
        cd.schedule_gpu(op, create_schedule(op.out))


@pytest.mark.parametrize("n", [13, 16, 37])
def test_vector_window_loads_stay_inside_the_buffer(n):
    """A strided vector load (one wide load + shuffle) and a padded row (masked load) up to the buffer's last
    element: nothing past it is read (the results are exact)."""
    x = te.placeholder((2 * n,), "float32", "x")
    xv = RNG.standard_normal(2 * n).astype(np.float32)
    y = te.compute((n,), lambda i: x[2 * i + 1] * 2.0, name="y", dtype="float32")
    s = create_schedule(y)
    s[y].vectorize(s[y].leaf_iter_vars[0])
    np.testing.assert_array_equal(build_op(s, args=[x, y])(xv), xv[1::2] * 2)
    z = te.compute((n + 4,), lambda i: te.select((i >= 2) & (i < n + 2), x[i + n - 2], te.const(0.0, "float32")),
                   name="z", dtype="float32")
    s = create_schedule(z)
    s[z].vectorize(s[z].leaf_iter_vars[0])
    want = np.zeros(n + 4, np.float32)
    want[2:n + 2] = xv[n:]
    np.testing.assert_array_equal(build_op(s, args=[x, z])(xv), want)


@pytest.mark.parametrize("rows,width", [(5, 29), (4, 64), (3, 17)])
def test_padded_stride_phase_plane_is_exact(rows, width):
    """A padded plane with stride-2 phases (a row test the same in every lane, column tests per lane): the rows'
    windows read plain vectors inside the buffer and masked ones where they pass either end of it."""
    x = te.placeholder((rows, width), "float32", "x")
    xv = RNG.standard_normal((rows, width)).astype(np.float32)
    wq = (width + 3) // 2
    zero = te.const(0.0, "float32")
    z = te.compute((rows + 2, 2, wq), lambda r, ph, q: te.select(
        (r >= 1) & (r < rows + 1) & (q * 2 + ph >= 1) & (q * 2 + ph < width + 1), x[r - 1, q * 2 + ph - 1], zero),
        name="z", dtype="float32")
    s = create_schedule(z)
    s[z].unroll(s[z].leaf_iter_vars[1])
    s[z].vectorize(s[z].leaf_iter_vars[2])
    padded = np.zeros((rows + 2, 2 * wq), np.float32)
    padded[1:rows + 1, 1:width + 1] = xv
    want = padded.reshape(rows + 2, wq, 2).transpose(0, 2, 1)
    np.testing.assert_array_equal(build_op(s, args=[x, z])(xv), want)


POOLS = [((1, 4, 20, 22), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),               # ResNet's
         ((2, 3, 11, 13), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),  # past the pads
         ((1, 2, 9, 34), dict(kernel_shape=[2, 3], strides=[1, 3], pads=[0, 1, 1, 0])),               # stride 3
         ((1, 5, 7, 18), dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]))]              # ragged row


@pytest.mark.parametrize("shape,attrs", POOLS, ids=["3x3s2", "ceil", "stride3", "ragged"])
def test_max_pool_rows_match_numpy(shape, attrs):
    from jit_runtime.host_ops.kernels import KERNELS
    from jit_runtime.host_ops.pooling import pool_axes
    from compiler.topi import pool

    n, c, h, w = shape
    ax = pool_axes(attrs, (h, w))
    spec = pool.PoolSpec(n, c, h, w, ax[0].k, ax[1].k, (ax[0].s, ax[1].s),
                         (ax[0].begin, ax[1].begin, ax[0].end, ax[1].end), ax[0].out, ax[1].out)
    lanes = float_lanes()
    xt, yt = pool.row_tiles(spec, lanes)
    if not xt:
        pytest.skip(f"rows of {spec.ow} are narrower than half of {lanes} lanes: the plain schedule")
    assert 1 <= xt <= spec.ow and 1 <= yt <= spec.oh
    ins, out, pad, window = pool.max_pool_rows(spec, xt, yt)
    s = create_schedule(out)
    pool.schedule_rows_cpu(s, out, pad, window, pool.default_pool_knobs(spec, lanes))
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(build_op(s, args=ins + [out])(x), KERNELS["MaxPool"](attrs, x))
