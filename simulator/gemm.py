"""GEMM execution through the ISA's gemm intrinsic, vectorized per instruction.

Two paths, same results:

* dense: when the loop nest (outer loop, inner loop and the uop range factored as one or
  two affine dims) splits into M dims (dst and src move), N dims (dst and wgt move) and
  K dims (dst fixed: a reduction), the whole instruction is one matrix product
  ``acc[M x N] += inp[M x K] @ wgt[N x K]^T`` on strided views of the scratchpads;
* general: gather every iteration's operands; duplicate dst indices are summed.

float64 products are exact only while every sum stays below 2**53; otherwise an
int64 matmul (exact modulo 2**64, hence modulo 2**acc_width) is used instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from isa.alu import wrap
from isa.config import HwConfig
from isa.instructions import Gemm, n_iterations
from isa.intrinsics import gemm_intrinsic
from simulator.errors import InvalidInstructionError
from simulator.loops import check_bound, expand, factor_uops, loop_dims
from simulator.scratchpads import Scratchpads

_CHUNK_ELEMS = 1 << 21  # bound on gathered wgt elements per chunk in the general path


@dataclass
class _Dense:
    base: tuple[int, int, int]
    m: list  # dims (ext, d, s, w)
    n: list
    k: list
    dflat: np.ndarray
    dslice: slice | None
    mtot: int
    ntot: int
    ktot: int


@dataclass
class _General:
    d: np.ndarray
    s: np.ndarray
    w: np.ndarray
    unique: bool
    dsts: np.ndarray | None = None  # distinct dst indices and each iteration's position among them
    inv: np.ndarray | None = None


class GemmExecutor:
    """Executes GEMM instructions on a :class:`Scratchpads`."""

    def __init__(self, cfg: HwConfig, sp: Scratchpads):
        self.cfg, self.sp = cfg, sp
        self.fn = gemm_intrinsic(cfg).numpy_fn
        max_prod = 1 << (cfg.inp_width + cfg.wgt_width - 2)  # |(-2^(a-1)) * (-2^(b-1))|
        self.safe_terms = ((1 << 53) - 1) // max_prod  # products per output the float64 path sums exactly
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
        key = (insn, sp.uop[b:e].tobytes())
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        ud, us, uw = sp.uop_dst[b:e], sp.uop_src[b:e], sp.uop_wgt[b:e]
        where = f"instruction {i} (GEMM)"
        shape = (insn.iter_out, insn.iter_in, e - b)
        d = expand(ud, insn.iter_out, insn.dst_factor_out, insn.iter_in, insn.dst_factor_in)
        check_bound(d, cfg.acc_depth, where, "dst", "acc", shape)
        if insn.reset:
            plan = _General(d, d, d, False)
        else:
            s = expand(us, insn.iter_out, insn.src_factor_out, insn.iter_in, insn.src_factor_in)
            w = expand(uw, insn.iter_out, insn.wgt_factor_out, insn.iter_in, insn.wgt_factor_in)
            check_bound(s, cfg.inp_depth, where, "src", "inp", shape)
            check_bound(w, cfg.wgt_depth, where, "wgt", "wgt", shape)
            plan = self._dense(insn, ud, us, uw)
            if plan is None:
                dsts, inv = np.unique(d, return_inverse=True)
                plan = _General(d, s, w, dsts.size == d.size, dsts, inv.reshape(-1))
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
        grid = np.array(base[0], dtype=np.int64).reshape(())
        for dim in m + n:
            grid = grid[..., None] + np.arange(dim[0], dtype=np.int64) * dim[1]
        dflat = grid.reshape(-1)
        if np.unique(dflat).size != dflat.size:
            return None
        dslice = None
        if np.array_equal(dflat, np.arange(dflat[0], dflat[0] + dflat.size)):
            dslice = slice(int(dflat[0]), int(dflat[0]) + dflat.size)
        prod = lambda dims: int(np.prod([dm[0] for dm in dims], dtype=np.int64))  # noqa: E731
        return _Dense(base, m, n, k, dflat, dslice, prod(m), prod(n), prod(k))

    # ------------------------------------------------------------- execution
    def execute(self, i: int, insn: Gemm) -> None:
        """Run GEMM instruction ``i`` (a NOP when it has no iterations)."""
        if n_iterations(insn) == 0:
            return
        plan = self._plan(i, insn)
        if insn.reset:
            self.sp.write_acc(plan.d, np.zeros((plan.d.size,) + self.sp.acc.shape[1:], np.int64))
        elif isinstance(plan, _Dense):
            self._run_dense(plan, insn.overwrite)
        else:
            self._run_general(plan, insn.overwrite)

    def _run_dense(self, p: _Dense, overwrite: bool = False) -> None:
        sp, cfg = self.sp, self.cfg
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        inp, wgt = sp.inp, sp.wgt
        a = as_strided(inp[p.base[1]:], shape=[dm[0] for dm in p.m + p.k] + [B, BI],
                       strides=[dm[2] * inp.strides[0] for dm in p.m + p.k] + list(inp.strides[1:]))
        fn = self._product(p.ktot * BI)
        dt = np.float64 if fn is self.fn else np.int64  # one pass: convert while packing
        a = np.moveaxis(a, -2, len(p.m)).astype(dt, order="C").reshape(1, p.mtot * B, p.ktot * BI)
        wkey = (sp.wgt_version, p.base[2], tuple(p.n), tuple(p.k))
        w = self._wmats.get(wkey)
        if w is None:  # weights are reused across many GEMMs: pack (and convert) them once per load
            w = as_strided(wgt[p.base[2]:], shape=[dm[0] for dm in p.n + p.k] + [BO, BI],
                           strides=[dm[3] * wgt.strides[0] for dm in p.n + p.k] + list(wgt.strides[1:]))
            w = np.moveaxis(w, -2, len(p.n)).astype(dt, order="C").reshape(1, p.ntot * BO, p.ktot * BI)
            if len(self._wmats) >= 8:
                self._wmats.clear()
            self._wmats[wkey] = w
        idx = p.dslice if p.dslice is not None else p.dflat
        old = np.zeros((p.dflat.size,) + sp.acc.shape[1:], np.int64) if overwrite else sp.acc[idx]
        acc = old.reshape(p.mtot, p.ntot, B, BO).transpose(0, 2, 1, 3).reshape(1, p.mtot * B, p.ntot * BO)
        new = fn(acc, a, w)  # one BLAS call; numpy's BLAS threads it
        new = new.reshape(p.mtot, B, p.ntot, BO).transpose(0, 2, 1, 3).reshape(p.mtot * p.ntot, B, BO)
        sp.write_acc(idx, new)

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
        dsts, inv = p.dsts, p.inv
        total = np.zeros((dsts.size,) + sp.acc.shape[1:], np.int64)
        for c in range(0, n, step):
            s = p.s[c:c + step]
            zero = np.zeros((s.size,) + sp.acc.shape[1:], np.int64)
            np.add.at(total, inv[c:c + step], fn(zero, sp.inp[s], sp.wgt[p.w[c:c + step]]))
        sp.write_acc(dsts, wrap(sp.acc[dsts] + total, cfg.acc_width))


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
