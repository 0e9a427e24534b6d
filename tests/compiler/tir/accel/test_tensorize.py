"""Tensorize proves the loop body equals the GEMM declaration after splits/reorders, or names the mismatch."""
import numpy as np
import pytest

from compiler import te
from compiler.backend.accel import build
from compiler.tir.accel import TensorizeError
from compiler.schedule import create_schedule
from isa import make_config
from isa.intrinsics import gemm_intrinsic

CFG = make_config("tiny")  # 4x4 blocks keep the loops small


def _dense(nb=2, kb=3, mb=2):
    B, BI, BO = CFG.batch, CFG.block_in, CFG.block_out
    x = te.placeholder((nb, kb, B, BI), "int8", "x")
    w = te.placeholder((mb, kb, BO, BI), "int8", "w")
    k = te.reduce_axis(kb, "k")
    i = te.reduce_axis(BI, "i")
    acc = te.compute((nb, mb, B, BO), lambda n, m, b, o: te.sum(
        x[n, k, b, i].astype("int32") * w[m, k, o, i].astype("int32"), [k, i]), name="acc")
    out = te.compute(acc.shape, lambda *a: acc[a].astype("int8"), name="out")
    s = create_schedule(out)
    xc = s.cache_read(x, "inp", [acc])
    wc = s.cache_read(w, "wgt", [acc])
    s[acc].set_scope("acc")
    n, m, b, o = s[out].leaf_iter_vars
    s[out].pragma(b, "dma_copy")
    s[acc].compute_at(s[out], m)
    s[xc].compute_at(s[out], m)
    s[wc].compute_at(s[out], m)
    return x, w, acc, out, s


def test_plain_tensorize_runs():
    x, w, acc, out, s = _dense()
    sa = s[acc]
    n, m, b, o, k, i = sa.leaf_iter_vars
    sa.reorder(n, m, k, b, o, i)
    sa.tensorize(b, gemm_intrinsic(CFG))
    _check(x, w, out, s)


def test_split_and_reorder_before_tensorize_still_tensorizes():
    x, w, acc, out, s = _dense()
    sa = s[acc]
    n, m, b, o, k, i = sa.leaf_iter_vars
    io, ii = sa.split(i, 2)          # split the intrinsic's reduce axis...
    sa.reorder(n, m, k, o, ii, b, io)  # ...and scramble the order inside the region
    sa.tensorize(o, gemm_intrinsic(CFG))
    _check(x, w, out, s)


def test_split_axis_half_outside_names_the_loop():
    x, w, acc, out, s = _dense()
    sa = s[acc]
    n, m, b, o, k, i = sa.leaf_iter_vars
    io, ii = sa.split(i, 2)
    sa.reorder(n, m, k, io, b, o, ii)
    with pytest.raises(TensorizeError, match=r"loop 'i.inner'.*'i.outer' is outside"):
        sa.tensorize(b, gemm_intrinsic(CFG))


def test_extra_loop_inside_region_names_the_loop():
    x, w, acc, out, s = _dense()
    sa = s[acc]
    n, m, b, o, k, i = sa.leaf_iter_vars
    sa.reorder(n, m, b, o, k, i)
    with pytest.raises(TensorizeError, match=r"loop 'k' .* matches no axis"):
        sa.tensorize(b, gemm_intrinsic(CFG))


def test_reorder_after_tensorize_rechecks():
    x, w, acc, out, s = _dense()
    sa = s[acc]
    n, m, b, o, k, i = sa.leaf_iter_vars
    sa.reorder(n, m, k, b, o, i)
    sa.tensorize(b, gemm_intrinsic(CFG))
    with pytest.raises(TensorizeError, match="loop 'k'"):
        sa.reorder(n, m, b, k, o, i)


def test_wrong_extent_names_the_loop():
    B, BI = CFG.batch, CFG.block_in
    x = te.placeholder((1, 1, B, BI * 2), "int8", "x")
    w = te.placeholder((1, 1, 4, BI * 2), "int8", "w")
    i = te.reduce_axis(BI * 2, "i")
    acc = te.compute((1, 1, B, 4), lambda n, m, b, o: te.sum(x[n, 0, b, i].astype("int32") * w[m, 0, o, i].astype("int32"), i), name="acc")
    s = create_schedule(acc)
    n, m, b, o, ii = s[acc].leaf_iter_vars
    with pytest.raises(TensorizeError, match=r"loop 'i' \(axis i, extent 8\) plays intrinsic gemm axis i, whose extent is 4"):
        s[acc].tensorize(b, gemm_intrinsic(CFG))


def test_not_a_product_is_rejected():
    x = te.placeholder((1, 1, 1, 4), "int8", "x")
    i = te.reduce_axis(4, "i")
    acc = te.compute((1, 1, 1, 4), lambda n, m, b, o: te.sum(x[n, 0, b, i].astype("int32"), i), name="acc")
    s = create_schedule(acc)
    with pytest.raises(TensorizeError, match="not a product"):
        s[acc].tensorize(s[acc].leaf_iter_vars[2], gemm_intrinsic(CFG))


