"""Operation generation: walk the loop IR over the host loops and produce accelerator operations.

Each leaf statement instance becomes operations with concrete scratchpad addresses:
DMA copies (via :mod:`compiler.tir.accel.dma`) and micro-kernels (loop folding via
:mod:`compiler.tir.accel.uop_fold`). Virtual threads are generated separately and interleaved;
dependency tokens are then inserted on the merged program.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.schedule.errors import LowerError
from compiler.schedule.tensorize import AluMatch, root_of
from compiler.te.expr import Load
from compiler.tir.accel.bounds import EmptyIteration
from compiler.tir.accel.dma import pad_value_of, region_descs, source_map
from compiler.tir.accel.ir import Buffer, DmaLoad, DmaStore, For, Kernel, LoweredFunc
from compiler.tir.accel.tokens import Op, insert_tokens
from compiler.tir.accel.uop_fold import fold_loops
from compiler.tir.accel.vthread import interleave
from compiler.tir.arith import to_affine
from isa.instructions import Gemm

if TYPE_CHECKING:
    from isa import HwConfig


def _key(buf: Buffer, thread: int) -> tuple:
    r = buf.root()
    return (r.name, thread if r.copies > 1 else 0)


class OpBuilder:
    """Turns a :class:`LoweredFunc` into a list of :class:`Op` with dependency tokens."""

    def __init__(self, func: LoweredFunc, cfg: "HwConfig", overwrite: bool = True) -> None:
        self.func = func
        self.cfg = cfg
        self.overwrite = overwrite  # first reduction step as an overwrite GEMM instead of a reset pass
        self.bounds = func.bounds
        self._loaded: dict = {}

    def build(self) -> list[Op]:
        ops = self._walk(self.func.body, {}, 0)
        self.bounds.clear()
        insert_tokens(ops)
        return ops

    # ---------------------------------------------------------------- walk
    def _walk(self, stmts, env: dict, thread: int) -> list[Op]:
        out: list[Op] = []
        for s in stmts:
            if isinstance(s, For):
                if s.kind == "vthread":
                    per = [self._iteration(s.body, {**env, s.var: t}, t) for t in range(s.extent)]
                    out += interleave(per)
                else:
                    for v in range(s.extent):
                        out += self._iteration(s.body, {**env, s.var: v}, thread)
            elif isinstance(s, DmaLoad):
                out += self._load(s, env, thread)
            elif isinstance(s, DmaStore):
                out += self._store(s, env, thread)
            elif isinstance(s, Kernel):
                out += self._kernel(s, env, thread)
        return out

    def _iteration(self, body, env: dict, thread: int) -> list[Op]:
        saved = dict(self._loaded)
        try:
            return self._walk(body, env, thread)
        except EmptyIteration:
            self._loaded = saved
            return []

    # ----------------------------------------------------------------- DMA
    def _load(self, s: DmaLoad, env: dict, thread: int) -> list[Op]:
        region = self.bounds.region(s.stage.tensor, env)
        key = _key(s.buffer, thread)
        sig = tuple(region)
        if self._loaded.get(key) == sig:
            return []  # the buffer already holds this region: the load is loop-invariant here
        self._loaded[key] = sig
        src, offs, scales = source_map(s.stage.op.body)
        base = s.buffer.copy_base(thread)
        mem = s.buffer.scope
        unit = "compute" if mem == "acc" else "load"
        ops = []
        for d in region_descs(src, offs, region, s.buffer, scales=scales, pad_value=pad_value_of(s.stage.op.body)):
            ops.append(Op(unit, "load", {"mem": mem, "sram": base + d.sram, "desc": d}, (), (key,)))
        return ops

    def _store(self, s: DmaStore, env: dict, thread: int) -> list[Op]:
        root = s.stage
        nest = self.bounds.nest(root, env)
        region = [nest.forms[ax].bounds(nest.extents) for ax in root.op.axes]
        region = [(lo, hi - lo + 1) for lo, hi in region]
        src_region = self.bounds.region(s.source.tensor, env)
        if region != list(src_region):
            raise LowerError(f"store of {root.name}: region {region} differs from the acc tile {src_region}")
        key = _key(s.buffer, thread)
        base = s.buffer.copy_base(thread)
        ops = []
        for d in region_descs(root.tensor, [0] * root.tensor.ndim, region, s.buffer, allow_pad=False):
            ops.append(Op("store", "store", {"sram": base + d.sram, "desc": d}, (key,), ()))
        return ops

    # -------------------------------------------------------------- kernels
    def _elem_form(self, ld_indices, tensor, nest, buf: Buffer, loops, env) -> tuple[int, np.ndarray]:
        """Element index of ``tensor[ld_indices]`` in ``buf`` as const + coef per loop."""
        region = self.bounds.region(tensor, env)
        strides = buf.strides
        const = 0
        coefs = np.zeros(len(loops), dtype=np.int64)
        for d in range(tensor.ndim - 2):
            f = to_affine(ld_indices[d], nest.forms)
            const += (f.const - region[d][0]) * strides[d]
            for k, lv in enumerate(loops):
                coefs[k] += f.coef(lv) * strides[d]
        return const, coefs

    def _operand_form(self, m, scope: str, nest, buf: Buffer, loops, env, thread: int) -> tuple[int, np.ndarray]:
        """Micro-op index of a tensor intrinsic's ``scope`` operand: the row index, or for a vector operand
        (``k`` pieces per row, ``isa.intrinsics``) ``row * k + piece``, the piece being the load's index in
        the row's first element dimension."""
        ld = m.inp if scope == "inp" else m.wgt
        const, coefs = self._elem_form(ld.indices, ld.tensor, nest, buf, loops, env)
        const += buf.copy_base(thread)
        intr = m.intr
        op = next((o for o in intr.inputs if o.scope == scope), None) if intr is not None else None
        k = intr.vectors.get(op.name, 1) if op is not None else 1
        if k == 1:
            return const, coefs
        if len(op.axes) != 1 or ld.tensor.shape[-1] * k != ld.tensor.shape[-1] * ld.tensor.shape[-2]:
            raise LowerError(f"{intr.name}: operand {op.name} is a vector of {ld.tensor.shape[-1]} elements; the "
                             f"code generator addresses vectors that are whole rows of the last dimension")
        region = self.bounds.region(ld.tensor, env)
        f = to_affine(ld.indices[-2], nest.forms)
        pc = np.array([f.coef(lv) for lv in loops], dtype=np.int64)
        return const * k + (f.const - region[-2][0]), coefs * k + pc

    def _kernel(self, s: Kernel, env: dict, thread: int) -> list[Op]:
        st = s.stage
        if s.kind == "reset" and self.overwrite:
            return []  # the first reduction step overwrites the accumulator instead
        if s.kind == "reset":  # runs before the reduction's host loops: their values do not matter
            env = {**env, **{lv: 0 for lv in self.bounds.host.get(st, []) if lv not in env}}
        nest = self.bounds.nest(st, env)
        m = s.match
        acc_key = _key(s.buffer, thread)
        if s.kind in ("gemm", "reset"):
            t = st.leaf_iter_vars.index(st.tensorized[0])
            loops = [lv for lv in st.leaf_iter_vars[:t] if lv in nest.extents]
            if s.kind == "reset":
                loops = [lv for lv in loops if root_of(st, lv).kind == "data"]
            ext = [nest.extents[lv] for lv in loops]
            dc, dk = self._elem_form(st.op.axes, st.tensor, nest, s.buffer, loops, env)
            dc += s.buffer.copy_base(thread)
            if s.kind == "reset":
                coefs = np.stack([dk, np.zeros_like(dk), np.zeros_like(dk)], axis=1) if loops else np.zeros((0, 3), np.int64)
                const = np.array([dc, 0, 0])
                reads: tuple = ()
            else:
                ib, wb = s.operands["inp"], s.operands["wgt"]
                sc, sk = self._operand_form(m, "inp", nest, ib, loops, env, thread)
                wc, wk = self._operand_form(m, "wgt", nest, wb, loops, env, thread)
                coefs = np.stack([dk, sk, wk], axis=1) if loops else np.zeros((0, 3), np.int64)
                const = np.array([dc, sc, wc])
                reads = (_key(ib, thread), _key(wb, thread))
            # the declared intrinsic; a reset reads no operand and zeroes acc rows: it is the base tensor
            # instruction (isa.instructions.Gemm), whatever intrinsic the stage computes with
            name = m.intr.name if s.kind == "gemm" else Gemm.intrinsic
            if s.kind == "gemm" and self.overwrite and self._first_step(st, env):
                red = [k for k, lv in enumerate(loops) if root_of(st, lv).kind == "reduce"]
                return [Op("compute", "gemm", {"reset": False, "overwrite": ow, "cont": cont, "loops": hw,
                                                "uops": uops, "intrinsic": name}, reads, (acc_key,))
                        for ow, cont, (hw, uops) in _overwrite_split(ext, coefs, const, red, self.cfg.uop_depth)]
            hw, uops = fold_loops(ext, coefs, const, self.cfg.uop_depth)
            return [Op("compute", "gemm", {"reset": s.kind == "reset", "loops": hw, "uops": uops, "intrinsic": name},
                       reads, (acc_key,))]
        assert isinstance(m, AluMatch)
        axes = list(st.op.axes)
        elem = set(axes[-2:])
        loops = [lv for lv in st.leaf_iter_vars if lv in nest.extents and lv not in elem]
        ext = [nest.extents[lv] for lv in loops]
        dc, dk = self._elem_form(axes, st.tensor, nest, s.buffer, loops, env)
        dc += s.buffer.copy_base(thread)
        reads = (acc_key,)
        if isinstance(m.operand, Load):
            sb = s.operands["src"]
            sc, sk = self._elem_form(m.operand.indices, m.operand.tensor, nest, sb, loops, env)
            sc += sb.copy_base(thread)
            reads = (acc_key, _key(sb, thread))
            args = {"op": m.op, "use_imm": False, "imm": 0}
        else:
            sc, sk = dc, dk
            if not -(1 << 15) <= m.operand < (1 << 15):
                raise LowerError(f"stage {st.name}: constant {m.operand} does not fit the ALU's 16-bit immediate; "
                                 f"read it from an acc tensor instead")
            args = {"op": m.op, "use_imm": True, "imm": int(m.operand)}
        coefs = np.stack([dk, sk, np.zeros_like(dk)], axis=1) if loops else np.zeros((0, 3), np.int64)
        hw, uops = fold_loops(ext, coefs, np.array([dc, sc, 0]), self.cfg.uop_depth)
        args.update(loops=hw, uops=uops, deferred="alu_deferred" in st.pragmas.values())
        return [Op("compute", "alu", args, reads, (acc_key,))]

    def _first_step(self, st, env: dict) -> bool:
        """Whether this GEMM instance is the first step of its reduction (all host reduce loops at 0)."""
        return all(env.get(lv, 0) == 0 for lv in self.bounds.host.get(st, []))


def _overwrite_split(ext: list[int], coefs: np.ndarray, const: np.ndarray, red: list[int], max_uops: int) -> list:
    """The first reduction step as one overwrite GEMM, the rest as accumulate GEMMs over disjoint boxes.

    Box j fixes reduce loops before ``red[j]`` at 0 and runs ``red[j]`` from 1. Returns
    ``[(overwrite, cont, fold_loops(...))]``; ``cont`` marks all but the last (one vthread segment).
    """
    parts = []
    first = list(ext)
    for k in red:
        first[k] = 1
    parts.append((True, fold_loops(first, coefs, const, max_uops)))
    for j, k in enumerate(red):
        if ext[k] <= 1:
            continue
        box = list(ext)
        for kk in red[:j]:
            box[kk] = 1
        box[k] = ext[k] - 1
        parts.append((False, fold_loops(box, coefs, np.asarray(const) + coefs[k], max_uops)))
    return [(ow, n < len(parts) - 1, f) for n, (ow, f) in enumerate(parts)]
