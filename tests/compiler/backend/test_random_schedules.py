"""Random TE programs under random CPU schedules, compiled with build_op and checked against te.evaluate."""
import random

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.schedule import ScheduleError, create_schedule


def _program(rng: random.Random):
    n, m = rng.randint(1, 20), rng.randint(1, 20)
    dt = rng.choice(["float32", "int32", "int8"])
    acc = "float32" if dt == "float32" else "int32"
    a = te.placeholder((n, m), dt, "a")
    b = te.placeholder((m,), dt, "b")

    def cv(x):
        return x.astype(acc) if dt != acc else x

    kind = rng.choice(["elementwise", "reduce", "chain"])
    t = None
    if kind == "elementwise":
        c = te.compute((n, m), lambda i, j: te.max(cv(a[i, j]) * 3 + cv(b[j]), cv(a[i, j])), name="c", dtype=acc)
    elif kind == "reduce":
        k = te.reduce_axis(m, "k")
        red = rng.choice([te.sum, te.max, te.min])
        c = te.compute((n,), lambda i: red(cv(a[i, k]) * 2 - cv(b[k]), axis=k), name="c", dtype=acc)
    else:
        t = te.compute((n, m), lambda i, j: cv(a[i, j]) + cv(b[j]), name="t", dtype=acc)
        k = te.reduce_axis(m, "k")
        c = te.compute((n,), lambda i: te.sum(t[i, k] * 2, axis=k), name="c", dtype=acc)
    return a, b, c, t, dt


def _schedule(rng: random.Random, s, c, t) -> None:
    if rng.random() < 0.3:  # register/stack tile of the output, computed inside a split output loop
        cc = s.cache_write(c, "local")
        out = s[c]
        lv = out.leaf_iter_vars[0]
        at = out.split(lv, rng.randint(1, lv.extent))[0] if lv.extent > 1 else lv
        s[cc].compute_at(out, at)
        if rng.random() < 0.5:
            out.vectorize(out.leaf_iter_vars[-1])
        if rng.random() < 0.5:
            out.parallel(out.leaf_iter_vars[0])
        c = cc
    st = s[c]
    if len(st.leaf_iter_vars) >= 2 and rng.random() < 0.3:
        x, y = st.leaf_iter_vars[:2]
        if x.kind == y.kind:
            st.fuse(x, y)
    for _ in range(rng.randint(0, 3)):
        lv = rng.choice(st.leaf_iter_vars)
        if lv.extent > 1:
            st.split(lv, rng.randint(1, lv.extent))
    leaves = list(st.leaf_iter_vars)
    if rng.random() < 0.5:
        rng.shuffle(leaves)
        st.reorder(*leaves)
    inner, outer = st.leaf_iter_vars[-1], st.leaf_iter_vars[0]
    if inner.kind == "data" and rng.random() < 0.5:
        st.vectorize(inner)
    if outer.kind == "data" and outer not in st.loop_kinds and rng.random() < 0.5:
        st.parallel(outer)
    for lv in st.leaf_iter_vars:
        if lv not in st.loop_kinds and lv.extent <= 4 and rng.random() < 0.3:
            st.unroll(lv)
    if t is not None:
        r = rng.random()
        if r < 0.3:
            s[t].compute_inline()
        elif r < 0.7:
            s[t].compute_at(st, rng.choice(st.leaf_iter_vars))
            if rng.random() < 0.5:
                s[t].vectorize(s[t].leaf_iter_vars[-1])


@pytest.mark.parametrize("seed", [*range(30), 437])  # 437: a 10-lane vector loop (LLVM broke on <10 x float>)
def test_random_program_matches_te_evaluate(seed):
    rng = random.Random(seed)
    a, b, c, t, dt = _program(rng)
    s = create_schedule(c)
    try:
        _schedule(rng, s, c, t)
    except ScheduleError:
        pytest.skip("the random schedule is invalid (rejected when applied)")
    nr = np.random.default_rng(seed)
    if dt == "float32":
        av, bv = nr.standard_normal(a.shape).astype(np.float32), nr.standard_normal(b.shape).astype(np.float32)
    else:
        av, bv = nr.integers(-100, 100, a.shape).astype(dt), nr.integers(-100, 100, b.shape).astype(dt)
    got = compiler.build_op(s, args=[a, b, c])(av, bv)
    ref = te.evaluate(c, {a: av, b: bv})
    if dt == "float32":
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_array_equal(got, ref)
