"""ALU execution through the ISA's ALU intrinsics (op list from the registry), vectorized per instruction.

A record op (REQUANT) reads its operand from the WGT scratchpad at the src index; WGT is not
written by compute, so only the dst indices can conflict.

Sequential semantics: if an iteration reads (as dst or src) an accumulator written by an
earlier iteration of the same instruction, iterations are split into waves that are
free of conflicts (reads of a wave happen before its writes) and run wave by wave.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from isa.alu import alu_op
from isa.config import HwConfig
from isa.instructions import Alu, n_iterations
from isa.intrinsics import alu_intrinsic
from isa.timing import alu_hazard, in_flight
from simulator.errors import BudgetError, HazardError
from simulator.loops import check_bound, expand
from simulator.scratchpads import Scratchpads


#: Most sequential steps (dependent iteration waves) one ALU instruction may take on the host (~seconds).
MAX_SEQUENTIAL_STEPS = 1 << 20


@dataclass
class _AluPlan:
    d: np.ndarray
    s: np.ndarray | None
    waves: list[np.ndarray] | None  # None: conflict-free, one vector op
    wgt_src: bool = False  # s indexes WGT (a record op)
    s_rows: tuple[np.ndarray, np.ndarray] | None = None  # wgt_src without waves: (distinct s, inverse)
    dslice: slice | None = None  # d as a slice when it is consecutive rows
    hazard_free: set = field(default_factory=set)  # (window, repetitions) already checked


def conflict_waves(d: np.ndarray, s: np.ndarray | None) -> list[np.ndarray]:
    """Split iterations into waves so that running each wave vectorized (read all, then write all) is sequential."""
    last_write: dict[int, int] = {}
    last_read: dict[int, int] = {}
    wave = np.empty(d.size, np.int64)
    dl = d.tolist()
    sl = s.tolist() if s is not None else None
    for i, x in enumerate(dl):
        wv = max(last_write.get(x, -1) + 1, last_read.get(x, 0))
        if sl is not None:
            y = sl[i]
            wv = max(wv, last_write.get(y, -1) + 1)
            last_read[y] = max(last_read.get(y, 0), wv)
        last_write[x] = wv
        wave[i] = wv
    order = np.argsort(wave, kind="stable")
    bounds = np.searchsorted(wave[order], np.arange(int(wave.max()) + 2))
    return [order[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1)]


class AluExecutor:
    """Executes ALU instructions on a :class:`Scratchpads`."""

    def __init__(self, cfg: HwConfig, sp: Scratchpads):
        self.cfg, self.sp = cfg, sp
        self._fns: dict[str, object] = {}
        self._plans: dict = {}

    def _fn(self, name: str):
        op = alu_op(name)
        cached = self._fns.get(name)
        if cached is None or cached[0] is not op:  # re-read if the registry entry changed
            cached = (op, alu_intrinsic(self.cfg, op).numpy_fn)
            self._fns[name] = cached
        return cached[1]

    def _plan(self, i: int, insn: Alu) -> _AluPlan:
        sp, cfg = self.sp, self.cfg
        b, e = insn.uop_bgn, insn.uop_end
        wgt_src = alu_op(insn.op).operand == "wgt"
        key = (insn.reset, insn.use_imm, wgt_src, b, e, insn.iter_out, insn.iter_in, insn.dst_factor_out,
               insn.dst_factor_in, insn.src_factor_out, insn.src_factor_in, sp.uop[b:e].tobytes())
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        where = f"instruction {i} (ALU.{insn.op})"
        shape = (insn.iter_out, insn.iter_in, e - b)
        d = expand(sp.uop_dst[b:e], insn.iter_out, insn.dst_factor_out, insn.iter_in, insn.dst_factor_in)
        check_bound(d, cfg.acc_depth, where, "dst", "acc", shape)
        s = None
        if not insn.reset and not insn.use_imm:
            s = expand(sp.uop_src[b:e], insn.iter_out, insn.src_factor_out, insn.iter_in, insn.src_factor_in)
            if wgt_src:
                check_bound(s, cfg.wgt_depth, where, "src", "wgt", shape)
            else:
                check_bound(s, cfg.acc_depth, where, "src", "acc", shape)
        waves = None
        if not insn.reset:
            dup = np.unique(d).size != d.size
            conflict = dup
            if not dup and s is not None and not wgt_src:
                first = np.full(cfg.acc_depth, d.size, np.int64)
                first[d] = np.arange(d.size)
                conflict = bool((first[s] < np.arange(d.size)).any())
            if conflict:
                if d.size > MAX_SEQUENTIAL_STEPS:
                    raise BudgetError(
                        f"{where}: {d.size:,} iterations that update the same accumulators in sequence; more than "
                        f"{MAX_SEQUENTIAL_STEPS:,} is over the simulator's host-time budget")
                waves = conflict_waves(d, None if wgt_src else s)
        plan = _AluPlan(d, s, waves, wgt_src)
        if d.size and d[-1] - d[0] == d.size - 1 and np.array_equal(d, np.arange(d[0], d[0] + d.size)):
            plan.dslice = slice(int(d[0]), int(d[0]) + d.size)
        if wgt_src and s is not None and waves is None:
            plan.s_rows = np.unique(s, return_inverse=True)
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def execute(self, i: int, insn: Alu) -> None:
        """Run ALU instruction ``i`` (a NOP when it has no iterations).

        Loops whose indices do not move (zero factors) repeat one shorter sequence: it is planned once and
        applied until the accumulators it touches stop changing (a fixed point) or the repetitions run out.
        """
        if n_iterations(insn) == 0:
            return
        unit, reps = repeated_unit(insn)
        p = self._plan(i, unit)
        if not insn.reset:
            self._check_hazard(i, insn, p, reps)
        if insn.reset:  # idempotent: one repetition is the whole effect
            self.sp.write_acc(p.d, np.zeros((p.d.size,) + self.sp.acc.shape[1:], np.int64))
            return
        if reps == 1:
            self._apply(insn, p)
            return
        rows = np.unique(p.d if p.s is None or p.wgt_src else np.concatenate([p.d, p.s]))  # wgt_src: s indexes WGT
        steps = 0
        for _ in range(reps):
            before = self.sp.acc[rows].copy()
            self._apply(insn, p)
            if np.array_equal(self.sp.acc[rows], before):
                return
            steps += 1 if p.waves is None else len(p.waves)
            if steps > MAX_SEQUENTIAL_STEPS:
                raise BudgetError(
                    f"instruction {i} (ALU.{insn.op}): its {n_iterations(insn):,} iterations update the same "
                    f"accumulators one after another without settling; more than {MAX_SEQUENTIAL_STEPS:,} sequential "
                    f"steps is over the simulator's host-time budget")

    def _check_hazard(self, i: int, insn: Alu, p: _AluPlan, reps: int) -> None:
        """HazardError if a micro-op reads a row one of the ``in_flight`` micro-ops before it still writes."""
        window = in_flight(self.cfg, insn)
        if not window or p.d.size * reps < 2:
            return
        reps = min(reps, window // p.d.size + 2)  # enough repetitions to cover every distance up to the window
        if (window, reps) in p.hazard_free:
            return
        d = np.tile(p.d, reps)
        s = None if p.s is None or p.wgt_src else np.tile(p.s, reps)
        hit = alu_hazard(d, s, window)
        if hit is None:
            p.hazard_free.add((window, reps))
            return
        j, k, row, what = hit
        depth = window + 2
        raise HazardError(
            f"instruction {i} (ALU.{insn.op}): micro-op iteration {j} reads acc row {row} (its {what}), which "
            f"iteration {j - k} writes only {k} micro-op(s) earlier; the ALU pipeline (depth {depth}) has not "
            f"written it yet. An ALU micro-op must not read a row written by any of the {window} micro-ops issued "
            f"just before it (distance 1..{window}); reorder the loop or split the instruction (docs/timing.md, "
            f"Pipeline and hazards)")

    def _apply(self, insn: Alu, p: _AluPlan) -> None:
        fn, sp = self._fn(insn.op), self.sp
        imm = np.int64(insn.imm)
        if p.waves is None:  # one vector op; dst rows read as a slice when consecutive (np.take: gathers by row)
            d = p.d if p.dslice is None else p.dslice
            old = sp.acc.take(p.d, axis=0) if p.dslice is None else sp.acc[d]
            if p.s_rows is not None:  # a record op: each distinct WGT element's records unpacked once
                rows, inverse = p.s_rows
                sp.write_acc(d, fn(old, sp.wgt.take(rows, axis=0), inverse.reshape(-1)))
                return
            b = imm if p.s is None else (sp.wgt if p.wgt_src else sp.acc).take(p.s, axis=0)
            sp.write_acc(d, fn(old, b))
            return
        for sel in p.waves:
            d = p.d[sel]
            b = imm if p.s is None else (sp.wgt[p.s[sel]] if p.wgt_src else sp.acc[p.s[sel]])
            sp.write_acc(d, fn(sp.acc[d], b))


def repeated_unit(insn: Alu) -> tuple[Alu, int]:
    """``(unit, reps)``: the instruction's iterations are ``unit``'s iterations repeated ``reps`` times."""
    src_moves = not (insn.reset or insn.use_imm)
    if insn.dst_factor_out or (src_moves and insn.src_factor_out) or insn.iter_out == 1:
        return insn, 1
    if insn.dst_factor_in or (src_moves and insn.src_factor_in) or insn.iter_in == 1:
        return replace(insn, iter_out=1), insn.iter_out
    return replace(insn, iter_out=1, iter_in=1), insn.iter_out * insn.iter_in
