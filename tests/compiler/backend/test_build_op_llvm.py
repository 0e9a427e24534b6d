"""TE -> loop IR -> LLVM: operators written in TE, scheduled for the CPU and checked against numpy."""
import numpy as np
import pytest

import compiler
from compiler import te
from compiler.schedule import ScheduleError, create_schedule
from compiler.backend import OpInputError
from compiler.tir import TirError


def _fused_reduce(n=40, m=45):
    a = te.placeholder((n, m), "float32", "a")
    b = te.placeholder((m,), "float32", "b")
    k = te.reduce_axis(m, "k")
    c = te.compute((n,), lambda i: te.sum(te.max(a[i, k] * 2.0 + b[k], 0.0), axis=k), name="c")
    return a, b, c


def test_elementwise_fused_into_reduction_scheduled():
    """sum_k relu(a[i,k]*2+b[k]) with split (ragged reduce loop), reorder, vectorize, unroll and parallel."""
    a, b, c = _fused_reduce()
    s = create_schedule(c)
    io, ii = s[c].split(c.op.axes[0], 8)
    ko, ki = s[c].split(s[c].reduce_axis[0], 4)
    s[c].reorder(io, ko, ki, ii)
    s[c].vectorize(ii)
    s[c].unroll(ki)
    s[c].parallel(io)
    f = compiler.build_op(s, target="llvm")
    rng = np.random.default_rng(0)
    av = rng.standard_normal((40, 45)).astype(np.float32)
    bv = rng.standard_normal(45).astype(np.float32)
    ref = np.maximum(av * 2 + bv, 0).sum(1)
    np.testing.assert_allclose(f(av, bv), ref, rtol=1e-5, atol=1e-5)
    assert "parallel" in f.loop_ir and "vectorize" in f.loop_ir and "unroll" in f.loop_ir
    assert "<8 x float>" in f.llvm_ir


def test_int8_to_int32_accumulation_is_exact():
    n, m, kk = 13, 24, 300  # 300 * 127 * 127 overflows int16, fits int32
    a = te.placeholder((n, kk), "int8", "a")
    w = te.placeholder((m, kk), "int8", "w")
    k = te.reduce_axis(kk, "k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, k].astype("int32") * w[j, k].astype("int32"), axis=k),
                   name="c", dtype="int32")
    s = create_schedule(c)
    jo, ji = s[c].split(c.op.axes[1], 8)
    s[c].reorder(c.op.axes[0], jo, k, ji)
    s[c].vectorize(ji)
    s[c].parallel(c.op.axes[0])
    f = compiler.build_op(s)
    rng = np.random.default_rng(1)
    av = rng.integers(-128, 128, (n, kk), dtype=np.int8)
    wv = rng.integers(-128, 128, (m, kk), dtype=np.int8)
    ref = av.astype(np.int64) @ wv.astype(np.int64).T
    out = f(av, wv)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref)


