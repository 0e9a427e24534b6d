"""Layout transforms between NCHW / (N, K) and the accelerator's blocked layouts (any dtype)."""
from __future__ import annotations

import numpy as np

from compiler.codegen.llvm.irutil import Kernel, i64
from compiler.codegen.llvm.plan import Plan, contiguous, ptr, sig

LAYOUT_DTYPES = ("int8", "uint8", "int32", "float32")


def _blocked_copy(k: Kernel, src, dst, n: int, c: int, hw: int, bsz: int, blk: int, nb: int, cb: int,
                  packed_src: bool) -> None:
    """Copy between plain (n, c, hw) and blocked (nb, cb, hw, bsz, blk); ``packed_src`` picks the direction.

    Loops follow the destination's order so writes are sequential; ragged or cropped blocks are bounded.
    """
    b = k.b
    packed = lambda o, q, s, i, j: k.madd((o, cb * hw * bsz * blk), (q, hw * bsz * blk), (s, bsz * blk), (i, blk), (j, 1))
    plain = lambda o, q, s, i, j: k.madd((o, bsz * c * hw), (i, c * hw), (q, blk * hw), (j, hw), (s, 1))
    with k.loop(nb) as o:
        n_hi = k.smin(i64(bsz), b.sub(i64(n), k.madd((o, bsz))))
        with k.loop(cb) as q:
            c_hi = k.smin(i64(blk), b.sub(i64(c), k.madd((q, blk))))
            if packed_src:  # unpack: write plain order (i, j, s)
                with k.loop(n_hi) as i, k.loop(c_hi) as j, k.loop(hw) as s:
                    k.store(k.load(src, packed(o, q, s, i, j)), dst, plain(o, q, s, i, j))
            else:  # pack: write blocked order (s, i, j)
                with k.loop(hw) as s, k.loop(n_hi) as i, k.loop(c_hi) as j:
                    k.store(k.load(src, plain(o, q, s, i, j)), dst, packed(o, q, s, i, j))


def _layout_plan(key: tuple, x: np.ndarray, n: int, c: int, bsz: int, blk: int, nb: int, cb: int,
                 out_shape: tuple, packed_src: bool, zero_fill: bool) -> Plan:
    """The plan of one blocked copy of ``x`` (dtype kept) into a fresh ``out_shape`` array."""
    dt = x.dtype.name
    hw = int(np.prod(x.shape[2:-2] if packed_src else x.shape[2:]))

    def emit() -> Kernel:
        k = Kernel("unpack" if packed_src else "pack", [dt, dt])
        _blocked_copy(k, k.args[0], k.args[1], n, c, hw, bsz, blk, nb, cb, packed_src=packed_src)
        return k

    def run(fn, ins):
        xs = contiguous(ins[0])
        out = (np.zeros if zero_fill else np.empty)(out_shape, xs.dtype)
        fn(ptr(xs), ptr(out))
        return [out]
    return Plan(key, emit, run)


def plan_pack(node, ins) -> Plan | None:
    x = ins[0]
    if x.ndim not in (2, 4) or x.dtype.name not in LAYOUT_DTYPES:
        return None
    bsz, blk = int(node.attrs["batch"]), int(node.attrs["block"])
    n, c = x.shape[:2]
    nb, cb = -(-n // bsz), -(-c // blk)
    out_shape = (nb, cb) + tuple(x.shape[2:]) + (bsz, blk)
    padded = nb * bsz != n or cb * blk != c
    return _layout_plan(("PackActivation", sig(x), bsz, blk), x, n, c, bsz, blk, nb, cb, out_shape,
                        packed_src=False, zero_fill=padded)


def plan_unpack(node, ins) -> Plan | None:
    x = ins[0]
    if x.ndim not in (4, 6) or x.dtype.name not in LAYOUT_DTYPES:
        return None
    nb, cb, bsz, blk = x.shape[0], x.shape[1], x.shape[-2], x.shape[-1]
    n = nb * bsz if node.attrs.get("n") is None else int(node.attrs["n"])
    c = cb * blk if node.attrs.get("c") is None else int(node.attrs["c"])
    if not (0 <= n <= nb * bsz and 0 <= c <= cb * blk):
        return None
    return _layout_plan(("UnpackActivation", sig(x), n, c), x, n, c, bsz, blk, nb, cb, (n, c) + tuple(x.shape[2:-2]),
                        packed_src=True, zero_fill=False)
