"""Lowering for the CPU/GPU targets: a TE schedule becomes loop IR (``PrimFunc``).

Every stage that is not inlined becomes a loop nest over its leaf loops (split/fuse
relations give the root-axis values). Root stages run one after another; a stage attached
with ``compute_at(parent, iv)`` runs inside ``iv`` over the region its readers need there
(bound inference on linear index forms) in a buffer of that region's size. Reductions get
an init nest just outside their outermost reduce loop. Ragged splits and regions that may
leave the tensor are guarded.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.te.expr import Binary, Cast, Const, Expr, IterVar, Load, Reduce, Var, loads
from compiler.te.tensor import Tensor
from compiler.schedule.relations import Split
from compiler.tir.arith import Linear, add, atom_vars, flat_index, floordiv, floormod, linear, mul, simplify, sub, substitute, \
    var_ranges_bounds
from compiler.tir.bounds import leaf_extents, root_values
from compiler.tir.errors import TirError
from compiler.tir.ir import Allocate, BufLoad, Buffer, For, IfThen, PrimFunc, Store, Sync

if TYPE_CHECKING:
    from compiler.schedule.schedule import Schedule
    from compiler.schedule.stage import Stage



def _identity(op: str, dtype: str) -> Const:
    if op == "sum":
        return Const(0.0 if dtype == "float32" else 0, dtype)
    if dtype == "float32":
        return Const(float("-inf") if op == "max" else float("inf"), dtype)
    bits = int(dtype[3:]) if dtype != "bool" else 1
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return Const(lo if op == "max" else hi, dtype)


class _StageInfo:
    def __init__(self, st: "Stage") -> None:
        self.st = st
        self.lo: list[Linear] = []          # per data axis: region start (symbolic in outer loops)
        self.dom: dict[IterVar, int] = {}   # root axis -> extent iterated
        self.leaf_ext: dict[IterVar, int] = {}
        self.rel: dict[IterVar, Expr] = {}  # root axis -> value relative to the region start
        self.conds: list[Expr] = []
        self.buffer: Buffer | None = None
        self.outer: list[IterVar] = []      # loops enclosing this stage's nest


class _Lowering:
    def __init__(self, sched: "Schedule", args: list[Tensor], name: str) -> None:
        self.sched = sched
        self.name = name
        self.stages = [st for st in sched.stages if st.op is not None and not st.inlined]
        for st in self.stages:
            accel = [what for what, on in (("tensorize", st.tensorized), ("pragma", st.pragmas), ("vthread", st.vthread),
                                           (f"scope {st.scope!r}", st.scope in ("inp", "wgt", "acc"))) if on]
            if accel:
                raise TirError(f"stage {st.name} uses accelerator features ({', '.join(accel)}); the CPU/GPU targets "
                               f"take local/shared/global scopes and vectorize/parallel/unroll/bind")
        for o in sched.outputs:
            if sched[o].inlined:
                raise TirError(f"output {o.name} cannot be compute_inline'd")
            if sched[o].attach is not None:
                raise TirError(f"output {o.name} cannot be compute_at another stage; outputs are computed at the root")
        self.info: dict = {st: _StageInfo(st) for st in self.stages}
        self.bodies: dict = {}
        self.buffers: dict[Tensor, Buffer] = {}
        placeholders = [st.tensor for st in sched.stages if st.op is None]
        outs = list(sched.outputs)
        if args is None:
            args = placeholders + outs
        for t in args:
            if not isinstance(t, Tensor):
                raise TirError(f"args: {t!r} is not a tensor")
        missing = [t.name for t in placeholders if t not in args]
        if missing:
            raise TirError(f"args: the computation reads placeholders {missing} that are not in args")
        for o in outs:
            if o not in args:
                raise TirError(f"args: output {o.name} is not in args")
        inputs = [t for t in args if t.op is None]
        extra = [t.name for t in args if t.op is not None and t not in outs]
        if extra:
            raise TirError(f"args: {extra} are neither placeholders nor outputs of the schedule")
        self.inputs, self.outputs = inputs, outs
        for t in inputs + outs:
            self.buffers[t] = Buffer(t.name, t.dtype, t.shape, "arg")
        self.temps: list[Buffer] = []
        for st in self.stages:
            t = st.tensor
            if t in self.buffers:
                continue
            if st.attach is None:
                b = Buffer(t.name, t.dtype, t.shape, "temp")
                self.temps.append(b)
                self.buffers[t] = b

    # ------------------------------------------------------------ bodies
    def body(self, st: "Stage") -> Expr:
        """The stage body with inlined producers substituted (tensor loads of other stages kept)."""
        if st not in self.bodies:
            self.bodies[st] = self._inline(st.op.body)
        return self.bodies[st]

    def _inline(self, e: Expr) -> Expr:
        def load(ld: Load, idx):
            t = ld.tensor
            if t.op is not None and self.sched[t].inlined:
                body = self._inline(t.op.body)
                v = substitute(body, dict(zip(t.op.axes, idx)), None)
                return Cast(t.dtype, v) if v.dtype != t.dtype else v
            return Load(t, idx)

        if isinstance(e, Reduce):
            return Reduce(e.op, substitute(e.body, {}, load), e.axes)
        return substitute(e, {}, load)

    # ----------------------------------------------------------- domains
    def outer_loops(self, st: "Stage") -> list[IterVar]:
        if st.attach is None:
            return []
        parent, iv = st.attach
        k = parent.leaf_iter_vars.index(iv)
        return self.outer_loops(parent) + parent.leaf_iter_vars[:k + 1]

    def infer(self) -> None:
        for st in reversed(self.stages):
            inf = self.info[st]
            inf.outer = self.outer_loops(st)
            axes = list(st.op.axes)
            if st.attach is None:
                inf.lo = [Linear(0) for _ in axes]
                exts = list(st.tensor.shape)
            else:
                inf.lo, exts = self._region(st)
                t = st.tensor
                self.buffers[t] = inf.buffer = Buffer(t.name, t.dtype, tuple(exts), "alloc",
                                                      "shared" if st.scope == "shared" else "local")
            for a, n in zip(axes, exts):
                inf.dom[a] = n
            for r in st.op.reduce_axes:
                inf.dom[r] = r.extent
            self._relations(st, inf)

    def _relations(self, st: "Stage", inf: _StageInfo) -> None:
        ext = leaf_extents(st.relations, inf.dom)
        inf.leaf_ext = {lv: ext[lv] for lv in st.leaf_iter_vars}
        val = root_values(st.relations, {lv: lv for lv in st.leaf_iter_vars}, ext.__getitem__,
                          lambda o, f, i: add(mul(o, f), i), lambda v, n, _: (floordiv(v, n), floormod(v, n)))
        for rel in reversed(st.relations):  # a ragged split: guard its parent
            if isinstance(rel, Split) and ext[rel.outer] * ext[rel.inner] != ext[rel.parent]:
                inf.conds.append(Binary("lt", val[rel.parent], Const(ext[rel.parent])))
        inf.rel = {r: val[r] for r in st.root_axes}
        # region that may leave the tensor: guard the absolute index, unless computing the extra points is harmless
        # (every read of a whole tensor stays inside it; reads of attached buffers cover this stage's whole nest)
        ranges = self.ranges()
        if st.attach is not None and self._reads_in_bounds(st, ranges):
            return
        for k, a in enumerate(st.op.axes):
            lo = inf.lo[k]
            if not lo.coefs and lo.const == 0 and inf.dom[a] <= st.tensor.shape[k]:
                continue
            b = var_ranges_bounds(lo, ranges)
            if b is not None and b[0] >= 0 and b[1] + inf.dom[a] <= st.tensor.shape[k]:
                continue
            absval = add(lo.to_expr(), inf.rel[a])
            inf.conds.append(Binary("and", Binary("ge", absval, Const(0)),
                                    Binary("lt", absval, Const(st.tensor.shape[k]))))

    def _reads_in_bounds(self, st: "Stage", ranges: dict) -> bool:
        env = {a: self.root_value(st, a) for a in st.root_axes}
        for ld in loads(self.body(st)):
            t = ld.tensor
            if t.op is not None and self.sched[t].attach is not None:
                continue
            for d, idx in enumerate(ld.indices):
                b = var_ranges_bounds(linear(simplify(substitute(idx, env), ranges)), ranges)
                if b is None or b[0] < 0 or b[1] >= t.shape[d]:
                    return False
        return True

    def ranges(self) -> dict:
        out = {}
        for inf in self.info.values():
            out.update(inf.leaf_ext)
        return out

    def root_value(self, st: "Stage", axis: IterVar) -> Expr:
        inf = self.info[st]
        if axis in st.op.axes:
            return add(inf.lo[list(st.op.axes).index(axis)].to_expr(), inf.rel[axis])
        return inf.rel[axis]

    def _region(self, st: "Stage") -> tuple[list[Linear], list[int]]:
        t = st.tensor
        bound = set(self.outer_loops(st))
        if st.scope == "shared":  # one copy per thread block: it must hold what every thread of the block reads
            kinds = {v: k for s_ in self.stages for v, k in s_.loop_kinds.items()}
            bound = {v for v in bound if not kinds.get(v, "").startswith("threadIdx")}
        ranges = self.ranges()
        per_dim: list[list[tuple[Linear, int]]] = [[] for _ in t.shape]
        readers = [r for r in self.stages if r is not st and any(ld.tensor is t for ld in loads(self.body(r)))]
        if not readers:
            raise TirError(f"stage {st.name} is attached with compute_at but nothing reads it")
        for r in readers:
            rinf = self.info[r]
            if not rinf.rel:
                raise TirError(f"stage {st.name} is read by {r.name}, which is computed before it; "
                               f"compute_at must put a producer inside a consumer's loops")
            scope = set(rinf.outer) | set(r.leaf_iter_vars)
            if not bound <= scope:
                raise TirError(f"stage {st.name}: its reader {r.name} does not run inside {st.attach[0].name}'s loop "
                               f"{st.attach[1].name}, where {st.name} is computed")
            env = {a: self.root_value(r, a) for a in r.root_axes}
            for ld in loads(self.body(r)):
                if ld.tensor is not t:
                    continue
                for d, idx in enumerate(ld.indices):
                    f = linear(simplify(substitute(idx, env), ranges))
                    per_dim[d].append(self._interval(f, bound, ranges))
        lo_out, ext_out = [], []
        for d, items in enumerate(per_dim):
            if any(x is None for x in items):
                lo_out.append(Linear(0))
                ext_out.append(t.shape[d])
                continue
            base = items[0][0]
            same = all(_same_atoms(base, lo) for lo, _ in items)
            if not same:
                lo_out.append(Linear(0))
                ext_out.append(t.shape[d])
                continue
            a = min(lo.const for lo, _ in items)
            b = max(lo.const + n for lo, n in items)
            lo_out.append(Linear(a, base.coefs))
            ext_out.append(b - a)
        return lo_out, ext_out

    @staticmethod
    def _interval(f: Linear, bound: set, ranges: dict):
        lo = Linear(f.const)
        ext = 1
        for atom, c in f.coefs.items():
            if isinstance(atom, Var) and atom in bound:
                lo = lo + Linear(0, {atom: c})
            elif isinstance(atom, Var) and atom in ranges:
                span = c * (ranges[atom] - 1)
                lo = lo + Linear(min(0, span))
                ext += abs(span)
            elif atom_vars(atom) <= bound:
                lo = lo + Linear(0, {atom: c})
            else:
                return None
        return lo, ext

    # -------------------------------------------------------------- nests
    def load_expr(self, ld: Load, idx) -> Expr:
        t = ld.tensor
        buf = self.buffers.get(t)
        if buf is None:
            raise TirError(f"tensor {t.name} has no buffer (internal ordering error)")
        if buf.kind == "alloc":
            inf = self.info[self.sched[t]]
            idx = [sub(i, lo.to_expr()) for i, lo in zip(idx, inf.lo)]
        rng = self._all_ranges
        idx = [linear(simplify(i, rng)).to_expr() for i in idx]
        return BufLoad(buf, linear(simplify(flat_index(list(idx), buf.shape), rng)).to_expr())

    def nest(self, st: "Stage") -> list:
        inf = self.info[st]
        buf = self.buffers[st.tensor]
        env = {a: self.root_value(st, a) for a in st.root_axes}
        body = self.body(st)
        red = isinstance(body, Reduce)
        store_idx = flat_index([inf.rel[a] for a in st.op.axes], buf.shape) if buf.kind == "alloc" else \
            flat_index([env[a] for a in st.op.axes], buf.shape)
        store_idx = linear(simplify(store_idx, self._all_ranges)).to_expr()
        leaves = st.leaf_iter_vars
        reduce_vars = {lv for lv in leaves if lv.kind == "reduce"}

        def vars_of(e):
            return set(_walk_vars(e))

        def wrap(stmts, loops, conds, with_children):
            """Loops around ``stmts``; each guard sits just inside the innermost loop it depends on."""
            depth = {}
            for c in conds:
                vs = vars_of(c)
                depth[id(c)] = max([k for k, lv in enumerate(loops) if lv in vs], default=-1)
            for k in range(len(loops) - 1, -2, -1):
                for c in conds:
                    if depth[id(c)] == k:
                        stmts = [IfThen(c, stmts)]
                if k < 0:
                    break
                lv = loops[k]
                kind = st.loop_kinds.get(lv, "serial")
                pre = self.children(st, lv) if with_children else []
                stmts = [For(lv, inf.leaf_ext[lv], pre + stmts, kind)]
                if with_children and red and lv is leaves[p]:
                    stmts = init + stmts
            return stmts

        init: list = []
        p = -1
        if red:
            value = substitute(body.body, env, self.load_expr)
            if value.dtype != st.tensor.dtype:
                value = Cast(st.tensor.dtype, value)
            cur = BufLoad(buf, store_idx)
            comb = Binary({"sum": "add", "max": "max", "min": "min"}[body.op], cur, value)
            p = next(k for k, lv in enumerate(leaves) if lv.kind == "reduce")
            init_loops = [lv for lv in leaves[p:] if lv.kind == "data"]
            for lv in init_loops:
                kind = st.loop_kinds.get(lv, "serial")
                if kind == "parallel" or "Idx" in kind:
                    raise TirError(f"stage {st.name}: loop {lv.name} is {kind} but sits inside reduce loop "
                                   f"{leaves[p].name}; reorder so data loops bound to threads are outside every "
                                   f"reduce loop")
            init_conds = [c for c in inf.conds if not (vars_of(c) & reduce_vars)]
            init_conds = [c for c in init_conds if vars_of(c) & set(init_loops)]
            init = wrap([Store(buf, store_idx, _identity(body.op, st.tensor.dtype))], init_loops, init_conds, False)
            stmts = [Store(buf, store_idx, comb)]
        else:  # value arithmetic on loop vars simplified like indices: (2 * yo + yi) % 2 -> yi (unrolled: a constant)
            value = simplify(substitute(body, env, self.load_expr), self._all_ranges)
            if value.dtype != st.tensor.dtype:
                value = Cast(st.tensor.dtype, value)
            stmts = [Store(buf, store_idx, value)]
        return wrap(stmts, leaves, inf.conds, True)

    def children(self, st: "Stage", lv: IterVar) -> list:
        """The stages attached at ``lv``, each allocated then computed. Shared-memory fills run between barriers:
        one before a run of consecutive fills (the last iteration's readers are done with the buffers), one after
        it (every fill is complete before anyone reads it), and one inside it only where a fill reads a buffer an
        earlier fill of the run wrote."""
        out: list = []
        run: set = set()  # tensors the current run of shared fills writes (empty: no run open)
        for c in self.stages:
            if c.attach is None or c.attach[0] is not st or c.attach[1] is not lv:
                continue
            cinf = self.info[c]
            if cinf.buffer.scope == "shared":
                if not run or any(ld.tensor in run for ld in loads(self.body(c))):
                    out.append(Sync())
                    run = set()
                run.add(c.tensor)
            elif run:
                out.append(Sync())
                run = set()
            out += [Allocate(cinf.buffer)] + self.nest(c)
        if run:
            out.append(Sync())
        return out

    def run(self) -> PrimFunc:
        self.infer()
        self._all_ranges = self.ranges()
        body = []
        for st in self.stages:
            if st.attach is None:
                body += self.nest(st)
        args = [self.buffers[t] for t in self.inputs + self.outputs]
        return PrimFunc(self.name, args, self.temps, body, len(self.inputs))


def _same_atoms(a: Linear, b: Linear) -> bool:
    return a.coefs.keys() == b.coefs.keys() and all(a.coefs[k] == b.coefs[k] for k in a.coefs)


def _walk_vars(e: Expr):
    from compiler.te.expr import walk

    for n in walk(e):
        if isinstance(n, Var):
            yield n
        if isinstance(n, BufLoad):
            yield from _walk_vars(n.index)


def lower_loops(sched: "Schedule", args: list[Tensor] | None = None, name: str = "op") -> PrimFunc:
    """Lower ``sched`` to loop IR; ``args`` orders the function's tensors (default: placeholders, then outputs)."""
    return _Lowering(sched, args, name).run()