def test_int8_requantize_wraps_like_numpy():
    x = te.placeholder((64,), "int32", "x")
    y = te.compute((64,), lambda i: te.clip((x[i] * 3 + 5) >> 2, -128, 127).astype("int8"), name="y")
    s = create_schedule(y)
    o, i = s[y].split(y.op.axes[0], 16)
    s[y].vectorize(i)
    f = compiler.build_op(s)
    xv = np.random.default_rng(2).integers(-1000, 1000, 64).astype(np.int32)
    ref = np.clip((xv.astype(np.int64) * 3 + 5) >> 2, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(f(xv), ref)


def test_bad_inputs_get_clear_errors():
    a, b, c = _fused_reduce(4, 5)
    f = compiler.build_op(create_schedule(c))
    av, bv = np.zeros((4, 5), np.float32), np.zeros(5, np.float32)
    with pytest.raises(OpInputError, match="expected 2 input arrays"):
        f(av)
    with pytest.raises(OpInputError, match="dtype float32, got float64"):
        f(av.astype(np.float64), bv)
    with pytest.raises(OpInputError, match=r"shape \(5,\), got \(6,\)"):
        f(av, np.zeros(6, np.float32))
    with pytest.raises(OpInputError, match="numpy array"):
        f(av, [0.0] * 5)
    with pytest.raises(TirError, match="unknown target"):
        compiler.build_op(create_schedule(c), target="opencl")


def test_bad_schedule_primitives():
    a, b, c = _fused_reduce(4, 5)
    s = create_schedule(c)
    with pytest.raises(ScheduleError, match="reduce loop"):
        s[c].parallel(s[c].reduce_axis[0])
    with pytest.raises(ScheduleError, match="reduce loop"):
        s[c].vectorize(s[c].reduce_axis[0])
    s[c].unroll(s[c].reduce_axis[0])
    with pytest.raises(ScheduleError, match="already marked 'unroll'; split first"):
        s[c].split(s[c].reduce_axis[0], 2)
    with pytest.raises(ScheduleError, match="unknown thread tag"):
        s[c].bind(c.op.axes[0], "warp.x")
    s[c].bind(c.op.axes[0], "threadIdx.x")
    with pytest.raises(TirError, match="target='cuda'"):
        compiler.build_op(s, target="llvm")


def test_ragged_vectorized_loop_keeps_vectors_and_is_exact():
    """A vectorized loop whose split is ragged: full vectors where every lane is in range, lane by lane at the end."""
    n = 37
    x = te.placeholder((3, n), "int8", "x")
    y = te.compute((3, n), lambda i, j: (x[i, j].astype("int32") * 5 + j).astype("int8"), name="y")
    s = create_schedule(y)
    jo, ji = s[y].split(y.op.axes[1], 8)
    s[y].vectorize(ji)
    f = compiler.build_op(s)
    assert "<8 x i8>" in f.llvm_ir
    xv = np.random.default_rng(6).integers(-128, 128, (3, n), dtype=np.int8)
    ref = (xv.astype(np.int32) * 5 + np.arange(n)).astype(np.int8)
    np.testing.assert_array_equal(f(xv), ref)


def test_parallel_ops_called_from_several_python_threads():
    """Each launch waits for its own chunks: concurrent calls from Python threads give exact results."""
    from concurrent.futures import ThreadPoolExecutor

    from compiler.backend import set_num_threads

    x = te.placeholder((64, 256), "int32", "x")
    y = te.compute((64, 256), lambda i, j: x[i, j] * 7 + i, name="y")
    s = create_schedule(y)
    s[y].parallel(y.op.axes[0])
    f = compiler.build_op(s)
    set_num_threads(3)
    try:
        xs = [np.full((64, 256), v, np.int32) for v in range(12)]
        with ThreadPoolExecutor(4) as ex:
            outs = list(ex.map(f, xs))
    finally:
        set_num_threads(None)
    for v, o in zip(range(12), outs):
        np.testing.assert_array_equal(o, np.broadcast_to(v * 7 + np.arange(64)[:, None], (64, 256)))


def test_a_bound_call_outlives_its_op():
    """``CpuOp.bind``'s call keeps the op (its code and this thread's scratch buffers) alive: calls made after the
    caller dropped the op write only the output (a dropped op freed a padded copy the kernel kept writing)."""
    import gc
    import weakref

    x = te.placeholder((4, 30), "float32", "x")
    pad = te.compute((4, 40), lambda i, j: te.select(j < 30, x[i, j % 30], te.const(0.0, "float32")), name="pad")
    y = te.compute((4, 30), lambda i, j: pad[i, j] + pad[i, j + 10] * 2, name="y")
    s = create_schedule(y)
    f = compiler.build_op(s, args=[x, y])
    assert f.func.temps  # the padded copy is the kernel's scratch buffer
    xv = np.arange(120, dtype=np.float32).reshape(4, 30)
    out = np.zeros((4, 30), np.float32)
    call = f.bind(xv, out=out)
    op = weakref.ref(f)
    del f
    gc.collect()
    assert op() is not None  # with its scratch buffers
    junk = [np.full(40 * 4, 7.0, np.float32) for _ in range(64)]
    call()
    want = xv + 2 * np.concatenate([xv[:, 10:], np.zeros((4, 10), np.float32)], axis=1)
    np.testing.assert_array_equal(out, want)
    assert all((j == 7.0).all() for j in junk)
    del call
    gc.collect()
    assert op() is None


def test_structurally_equal_ops_share_one_kernel():
    from compiler.backend.build import compiled_count

    def op(name, scale):
        x = te.placeholder((16, 24), "float32", f"{name}_x")
        y = te.compute((16, 24), lambda i, j: x[i, j] * scale, name=f"{name}_y")
        s = create_schedule(y)
        s[y].vectorize(s[y].split(y.op.axes[1], 8)[1])
        return compiler.build_op(s)

    before = compiled_count()
    f1, f2, f3 = op("a", 3.0), op("b", 3.0), op("c", 5.0)  # a and b differ only in names; c in a constant
    assert compiled_count() == before + 2
    xv = np.arange(16 * 24, dtype=np.float32).reshape(16, 24)
    np.testing.assert_array_equal(f2(xv), xv * 3)
    np.testing.assert_array_equal(f3(xv), xv * 5)
    assert f1.symbol == f2.symbol != f3.symbol


def test_native_hand_off_runs_every_chunk_once():
    """On x86 parallel loops go through the native record (generation bumps); every row is written exactly once."""
    import platform

    from compiler.backend import set_num_threads
    from compiler.backend.llvm import parallel

    x = te.placeholder((101, 8), "int32", "x")
    y = te.compute((101, 8), lambda i, j: x[i, j] + i * 1000, name="y")
    s = create_schedule(y)
    s[y].parallel(y.op.axes[0])
    f = compiler.build_op(s)
    set_num_threads(2)
    try:
        before = parallel.generation()
        for v in range(200):
            xv = np.full((101, 8), v, np.int32)
            np.testing.assert_array_equal(f(xv), np.broadcast_to(v + np.arange(101)[:, None] * 1000, (101, 8)))
    finally:
        set_num_threads(None)
    import os

    x86 = platform.machine().lower() in ("x86_64", "amd64")
    assert parallel._NATIVE == (x86 and os.environ.get("VTA_NATIVE_POOL", "1") != "0")
    assert parallel.generation() - before == (200 if parallel._NATIVE else 0)


def test_wake_workers_gets_a_worker_spinning():
    """``wake_workers`` (a Module run's first step on llvm) hands the idle worker the native spin (so the next
    parallel loop's launch finds it spinning), which it takes; one thread wakes nobody, and wakes while the worker
    cannot start (this thread holds the GIL) queue one spin, not one each."""
    import time

    from compiler.backend import set_num_threads
    from compiler.backend.llvm import parallel
    from compiler.backend.llvm.native_pool import PARKED, SPINNING, WAKES

    if not parallel._NATIVE:
        pytest.skip("the native hand-off is x86 only")
    set_num_threads(1)
    try:
        queued = parallel._pool.jobs.qsize()
        parallel.wake_workers()  # no worker for one thread: nothing queued
        assert parallel._pool.jobs.qsize() == queued
        set_num_threads(2)
        deadline = time.monotonic() + 30
        while True:  # earlier tests' spins end; WAKES and PARKED read before SPINNING is seen 0 (a worker counts
            # itself spinning before it counts its wake: none of it slips in between)
            wakes, parked = parallel._record[WAKES], parallel._record[PARKED]
            if parallel._record[SPINNING] == 0:
                break
            assert time.monotonic() < deadline, "earlier tests' workers still spin"
            time.sleep(0.01)
        queued = parallel._pool.jobs.qsize()  # a spin job may wait there while the worker is parked natively
        for _ in range(50):
            parallel.wake_workers()
        assert parallel._pool.jobs.qsize() <= max(queued, 1)
        if parked:  # woken through the futex: it leaves the park (and may spin its ~3 ms and park again unseen)
            while parallel._record[WAKES] == wakes and time.monotonic() < deadline:
                time.sleep(0.001)
            assert parallel._record[WAKES] > wakes
        else:  # the worker takes it (one on its way into native code when it was queued takes it before parking)
            while parallel._pool.jobs.qsize() and time.monotonic() < deadline:
                time.sleep(0.001)
            assert parallel._pool.jobs.qsize() == 0
    finally:
        set_num_threads(None)
