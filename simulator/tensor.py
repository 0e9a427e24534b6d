"""Execution of any declared tensor intrinsic (``isa.intrinsics``) through its exact batched semantics.

Per instruction: every iteration's dst/src/wgt indices are expanded from the micro-op loop; each
operand is gathered from a view of its scratchpad in which one index names one operand-sized
piece of a row (a *vector* operand: row ``v // k``, piece ``v % k``; the row's elements in
row-major order make the operand's shape); the declaration's ``numpy_fn`` computes every
iteration's product term at once, and duplicate dst indices are summed by segment
(``np.add.reduceat``) before one write.

:func:`make_executor` is the one way the simulator gets an intrinsic's executor: a declaration's optional
``executor`` hook (a factory ``executor(cfg, scratchpads)`` or its import path ``"module:attr"``) when it
has one, else :class:`TensorExecutor`. GEMM's hook is its dense BLAS executor (:mod:`simulator.gemm`),
which gives the same results as the generic path (tests/simulator).
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from isa.alu import wrap
from isa.config import HwConfig
from isa.instructions import Gemm, n_iterations
from isa.intrinsics import TensorIntrinsic
from simulator.errors import InvalidInstructionError
from simulator.gemm import _check_written_once
from simulator.loops import check_bound, expand
from simulator.scratchpads import Scratchpads

_CHUNK = 1 << 16  # iterations per chunk


class TensorExecutor:
    """Executes the instructions of one declared tensor intrinsic on a :class:`Scratchpads`."""

    def __init__(self, cfg: HwConfig, sp: Scratchpads, intr: TensorIntrinsic):
        self.cfg, self.sp, self.intr = cfg, sp, intr
        self.ops = [(o.scope, intr.shape(o), intr.vectors[o.name]) for o in intr.inputs]

    def _view(self, scope: str, shape: tuple[int, ...], k: int) -> np.ndarray:
        arr = self.sp.inp if scope == "inp" else self.sp.wgt
        return arr.reshape((arr.shape[0] * k,) + shape)

    def _bound(self, scope: str, k: int) -> int:
        bits = self.cfg.inp_idx_bits if scope == "inp" else self.cfg.wgt_idx_bits
        return min(self.cfg.depth(scope) * k, 1 << bits)

    def execute(self, i: int, insn: Gemm) -> None:
        """Run instruction ``i`` (a NOP when it has no iterations)."""
        if n_iterations(insn) == 0:
            return
        sp, cfg = self.sp, self.cfg
        b, e = insn.uop_bgn, insn.uop_end
        where = f"instruction {i} ({self.intr.name.upper()})"
        shape = (insn.iter_out, insn.iter_in, e - b)
        d = expand(sp.uop_dst[b:e], insn.iter_out, insn.dst_factor_out, insn.iter_in, insn.dst_factor_in)
        check_bound(d, cfg.acc_depth, where, "dst", "acc", shape)
        if insn.reset:
            sp.write_acc(np.unique(d), np.zeros((np.unique(d).size,) + sp.acc.shape[1:], np.int64))
            return
        idx = {"inp": expand(sp.uop_src[b:e], insn.iter_out, insn.src_factor_out, insn.iter_in, insn.src_factor_in),
               "wgt": expand(sp.uop_wgt[b:e], insn.iter_out, insn.wgt_factor_out, insn.iter_in, insn.wgt_factor_in)}
        for scope, _, k in self.ops:
            check_bound(idx[scope], self._bound(scope, k), where, "src" if scope == "inp" else "wgt", scope, shape)
        if insn.overwrite:
            _check_written_once(d, where, shape)
        order = np.argsort(d, kind="stable")
        sd = d[order]
        new = np.r_[True, sd[1:] != sd[:-1]]
        dsts = sd[new]
        seg = np.cumsum(new) - 1
        total = np.zeros((dsts.size,) + sp.acc.shape[1:], np.int64)
        fn = self.intr.numpy_fn
        for c in range(0, d.size, _CHUNK):
            it = order[c:c + _CHUNK]
            sg = seg[c:c + _CHUNK]
            arrays = [self._view(scope, shp, k)[idx[scope][it]] for scope, shp, k in self.ops]
            prods = fn(np.zeros((it.size,) + sp.acc.shape[1:], np.int64), *arrays)
            starts = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1]])
            total[sg[starts]] += np.add.reduceat(prods, starts, axis=0)
        old = 0 if insn.overwrite else sp.acc[dsts]
        with np.errstate(over="ignore"):
            sp.write_acc(dsts, wrap(old + total, cfg.acc_width))


def make_executor(cfg: HwConfig, sp: Scratchpads, intr: TensorIntrinsic) -> Any:
    """The executor of a declared tensor intrinsic: its declaration's ``executor`` hook, else the generic one."""
    hook = getattr(intr.decl, "executor", None)
    if hook is None:
        return TensorExecutor(cfg, sp, intr)
    if isinstance(hook, str):
        module, _, attr = hook.partition(":")
        try:
            hook = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise InvalidInstructionError(f"intrinsic {intr.name}: its executor hook {intr.decl.executor!r} cannot "
                                          f"be imported ({e})") from None
    return hook(cfg, sp)
