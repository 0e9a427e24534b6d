"""The channel-vector conv's output stage (XT pixels x OB channels in registers, stored NCHW): transposed in
registers and stored as one row of XT pixels per channel (``codegen._transposed_stores``), with a fused residual
read the same way, exact against numpy at every feature level; ragged tiles keep the lane-by-lane store."""
from __future__ import annotations

import numpy as np
import pytest

from jit_runtime.host_ops.conv_kernels import conv2d_nchw
from compiler import te
from compiler.backend.build import build_op
from compiler.schedule import create_schedule
from compiler.topi import conv2d_direct as cd

RNG = np.random.default_rng(11)
S = cd.Conv2dSpec


def _build(spec: cd.Conv2dSpec, knobs: cd.CpuConvKnobs, residual: bool):
    sp = knobs.apply(spec)
    op = cd.conv2d(sp, bias=True, residual=residual, act="relu")
    s = create_schedule(op.out)
    cd.schedule_cpu(op, s, knobs)
    return sp, build_op(s, args=op.inputs + [op.out])


def _run(spec: cd.Conv2dSpec, knobs: cd.CpuConvKnobs, residual: bool):
    sp, fn = _build(spec, knobs, residual)
    x = RNG.standard_normal((sp.n, sp.c, sp.h, sp.w)).astype(np.float32)
    w = RNG.standard_normal((sp.o, sp.c, sp.kh, sp.kw)).astype(np.float32)
    b = RNG.standard_normal(sp.o).astype(np.float32)
    r = RNG.standard_normal((sp.n, sp.o, sp.oh, sp.ow)).astype(np.float32)
    args = [x, cd.pack_weight(sp, w), b] + ([r.reshape(cd.output_shape(sp))] if residual else [])
    got = np.asarray(fn(*args)).reshape(r.shape)
    want = conv2d_nchw(x, w, stride=sp.stride, pads=sp.pads, dilations=sp.dilations)
    want = np.maximum(want + b.reshape(1, -1, 1, 1) + (r if residual else 0), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    return fn


@pytest.mark.parametrize("ob,xt", [(32, 7), (32, 8), (16, 5), (16, 4), (8, 3), (8, 8), (16, 2), (32, 6)])
@pytest.mark.parametrize("residual", [False, True])
def test_transposed_output_matches_numpy(ob, xt, residual, cpu_level):
    """1x1 on a 14x14 map (flat pixels: 196 = 28 x 7 = 49 x 4 = 98 x 2), a 3x3 on 8x8 rows (tiles of 8/4/2) and
    a 5x5-pixel map (tiles of 5): each stored as transposed rows; masked where XT is not a power of two."""
    cases = {7: S(1, 24, 14, 14, 64, 1, 1), 4: S(1, 24, 14, 14, 64, 1, 1), 2: S(1, 24, 14, 14, 64, 1, 1),
             8: S(1, 16, 8, 8, 64, 3, 3, (1, 1), (1, 1, 1, 1)), 5: S(2, 16, 5, 5, 32, 3, 3, (1, 1), (1, 1, 1, 1)),
             3: S(1, 8, 6, 6, 16, 1, 1), 6: S(1, 24, 6, 6, 64, 1, 1)}
    fn = _run(cases[xt], cd.CpuConvKnobs(ob, xt, "fused", 1, "rc_ky_kx"), residual)
    ragged_rows = xt & (xt - 1) != 0  # rows of XT < the power of two: masked (AVX-512), else power-of-two pieces
    assert ("llvm.masked.store" in fn.llvm_ir) == (ragged_rows and cpu_level == "x86-64-v4")


@pytest.mark.parametrize("spec,knobs", [
    # flat: 81 = 13 x 6 + 3; flat: 289 = 41 x 7 + 2, batch 2; rows: 10 = 3 x 3 + 1
    (S(1, 16, 9, 9, 16, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(16, 6, "none", 1, "rc_ky_kx")),
    (S(2, 16, 17, 17, 32, 1, 1), cd.CpuConvKnobs(32, 7, "fused", 1, "rc_ky_kx")),
    (S(1, 8, 7, 10, 8, 3, 3, (1, 1), (1, 1, 1, 1)), cd.CpuConvKnobs(8, 3, "outer", 1, "rc_ky_kx")),
])
@pytest.mark.parametrize("residual", [False, True])
def test_ragged_last_tile(spec, knobs, residual, cpu_level):
    """A ragged last tile (its stores guarded): the full tiles store transposed rows (XT of 6, 7, 3: masked rows on
    AVX-512, else pieces ending in a 2-lane store), the ragged one its rows one by one; exact."""
    ir = _run(spec, knobs, residual).llvm_ir
    assert ("llvm.masked.store" in ir) if cpu_level == "x86-64-v4" else ("store <2 x float>" in ir)


@pytest.mark.parametrize("rows,lanes", [(7, 16), (8, 16), (16, 16), (3, 8), (8, 8), (5, 8), (2, 16)])
def test_transposed_stores_in_registers(rows, lanes, cpu_level):
    """``y[c, p] = x[p, c] + r[c, p]`` with ``p`` unrolled around ``c`` vectorized: the stores (and the loads of
    ``r``, which step the same way) are rows through register transposes (no element loaded on its own); exact."""
    chans, pix = 2 * lanes, 3 * rows
    x = te.placeholder((pix, chans), "float32", "x")
    r = te.placeholder((chans, pix), "float32", "r")
    y = te.compute((chans, pix), lambda c, p: x[p, c] + r[c, p], name="y")
    s = create_schedule(y)
    c, p = s[y].leaf_iter_vars
    co, ci = s[y].split(c, lanes)
    po, pi = s[y].split(p, rows)
    s[y].reorder(co, po, pi, ci)
    s[y].unroll(pi)
    s[y].vectorize(ci)
    fn = build_op(s, args=[x, r, y])
    assert "load float," not in fn.llvm_ir and "shufflevector" in fn.llvm_ir
    # one scalar store per channel row only for an odd row's last piece (7 = 4 + 2 + 1) where no masked store
    assert fn.llvm_ir.count("store float ") == (lanes if rows % 2 and cpu_level != "x86-64-v4" else 0)
    xv = RNG.standard_normal((pix, chans)).astype(np.float32)
    rv = RNG.standard_normal((chans, pix)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(fn(xv, rv)), xv.T + rv)
