"""The tensor expression language: building expressions and evaluating them exactly."""
import numpy as np
import pytest

from compiler import te


def test_compute_reduce_cast_shift_clip():
    a = te.placeholder((3, 5), "int8", "a")
    k = te.reduce_axis(5, "k")
    s = te.compute((3,), lambda i: te.sum(a[i, k].astype("int32") * 3, k), name="s")
    r = te.compute((3,), lambda i: te.clip((s[i] + 4) >> 3, -2, 7).astype("int8"), name="r")
    av = np.arange(15, dtype=np.int8).reshape(3, 5) - 7
    exp = np.clip((av.astype(np.int64).sum(1) * 3 + 4) >> 3, -2, 7).astype(np.int8)
    assert np.array_equal(te.evaluate(r, {a: av}), exp)


def test_cast_wraps_and_select():
    a = te.placeholder((4,), "int32", "a")
    b = te.compute((4,), lambda i: te.select(a[i] > 0, a[i], 0).astype("int8"), name="b")
    av = np.array([300, -5, 127, 129], np.int32)
    assert list(te.evaluate(b, {a: av})) == [44, 0, 127, -127]


def test_uint8_wraps_and_widens_with_zeros():
    """uint8 (the u8 operand of int8 dot products): casts to it wrap modulo 256, widening zero-extends; the llvm
    target computes the same (vectorized and scalar)."""
    import compiler
    from compiler.schedule import create_schedule

    a = te.placeholder((16,), "int8", "a")
    u = te.compute((16,), lambda i: (a[i].astype("int16") + te.const(128, "int16")).astype("uint8"), name="u",
                   dtype="uint8")
    y = te.compute((16,), lambda i: u[i].astype("int32") * 3 - te.const(200, "uint8").astype("int32"), name="y")
    av = np.array([-128, -1, 0, 1, 127] + list(range(-60, 50, 10)), np.int8)
    want_u = (av.astype(np.int64) + 128).astype(np.uint8)
    want = want_u.astype(np.int64) * 3 - 200
    assert te.evaluate(u, {a: av}).dtype == np.uint8 and np.array_equal(te.evaluate(u, {a: av}), want_u)
    assert np.array_equal(te.evaluate(y, {a: av}), want)
    for vec in (False, True):
        s = create_schedule(y)
        if vec:
            s[u].vectorize(s[u].leaf_iter_vars[0])
            s[y].vectorize(s[y].leaf_iter_vars[0])
        assert np.array_equal(compiler.build_op(s, args=[a, y])(av), want)


def test_errors():
    a = te.placeholder((2, 2), "int8", "a")
    with pytest.raises(te.TeError, match="indexed with 1"):
        a[0]
    with pytest.raises(te.TeError, match="takes 1 indices"):
        te.compute((2, 2), lambda i: a[i, i])
    with pytest.raises(te.TeError, match="not a reduce axis"):
        te.sum(a[0, 0], te.IterVar("x", 2))
    with pytest.raises(te.TeError, match="no truth value"):
        bool(a[0, 0] > 1)
    with pytest.raises(te.TeError, match="clip"):
        te.clip(a[0, 0], 3, 1)