def _check(x, w, out, s):
    mod = build(s, CFG)
    rng = np.random.default_rng(0)
    xv = rng.integers(-128, 128, x.shape).astype(np.int8)
    wv = rng.integers(-128, 128, w.shape).astype(np.int8)
    got, _ = mod.run({x: xv, w: wv}, device="sim-functional")
    assert np.array_equal(got, te.evaluate(out, {x: xv, w: wv}))


def _bad(xshape, wshape, oshape, body, xs="inp"):
    """A GEMM-like stage with the given layouts, reordered so the region is (b, o, i) after (n, m, k)."""
    x = te.placeholder(xshape, "int8", "x")
    w = te.placeholder(wshape, "int8", "w")
    k = te.reduce_axis(3, "k")
    i = te.reduce_axis(CFG.block_in, "i")
    acc = te.compute(oshape, lambda n, m, p, q: body(x, w, n, m, p, q, k, i), name="acc")
    s = create_schedule(acc)
    s.cache_read(x, xs, [acc])
    s.cache_read(w, "wgt", [acc])
    s[acc].set_scope("acc")
    sa = s[acc]
    n, m, p, q, k_, i_ = sa.leaf_iter_vars
    sa.reorder(n, m, k_, p, q, i_)
    return sa, p


def test_generic_matcher_names_the_wrong_dimension():
    """GEMM goes through the one declaration-driven matcher; its errors name the loop and the dimension."""
    B, BI, BO = CFG.batch, CFG.block_in, CFG.block_out
    mul = lambda a, b: a.astype("int32") * b.astype("int32")  # noqa: E731
    sa, p = _bad((2, 3, BI, B), (2, 3, BO, BI), (2, 2, B, BO),  # inp element stored (i, b)
                 lambda x, w, n, m, p, q, k, i: te.sum(mul(x[n, k, i, p], w[m, k, q, i]), [k, i]))
    with pytest.raises(TensorizeError, match=r"loop 'p' plays intrinsic axis b and must index dimension 2 \(element "
                                             r"dimension 0\) of the inp operand x.inp, but it indexes dimension 3"):
        sa.tensorize(p, gemm_intrinsic(CFG))
    sa, p = _bad((2, BI, B, 3), (2, 3, BO, BI), (2, 2, B, BO),  # i indexes a batch-of-rows dimension of x
                 lambda x, w, n, m, p, q, k, i: te.sum(mul(x[n, i, p, k], w[m, k, q, i]), [k, i]))
    with pytest.raises(TensorizeError, match=r"loop 'i' plays intrinsic axis i and must index dimension 3 .* of the "
                                             r"inp operand x.inp, but it indexes dimension 1"):
        sa.tensorize(p, gemm_intrinsic(CFG))
    sa, p = _bad((2, 3, B, BI), (2, 3, BO, BI), (2, 2, BO, B),  # output element stored (o, b)
                 lambda x, w, n, m, p, q, k, i: te.sum(mul(x[n, k, q, i], w[m, k, p, i]), [k, i]))
    with pytest.raises(TensorizeError, match=r"loop 'p' \(axis p, extent 4\) plays intrinsic gemm axis b, whose extent "
                                             r"is 1 \(it indexes dimension 2 of acc.*output axes \(b, o\) index the last 2"):
        sa.tensorize(p, gemm_intrinsic(CFG))
    sa, p = _bad((2, 3, B, BI), (2, 3, BO, BI), (2, 2, B, BO),
                 lambda x, w, n, m, p, q, k, i: te.sum(mul(x[n, k, p, i], w[m, k, q, i]), [k, i]), xs="acc")
    with pytest.raises(TensorizeError, match=r"x.acc is in scope 'acc' but intrinsic gemm reads its inp operand from "
                                             r"'inp'; cache_read it into 'inp'"):
        sa.tensorize(p, gemm_intrinsic(CFG))


def test_same_matcher_for_another_declaration_names_the_extra_reduction():
    """The depthwise declaration has no reduction: a GEMM body's reduction loop is named as the misfit."""
    from isa.intrinsics import intrinsics

    x, w, acc, out, s = _dense()
    sa = s[acc]
    n, m, b, o, k, i = sa.leaf_iter_vars
    sa.reorder(n, m, k, b, o, i)
    with pytest.raises(TensorizeError, match=r"loop 'i' \(axis i, extent 4\) .* matches no axis of intrinsic dwmac "
                                             r"\(acc\[b, c\] \+= inp\[b, c\] \* wgt\[c\]\): it is a reduction the "
                                             r"intrinsic does not perform"):
        sa.tensorize(b, intrinsics(CFG)["dwmac"])
