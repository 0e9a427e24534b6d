"""GEMM execution through the ISA's gemm intrinsic, vectorized per instruction.

Two paths, same results:

* dense: when the loop nest (outer loop, inner loop and the uop range factored as a
  mixed-radix affine grid, e.g. a convolution's kernel row x kernel column x output block)
  splits into M dims (dst and src move), N dims (dst and wgt move) and K dims (dst fixed:
  a reduction), the whole instruction is one matrix product
  ``acc[M x N] += inp[M x K] @ wgt[N x K]^T``: the input rows are gathered once from a
  strided view of the scratchpad and multiplied in one BLAS call;
* general: gather every iteration's operands; iterations are pre-sorted by dst so that
  duplicate dst indices are summed by segment (``np.add.reduceat``), never scattered
  element by element.

Exactness: the dense path multiplies in float32 while every partial sum of an output stays
within 2**24 (e.g. 1024 products of int8 x int8), in float64 while it stays below 2**53, and in
int64 otherwise (exact modulo 2**64, hence modulo 2**acc_width); integers in those ranges are
represented exactly, in any summation order. The general path uses the intrinsic's own function.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.alu import wrap
from isa.config import HwConfig
from isa.instructions import Gemm, n_iterations
from isa.intrinsics import gemm_intrinsic
from simulator.blas import use_threads_for
from simulator.errors import InvalidInstructionError
from simulator.loops import check_bound, expand, factor_uops, loop_dims
from simulator.scratchpads import Scratchpads

_CHUNK_ELEMS = 1 << 21  # bound on gathered wgt elements per chunk in the general path


@dataclass
class _Dense:
    key: tuple  # (wgt base, N dims, K dims): which packed weight matrix the plan uses
    a_idx: np.ndarray  # inp rows, M-major then K: gathered once per instruction
    w_idx: np.ndarray  # wgt rows, N-major then K
    dflat: np.ndarray  # acc rows, M-major then N
    dslice: slice | None  # the acc rows as one slice, in the order ``out_perm`` puts the product in
    mtot: int
    ntot: int
    ktot: int
    out_shape: tuple = ()  # the product viewed as (M dims..., [batch], N dims..., BO)
    out_perm: tuple = ()  # ... and transposed to acc order (with dslice), then rows of (batch, BO)


@dataclass
class _General:
    d: np.ndarray
    s: np.ndarray
    w: np.ndarray
    unique: bool
    dsts: np.ndarray | slice | None = None  # distinct dst indices (sorted; reset: a slice when consecutive)
    order: np.ndarray | None = None  # iterations sorted by dst (stable)
    seg: np.ndarray | None = None  # each sorted iteration's dst position (non-decreasing)


class GemmExecutor:
    """Executes GEMM instructions on a :class:`Scratchpads`."""

    def __init__(self, cfg: HwConfig, sp: Scratchpads):
        self.cfg, self.sp = cfg, sp
        self.fn = gemm_intrinsic(cfg).numpy_fn
        max_prod = 1 << (cfg.inp_width + cfg.wgt_width - 2)  # |(-2^(a-1)) * (-2^(b-1))|
        self.safe_terms = ((1 << 53) - 1) // max_prod  # products per output the float64 path sums exactly
        self.f32_terms = (1 << 24) // max_prod  # ... and the float32 path (integers up to 2**24 are exact)
        self._plans: dict = {}
        self._wmats: dict = {}  # (wgt version, plan weight dims) -> packed float64 weight matrix

    # --------------------------------------------------------------- helpers
    def _product(self, terms: int):
        """The intrinsic's function when float64 is exact for ``terms`` products per output, else int64."""
        if terms <= self.safe_terms:
            return self.fn
        width = self.cfg.acc_width

        def exact(acc, inp, wgt):
            prod = np.matmul(inp.astype(np.int64), np.swapaxes(wgt, -1, -2).astype(np.int64))
            return wrap(acc + prod, width)
        return exact

    def _plan(self, i: int, insn: Gemm):
        sp, cfg = self.sp, self.cfg
        b, e = insn.uop_bgn, insn.uop_end
        key = (insn.reset, insn.overwrite, b, e, insn.iter_out, insn.iter_in, insn.dst_factor_out, insn.dst_factor_in,
               insn.src_factor_out, insn.src_factor_in, insn.wgt_factor_out, insn.wgt_factor_in,
               sp.uop[b:e].tobytes())  # everything the plan depends on (not the dependency flags)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        ud, us, uw = sp.uop_dst[b:e], sp.uop_src[b:e], sp.uop_wgt[b:e]
        where = f"instruction {i} (GEMM)"
        shape = (insn.iter_out, insn.iter_in, e - b)
        d = expand(ud, insn.iter_out, insn.dst_factor_out, insn.iter_in, insn.dst_factor_in)
        check_bound(d, cfg.acc_depth, where, "dst", "acc", shape)
        if insn.reset:  # the distinct rows, as one slice when they are consecutive
            rows = np.unique(d)
            plan = _General(rows, rows, rows, True)
            if rows[-1] - rows[0] == rows.size - 1:
                plan.dsts = slice(int(rows[0]), int(rows[-1]) + 1)
        else:
            s = expand(us, insn.iter_out, insn.src_factor_out, insn.iter_in, insn.src_factor_in)
            w = expand(uw, insn.iter_out, insn.wgt_factor_out, insn.iter_in, insn.wgt_factor_in)
            check_bound(s, cfg.inp_depth, where, "src", "inp", shape)
            check_bound(w, cfg.wgt_depth, where, "wgt", "wgt", shape)
            plan = self._dense(insn, ud, us, uw)
            if plan is None:
                order = np.argsort(d, kind="stable")
                sd = d[order]
                new = np.empty(sd.size, bool)
                new[:1] = True
                new[1:] = sd[1:] != sd[:-1]
                unique = bool(new.all())
                plan = _General(d, s, w, unique, sd[new], None if unique else order,
                                None if unique else np.cumsum(new) - 1)
            if insn.overwrite:
                _check_written_once(d, where, shape)
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def _dense(self, insn: Gemm, ud, us, uw) -> _Dense | None:
        fac = factor_uops(ud, us, uw)
        if fac is None:
            return None
        base, udims = fac
        m, n, k = [], [], []
        for dim in loop_dims(insn, udims):
            _, dd, ss, ww = dim
            if dd == 0:
                k.append(dim)
            elif ww == 0:
                m.append(dim)
            elif ss == 0:
                n.append(dim)
            else:
                return None
        dflat = _grid(base[0], m + n, 1)
        if np.unique(dflat).size != dflat.size:
            return None
        prod = lambda dims: int(np.prod([dm[0] for dm in dims], dtype=np.int64))  # noqa: E731
        plan = _Dense((base[2], tuple(n), tuple(k)), _grid(base[1], m + k, 2), _grid(base[2], n + k, 3), dflat,
                      None, prod(m), prod(n), prod(k))
        _contiguous_dst(plan, base[0], m, n, self.cfg.batch)
        return plan

    # ------------------------------------------------------------- execution
    def execute(self, i: int, insn: Gemm) -> None:
        """Run GEMM instruction ``i`` (a NOP when it has no iterations)."""
        if n_iterations(insn) == 0:
            return
        plan = self._plan(i, insn)
        if insn.reset:
            if isinstance(plan.dsts, slice):
                self.sp.write_acc(plan.dsts, 0)
            else:
                self.sp.write_acc(plan.d, np.zeros((plan.d.size,) + self.sp.acc.shape[1:], np.int64))
        elif isinstance(plan, _Dense):
            self._run_dense(plan, insn.overwrite)
        else:
            self._run_general(plan, insn.overwrite)

    def _run_dense(self, p: _Dense, overwrite: bool = False) -> None:
        """``acc[M x N] (+)= inp[M x K] @ wgt[N x K]^T``: the gemm intrinsic's expression over the whole
        instruction, one matrix product in the narrowest exact number type."""
        sp, cfg = self.sp, self.cfg
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        M, N, K = p.mtot, p.ntot, p.ktot
        terms = K * BI
        dt = np.float32 if terms <= self.f32_terms else np.float64 if terms <= self.safe_terms else np.int64
        a = sp.inp.take(p.a_idx, axis=0).astype(dt)  # (M*K, B, BI): the input rows, gathered once
        a = a.reshape(M, K * BI) if B == 1 else a.reshape(M, K, B, BI).transpose(0, 2, 1, 3).reshape(M * B, K * BI)
        wkey = (sp.wgt_version, dt, p.key)
        w = self._wmats.get(wkey)
        if w is None:  # weights are reused across many GEMMs: pack (and convert) them once per load
            w = sp.wgt.take(p.w_idx, axis=0).reshape(N, K, BO, BI).transpose(1, 3, 0, 2)
            w = w.astype(dt, order="C").reshape(K * BI, N * BO)  # converted and transposed in one pass
            if len(self._wmats) >= 8:
                self._wmats.clear()
            self._wmats[wkey] = w
        use_threads_for(a.shape[0] * a.shape[1] * w.shape[1])  # small products: one BLAS thread
        if dt is np.int64:
            with np.errstate(over="ignore"):
                prod = np.matmul(a, w)  # wraps modulo 2**64, still exact modulo 2**acc_width
        else:
            prod = np.matmul(a, w)  # one BLAS call; integers, exactly
        if p.dslice is not None:  # acc rows in one slice: the product transposed into their order, no scatter
            idx = p.dslice
            prod = prod.reshape(p.out_shape).transpose(p.out_perm).astype(np.int64, order="C").reshape(M * N, B, BO)
        else:
            idx = p.dflat
            prod = prod.astype(np.int64, copy=False)
            prod = prod.reshape(M * N, B, BO) if B == 1 else \
                prod.reshape(M, B, N, BO).transpose(0, 2, 1, 3).reshape(M * N, B, BO)
        if not overwrite:  # int64 sums of acc_width-bit values: wrap modulo 2**64 at worst, exact mod 2**acc_width
            prod += sp.acc[idx] if p.dslice is not None else sp.acc.take(idx, axis=0)
        w = cfg.acc_width
        sp.write_acc(idx, prod.astype(f"<i{w // 8}") if w in (8, 16, 32) else wrap(prod, w))  # a narrowing cast wraps

    def _run_general(self, p: _General, overwrite: bool = False) -> None:
        sp, cfg = self.sp, self.cfg
        fn = self._product(cfg.block_in)
        step = max(1, _CHUNK_ELEMS // (cfg.block_out * cfg.block_in))
        n = p.d.size
        if p.unique:
            for c in range(0, n, step):
                d = p.d[c:c + step]
                old = np.zeros((d.size,) + sp.acc.shape[1:], np.int64) if overwrite else sp.acc[d]
                sp.write_acc(d, fn(old, sp.inp[p.s[c:c + step]], sp.wgt[p.w[c:c + step]]))
            return
        total = np.zeros((p.dsts.size,) + sp.acc.shape[1:], np.int64)
        for c in range(0, n, step):
            it = p.order[c:c + step]
            seg = p.seg[c:c + step]
            zero = np.zeros((it.size,) + sp.acc.shape[1:], np.int64)
            prods = fn(zero, sp.inp[p.s[it]], sp.wgt[p.w[it]])
            starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
            total[seg[starts]] += np.add.reduceat(prods, starts, axis=0)  # distinct segments: no scatter
        sp.write_acc(p.dsts, wrap(sp.acc[p.dsts] + total, cfg.acc_width))


def _grid(base: int, dims: list, which: int) -> np.ndarray:
    """Flat indices ``base + sum_j i_j * dims[j][which]`` over the dims' extents (first dim outermost)."""
    g = np.array([base], dtype=np.int64)
    for dm in dims:
        g = (g[:, None] + np.arange(dm[0], dtype=np.int64) * dm[which]).reshape(-1)
    return g


def _contiguous_dst(p: _Dense, base: int, m: list, n: list, batch: int) -> None:
    """Set ``p.dslice`` (and the product's reshape/transpose to acc order) when the dst rows of the M and N
    dims, taken in some order, are one run of consecutive acc rows; else leave ``p.dslice`` None."""
    dims = m + n
    order = sorted(range(len(dims)), key=lambda j: -dims[j][1])  # dst step, largest (outermost) first
    stride = 1
    for j in reversed(order):
        if dims[j][1] != stride:
            return
        stride *= dims[j][0]
    nm = len(m)
    # product axes: m dims, [batch], n dims, BO; acc order: the dims by dst step, then batch, BO
    shape = tuple(dm[0] for dm in m) + ((batch,) if batch > 1 else ()) + tuple(dm[0] for dm in n) + (-1,)
    axis = [j if j < nm else j + (batch > 1) for j in range(len(dims))]  # dim j's axis in ``shape``
    perm = tuple(axis[j] for j in order) + ((nm,) if batch > 1 else ()) + (len(shape) - 1,)
    p.dslice, p.out_shape, p.out_perm = slice(base, base + stride), shape, perm


def _check_written_once(d: np.ndarray, where: str, shape: tuple[int, int, int]) -> None:
    """An overwrite GEMM may write each accumulator once: a second write would discard a product."""
    order = np.argsort(d, kind="stable")
    dup = np.nonzero(d[order][1:] == d[order][:-1])[0]
    if dup.size:
        first, second = (np.unravel_index(int(order[k]), shape) for k in (dup[0], dup[0] + 1))
        raise InvalidInstructionError(
            f"{where}: overwrite GEMM writes acc index {int(d[order[dup[0]]])} twice (iterations "
            f"i_out={first[0]}, i_in={first[1]}, uop={first[2]} and i_out={second[0]}, i_in={second[1]}, "
            f"uop={second[2]}); with overwrite each dst may be written once - accumulate the rest without it")
