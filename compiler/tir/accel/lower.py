"""The accelerator's lowering, structure pass: a schedule becomes the loop IR (host loops, DMA, kernels, buffers).

Conventions (VTA-style): the output stage lives in DRAM and carries ``pragma(iv, "dma_copy")``;
the loops outside that point are host loops, one of them may be bound to virtual threads.
Every other stage sits in a scratchpad: ``inp``/``wgt``/``acc`` cache reads become DMA loads,
a tensorized ``acc`` stage becomes GEMM micro-kernels (with an accumulator reset), an ``acc``
stage with ``pragma(iv, "alu")`` becomes ALU micro-kernels updating its input in place.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.schedule.errors import LowerError
from compiler.schedule.tensorize import match_alu, match_intrinsic
from compiler.te.expr import Cast, Load
from compiler.tir.accel.alloc import allocate
from compiler.tir.accel.bounds import Bounds
from compiler.tir.accel.ir import Buffer, DmaLoad, DmaStore, For, Kernel, LoweredFunc, Stmt

if TYPE_CHECKING:
    from compiler.schedule.schedule import Schedule
    from compiler.schedule.stage import Stage
    from isa import HwConfig


def _root_stage(sched: "Schedule") -> "Stage":
    if len(sched.outputs) != 1:
        raise LowerError(f"lowering for the accelerator takes one output tensor, got {len(sched.outputs)}")
    root = sched[sched.outputs[0]]
    if root.scope != "global":
        raise LowerError(f"output {root.name} must live in DRAM (scope 'global'), not {root.scope!r}")
    if "dma_copy" not in root.pragmas.values():
        raise LowerError(f"output stage {root.name}: mark the loop where the store starts with "
                         f"pragma(iv, 'dma_copy'); loops outside it run on the host")
    return root


def _store_source(root: "Stage") -> "Stage":
    body = root.op.body
    inner = body.a if isinstance(body, Cast) else body
    if not isinstance(inner, Load) or tuple(inner.indices) != tuple(root.op.axes):
        raise LowerError(f"output stage {root.name}: its body must copy (and optionally cast) an acc tensor at the "
                         f"same indices, got {body!r}; compute the value in an acc stage first")
    src = root.schedule[inner.tensor] if inner.tensor.op is not None else None
    if src is None or src.scope != "acc":
        raise LowerError(f"output stage {root.name}: it stores {inner.tensor.name}, which must be in scope 'acc'")
    return src


def _host_loops(st: "Stage", attached: dict) -> list:
    """Host loops of a non-root stage: its leaves down to the innermost one something is attached at."""
    last = -1
    for k, lv in enumerate(st.leaf_iter_vars):
        if attached.get((id(st), id(lv))):
            last = k
    return st.leaf_iter_vars[: last + 1]


def lower(sched: "Schedule", cfg: "HwConfig", name: str = "kernel") -> LoweredFunc:
    """Lower ``sched`` to loop IR with buffers sized by bound inference (see :mod:`compiler.tir.accel`)."""
    root = _root_stage(sched)
    store_src = _store_source(root)
    p = next(k for k, lv in enumerate(root.leaf_iter_vars) if root.pragmas.get(lv) == "dma_copy")
    stages = [st for st in sched.stages if st.op is not None and st is not root and not st.inlined]
    attached: dict = {}
    for st in stages:
        if st.attach is not None:
            attached.setdefault((id(st.attach[0]), id(st.attach[1])), []).append(st)
        elif st.scope == "acc" and not _is_cache(st):
            raise LowerError(f"stage {st.name} (acc) is not attached: compute_at it inside the loops of "
                             f"{root.name} so it computes one tile at a time")
        elif st.scope == "global":
            raise LowerError(f"stage {st.name} is in DRAM: the accelerator computes in scratchpads; "
                             f"set_scope('acc') it or compute_inline it")
    host: dict = {root: root.leaf_iter_vars[:p]}
    matches: dict = {}
    for st in stages:
        if st.scope == "acc" and not _is_cache(st):
            if st.tensorized is not None:
                matches[st] = match_intrinsic(st, *st.tensorized)
                host[st] = _host_loops(st, attached)
                k = st.leaf_iter_vars.index(st.tensorized[0])
                if len(host[st]) > k:
                    raise LowerError(f"stage {st.name}: a stage is attached at loop {host[st][-1].name}, inside the "
                                     f"tensorized region (starting at {st.tensorized[0].name})")
                for lv in host[st]:
                    if lv.kind != "reduce":
                        raise LowerError(
                            f"stage {st.name}: loop {lv.name} is a data loop outside the point where its inputs are "
                            f"loaded; only reduction loops may stay on the host (split the output's loops instead)")
            elif any(v in ("alu", "alu_deferred") for v in st.pragmas.values()):
                matches[st] = match_alu(st, st.leaf_iter_vars[0], None)
                host[st] = []
            else:
                raise LowerError(f"stage {st.name} (acc) has neither tensorize(...) nor pragma(iv, 'alu'): "
                                 f"the accelerator cannot compute it")
        elif st.scope in ("inp", "wgt") or _is_cache(st):
            _check_cache(st)
            host[st] = []
    readers: dict = {}
    for st in stages + [root]:
        for t in st.op.inputs:
            readers.setdefault(t, []).append(st)
    bounds = Bounds(sched, root, host, readers)
    vt = root.vthread
    if vt is not None and vt not in host[root]:
        raise LowerError(f"virtual-thread loop {vt.name} must be a host loop of {root.name} (outside its dma_copy point)")
    nthreads = vt.extent if vt is not None else 1

    buffers: dict = {}

    def buffer_of(st: "Stage", inside_vt: bool) -> Buffer:
        if st in buffers:
            return buffers[st]
        if st in matches and st.tensorized is None:
            src = root.schedule[matches[st].src.tensor]
            buf = Buffer(st.name, "acc", (), alias_of=buffer_of(src, inside_vt))
        else:
            buf = Buffer(st.name, st.scope, (), nthreads if inside_vt else 1)
        buffers[st] = buf
        return buf

    def stage_stmts(st: "Stage", inside_vt: bool) -> list[Stmt]:
        buf = buffer_of(st, inside_vt)
        if st in matches and st.tensorized is not None:
            m = matches[st]
            ops = {"inp": buffer_of(sched[m.inp.tensor], inside_vt), "wgt": buffer_of(sched[m.wgt.tensor], inside_vt)}
            if m.intr is not None:
                for o in m.intr.inputs:
                    ops[o.scope].vector = ops[o.scope].vector or m.intr.vectors[o.name] > 1
            out: list[Stmt] = [Kernel(st, "reset", buf, m, ops)]
            body = nest_loops(st, host[st], inside_vt, [Kernel(st, "gemm", buf, m, ops)])
            return out + body
        if st in matches:
            m = matches[st]
            ops = {}
            if isinstance(m.operand, Load):
                ops["src"] = buffer_of(sched[m.operand.tensor], inside_vt)
            return [Kernel(st, "alu", buf, m, ops)]
        return [DmaLoad(st, buf)]

    def nest_loops(st: "Stage", loops: list, inside_vt: bool, leaf: list[Stmt]) -> list[Stmt]:
        if not loops:
            return leaf
        lv = loops[0]
        in_vt = inside_vt or lv is vt
        body: list[Stmt] = []
        for child in sorted(attached.get((id(st), id(lv)), []), key=stages.index):
            body += stage_stmts(child, in_vt)
        body += nest_loops(st, loops[1:], in_vt, leaf)
        return [For(lv, lv.extent, body, "vthread" if lv is vt else "serial")]

    prologue: list[Stmt] = []
    for st in stages:
        if st.attach is None and _is_cache(st):
            prologue.append(DmaLoad(st, buffer_of(st, False)))
    body = prologue + nest_loops(root, host[root], False, [DmaStore(root, store_src, None)])  # type: ignore[arg-type]
    _fix_store(body, lambda: buffers[store_src])
    for st in stages:
        if st not in buffers:
            raise LowerError(f"stage {st.name} is not attached to any loop of {root.name} and is not a cache read")
    env0 = {lv: 0 for loops in host.values() for lv in loops}
    for st, buf in buffers.items():
        if buf.alias_of is None:
            reg = bounds.region(st.tensor, env0)
            buf.shape = tuple(n for _, n in reg[:-2])
    for st, buf in buffers.items():
        if buf.alias_of is not None:
            buf.shape = buf.root().shape
    func = LoweredFunc(name, body, list(buffers.values()), _placeholders(sched), root.tensor, bounds,
                       nthreads)
    allocate(func, cfg)
    bounds.clear()
    return func


def _fix_store(body: list[Stmt], get) -> None:
    for s in body:
        if isinstance(s, For):
            _fix_store(s.body, get)
        elif isinstance(s, DmaStore):
            s.buffer = get()


def _is_cache(st: "Stage") -> bool:
    body = st.op.body
    return isinstance(body, Load) and tuple(body.indices) == tuple(st.op.axes) and st.scope != "global" \
        and (body.tensor.op is None or st.schedule[body.tensor].inlined)


def _check_cache(st: "Stage") -> None:
    if not _is_cache(st):
        raise LowerError(f"stage {st.name} in scope {st.scope!r} must be a cache_read copy of an input "
                         f"(optionally of an inlined padding stage), got body {st.op.body!r}")


def _placeholders(sched: "Schedule") -> list:
    return [st.tensor for st in sched.stages if st.op is None]
