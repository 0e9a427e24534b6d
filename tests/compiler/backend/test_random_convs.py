"""Random padded/strided 2-d window reductions (conv-like) under random CPU and GPU schedules vs te.evaluate."""
import random

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.backend.cuda.nvcc import have_ptxas
from compiler.schedule import ScheduleError, create_schedule
from tests.compiler.gpu_on_cpu import serial_on_cpu

_FUNCS = [lambda v: v, te.exp, lambda v: te.tanh(v) * 2.0, lambda v: te.abs_(v) // 0.5]


def _program(rng: random.Random):
    n, m, p = rng.randint(2, 16), rng.randint(2, 16), rng.randint(0, 2)
    a = te.placeholder((n, m), "float32", "a")
    pad = te.compute((n + 2 * p, m + 2 * p), lambda i, j: te.select((i >= p) & (i < n + p) & (j >= p) & (j < m + p),
                                                                     a[i - p, j - p], 0.0), name="pad")
    k, s = min(rng.randint(1, 3), n + 2 * p, m + 2 * p), rng.randint(1, 2)
    oh, ow = (n + 2 * p - k) // s + 1, (m + 2 * p - k) // s + 1
    ry, rx = te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    f, red = rng.choice(_FUNCS), rng.choice([te.sum, te.max])
    c = te.compute((oh, ow), lambda y, x: red(f(pad[y * s + ry, x * s + rx]) * 0.5, axis=[ry, rx]), name="c")
    return a, pad, c


def _cpu_schedule(rng: random.Random, s, pad, c) -> None:
    st = s[c]
    for _ in range(rng.randint(0, 2)):
        lv = rng.choice([v for v in st.leaf_iter_vars if v.kind == "data"])
        if lv.extent > 1:
            st.split(lv, rng.randint(1, lv.extent))
    data = [v for v in st.leaf_iter_vars if v.kind == "data"]
    red = [v for v in st.leaf_iter_vars if v.kind == "reduce"]
    if rng.random() < 0.5:
        k = rng.randint(0, len(data) - 1)
        st.reorder(*data[:k], *red, *data[k:])
    if st.leaf_iter_vars[-1].kind == "data" and rng.random() < 0.6:
        st.vectorize(st.leaf_iter_vars[-1])
    if st.leaf_iter_vars[0].kind == "data" and rng.random() < 0.5:
        st.parallel(st.leaf_iter_vars[0])
    x = rng.random()
    if x < 0.4:
        s[pad].compute_inline()
    elif x < 0.8:
        s[pad].compute_at(st, rng.choice(st.leaf_iter_vars))


def _gpu_schedule(rng: random.Random, s, pad, c) -> None:
    st = s[c]
    y, x = c.op.axes
    yo, yi = st.split(y, rng.randint(1, y.extent))
    xo, xi = st.split(x, rng.randint(1, x.extent))
    st.reorder(yo, xo, yi, xi, *c.op.reduce_axes)
    for iv, tag in ((yo, "blockIdx.y"), (xo, "blockIdx.x"), (yi, "threadIdx.y"), (xi, "threadIdx.x")):
        st.bind(iv, tag)
    if rng.random() < 0.4:
        s[pad].compute_inline()
    else:
        f = s[pad].fuse(*pad.op.axes)
        o, i = s[pad].split(f, min(f.extent, rng.choice([32, 64, 128])))
        s[pad].bind(o, "blockIdx.x")
        s[pad].bind(i, "threadIdx.x")


def _input(a, seed):
    return np.random.default_rng(seed).standard_normal(a.shape).astype(np.float32)


@pytest.mark.parametrize("seed", range(20))
def test_random_window_reduction_cpu(seed):
    rng = random.Random(seed)
    a, pad, c = _program(rng)
    s = create_schedule(c)
    try:
        _cpu_schedule(rng, s, pad, c)
    except ScheduleError:
        pytest.skip("the random schedule is invalid (rejected when applied)")
    av = _input(a, seed)
    np.testing.assert_allclose(compiler.build_op(s, args=[a, c])(av), te.evaluate(c, {a: av}), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", range(6))
def test_random_window_reduction_gpu_compiles_and_lowers_right(seed):
    """Bound to blocks/threads: PTX is produced (and assembled with ptxas if present); the loop IR, run serially on
    the CPU, computes the reference values."""
    a, pad, c = _program(random.Random(seed))

    def schedule():
        s = create_schedule(c)
        _gpu_schedule(random.Random(seed + 7), s, pad, c)
        return s

    op = compiler.build_op(schedule(), target="cuda", args=[a, c])
    assert all(f".entry {k.name}" in op.ptx for k in op.kernels)
    if have_ptxas():
        op.assemble()
    av = _input(a, seed)
    np.testing.assert_allclose(serial_on_cpu(schedule(), [a, c])(av), te.evaluate(c, {a: av}), rtol=1e-4, atol=1e-4)
