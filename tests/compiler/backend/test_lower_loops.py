"""Loop-IR lowering for the CPU/GPU targets: compute_at regions, cache_write/cache_read, inlining, reductions."""
import numpy as np
import pytest

import compiler
from compiler import te
from compiler.schedule import create_schedule
from compiler.backend.llvm.matmul import matmul_schedule, tile_sizes
from compiler.tir import TirError, lower_loops


def test_softmax_with_compute_at_inline_and_max_reduction():
    x = te.placeholder((7, 33), "float32", "x")
    k = te.reduce_axis(33, "k")
    mx = te.compute((7,), lambda i: te.max(x[i, k], axis=k), name="mx")
    e = te.compute((7, 33), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis(33, "k2")
    sm = te.compute((7,), lambda i: te.sum(e[i, k2], axis=k2), name="sm")
    y = te.compute((7, 33), lambda i, j: e[i, j] / sm[i], name="y")
    s = create_schedule(y)
    s[e].compute_inline()
    s[mx].compute_at(s[y], y.op.axes[0])
    s[sm].compute_at(s[y], y.op.axes[0])
    jo, ji = s[y].split(y.op.axes[1], 8)
    s[y].vectorize(ji)
    s[y].parallel(y.op.axes[0])
    f = compiler.build_op(s)
    ir = f.loop_ir
    assert "allocate local mx: float32[1]" in ir and "allocate local sm: float32[1]" in ir  # one row per iteration
    xv = np.random.default_rng(4).standard_normal((7, 33)).astype(np.float32) * 4
    ref = np.exp(xv - xv.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(f(xv), ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("m,n,k", [(50, 37, 29), (6, 16, 8), (64, 48, 130), (3, 5, 7), (7, 33, 4), (1, 1, 1)])
def test_matmul_schedule_any_size(m, n, k, cpu_level):
    """Packed B panel at compute_at, cache_write register tiles, ragged rows/columns, extents below one tile."""
    s, args = matmul_schedule(m, n, k)
    f = compiler.build_op(s, args=args)
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(f(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


# the register tile of a 64^3 matmul per feature level: 6 rows x 2 vectors of 4 (SSE), 8 (AVX2), 16 (AVX-512) floats
TILE_COLUMNS = {"x86-64-v2": 8, "x86-64-v3": 16, "x86-64-v4": 32}
VECTOR_REGISTER = {"x86-64-v2": "xmm", "x86-64-v3": "ymm", "x86-64-v4": "zmm"}


def test_cache_write_tile_stays_in_registers_size(cpu_level):
    bn = TILE_COLUMNS[cpu_level]
    s, args = matmul_schedule(64, 64, 64)
    text = compiler.backend.lower(s, args)
    assert f"allocate local C.local: float32[6, {bn}]" in text  # region = one bm x bn tile
    assert f"allocate local Bpack: float32[1, 64, {bn}]" in text  # one packed panel per column block
    f = compiler.build_op(s, args=args)
    assert f"<{bn // 2} x float>" in f.llvm_ir
    asm = f.asm()  # the accumulators are registers of the level's width
    assert VECTOR_REGISTER[cpu_level] in asm
    assert {"x86-64-v2": "ymm", "x86-64-v3": "zmm", "x86-64-v4": "nothing wider"}[cpu_level] not in asm


@pytest.mark.parametrize("m,n", [(6, 16), (1, 40), (64, 3), (5, 64)])
def test_matmul_tiles_never_exceed_the_extents(m, n, cpu_level):
    lanes = TILE_COLUMNS[cpu_level] // 2
    bm, vec, bn = tile_sizes(m, n)
    assert bm == min(6, m) and bn <= n and bn % vec == 0
    assert vec == (lanes if n >= lanes else n)  # one narrower vector when n is below a register
    assert bn == (min(2, n // lanes) * lanes if n >= lanes else n)


def test_matmul_tile_sizes_reject_bad_extents():
    with pytest.raises(ValueError, match="must be >= 1"):
        tile_sizes(0, 16)


def test_intermediate_root_stage_and_two_outputs_with_fuse():
    a = te.placeholder((6, 10), "int32", "a")
    t = te.compute((6, 10), lambda i, j: a[i, j] * 3 - 7, name="t")
    u = te.compute((6, 10), lambda i, j: t[i, j] // 4, name="u")
    v = te.compute((6, 10), lambda i, j: t[i, j] % 5, name="v")
    s = create_schedule([u, v])
    f_ = s[u].fuse(*u.op.axes)
    s[u].parallel(f_)
    f = compiler.build_op(s, args=[a, u, v])
    av = np.arange(-30, 30, dtype=np.int32).reshape(6, 10)
    uu, vv = f(av)
    tt = av * 3 - 7
    np.testing.assert_array_equal(uu, tt // 4)  # floor division, like numpy
    np.testing.assert_array_equal(vv, tt % 5)
    assert "temp t" in f.loop_ir


def test_cache_read_local_and_unroll_int16():
    a = te.placeholder((12, 20), "int16", "a")
    k = te.reduce_axis(20, "k")
    c = te.compute((12,), lambda i: te.min(a[i, k] * 2, axis=k), name="c")
    s = create_schedule(c)
    al = s.cache_read(a, "local", [c])
    io, ii = s[c].split(c.op.axes[0], 4)
    s[al].compute_at(s[c], io)
    s[c].unroll(ii)
    f = compiler.build_op(s)
    assert "allocate local a.local: int16[4, 20]" in f.loop_ir
    av = np.random.default_rng(5).integers(-20000, 20000, (12, 20)).astype(np.int16)
    ref = (av.astype(np.int32) * 2).min(1)  # int16 * an int32 constant is int32 in TE (no wrap)
    out = f(av)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out, te.evaluate(c, {a: av}))


def test_math_functions_and_rounding():
    x = te.placeholder((16,), "float32", "x")
    y = te.compute((16,), lambda i: te.sqrt(te.abs_(x[i])) + te.tanh(x[i]) + te.round_(x[i] * 2.0), name="y")
    q = te.compute((16,), lambda i: te.clip(te.round_(x[i] * 10.0).astype("int32"), -128, 127).astype("int8"),
                   name="q")
    s = create_schedule([y, q])
    s[y].vectorize(y.op.axes[0])
    f = compiler.build_op(s, args=[x, y, q])
    xv = np.array([-3.25, -2.5, -1.5, -0.75, -0.25, 0, 0.25, 0.5, 1.25, 1.5, 2.5, 3.75, 7.0, 12.85, -12.85, 0.05],
                  np.float32)
    yv, qv = f(xv)
    np.testing.assert_allclose(yv, np.sqrt(np.abs(xv)) + np.tanh(xv) + np.rint(xv * 2), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(qv, np.clip(np.rint(xv * 10), -128, 127).astype(np.int8))


def test_lowering_errors():
    a = te.placeholder((8,), "float32", "a")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="b")
    c = te.compute((8,), lambda i: b[i] + 1.0, name="c")
    s = create_schedule(c)
    with pytest.raises(TirError, match="not in args"):
        compiler.build_op(s, args=[c])
    with pytest.raises(TirError, match="neither placeholders nor outputs"):
        compiler.build_op(s, args=[a, b, c])
    with pytest.raises(TirError, match="cannot be compute_inline"):
        s2 = create_schedule(c)
        s2[c].compute_inline()
        compiler.build_op(s2)


@pytest.mark.parametrize("vec", [False, True])
def test_padding_select_never_reads_out_of_bounds(vec):
    """A padded copy reads x[i - 2] under a select: the read must be safe at the borders (zero-padding semantics)."""
    n, pad = 4000, 2
    x = te.placeholder((n,), "float32", "x")
    y = te.compute((n + 2 * pad,), lambda i: te.select((i >= pad) & (i < n + pad), x[i - pad], 0.0), name="y")
    s = create_schedule(y)
    if vec:
        o, i = s[y].split(y.op.axes[0], 8)
        s[y].vectorize(i)
    f = compiler.build_op(s)
    xv = np.arange(1, n + 1, dtype=np.float32)
    np.testing.assert_array_equal(f(xv), np.pad(xv, pad))
    assert f"i64 {n - 1}" in f.llvm_ir  # the read index is clamped to the last element of x


def test_compute_at_with_a_reader_outside_the_attach_point_is_rejected():
    a = te.placeholder((8,), "float32", "a")
    p = te.compute((8,), lambda i: a[i] * 2.0, name="p")
    c = te.compute((8,), lambda i: p[i] + 1.0, name="c")
    d = te.compute((8,), lambda i: p[i] - c[i], name="d")  # reads p outside c's loops
    s = create_schedule(d)
    s[p].compute_at(s[c], c.op.axes[0])
    with pytest.raises(TirError, match="does not run inside c's loop"):
        compiler.build_op(s)


def test_accelerator_schedules_are_refused_with_a_reason():
    a = te.placeholder((8, 8), "int8", "a")
    c = te.compute((8, 8), lambda i, j: a[i, j].astype("int32") * 2, name="c", dtype="int32")
    s = create_schedule(c)
    s.cache_read(a, "inp", [c])
    with pytest.raises(TirError, match="accelerator features .*scope 'inp'"):
        compiler.build_op(s)


def test_value_arithmetic_on_loop_vars_is_simplified_like_indices():
    """``(2 * yo + yi) % 2`` in a stored value (after splitting y by 2) lowers to ``yi``, so an unrolled ``yi`` makes
    it a constant (the Winograd output transform's signs); an odd extent keeps the guard and the right values."""
    for rows in (6, 7):
        x = te.placeholder((rows, 4), "float32", "x")
        y = te.compute((rows, 4), lambda i, j: x[i, j] * (1.0 - (i % 2).astype("float32") * 2.0), name="y")
        s = create_schedule(y)
        io, ii = s[y].split(y.op.axes[0], 2)
        s[y].unroll(ii)
        f = compiler.build_op(s)
        if rows % 2 == 0:
            assert "% 2" not in f.loop_ir, f.loop_ir
        xv = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        np.testing.assert_array_equal(f(xv), xv * np.where(np.arange(rows) % 2, -1.0, 1.0)[:, None])
