"""LLVM IR (llvmlite) from loop IR for the host CPU.

The kernel is ``void name(i8* launch, T0* a0, ...)``: ``launch`` is the runtime's parallel-loop
callback (:mod:`compiler.backend.llvm.parallel`), then one pointer per argument and temporary buffer.
Index arithmetic runs in i64; values in their dtype (float32, int8/16/32/64, bool as i1).
``vectorize`` loops become LLVM vector operations (contiguous accesses as vector loads/stores,
the rest gathered/scattered lane by lane), ``unroll`` loops are replicated, ``parallel`` loops
are outlined into a task function run by the thread pool. An unrolled loop around a vectorized one
whose accesses step far per lane and by one per iteration (a channel-blocked copy of NCHW data, an
NCHW output tile of a channel-vector conv) reads or writes whole rows and transposes them in
registers (``_transposed_loads``, ``_transposed_stores``).
"""
from __future__ import annotations

import functools
import itertools

from llvmlite import ir

from compiler.te.expr import Binary, Call, Cast, Const, Expr, Select, Var, is_float, is_unsigned, walk
from compiler.tir.arith import atom_vars, linear, pow2_pieces, substitute, var_ranges_bounds
from compiler.tir.errors import TirError
from compiler.tir.ir import Allocate, BufLoad, Buffer, For, IfThen, PrimFunc, Store, Sync

I1, I8, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(64)
F32 = ir.FloatType()
_TYPES = {"bool": I8, "int8": I8, "uint8": I8, "int16": ir.IntType(16), "int32": ir.IntType(32), "int64": I64, "float32": F32}
_IDS = itertools.count()
_FLOAT_FLAGS = ("contract",)
_LLVM_MATH = {"exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "abs": "llvm.fabs", "floor": "llvm.floor",
              "round": "llvm.rint", "sin": "llvm.sin", "cos": "llvm.cos"}
_LIBM = {"tanh": "tanhf", "erf": "erff"}


def mem_type(dtype: str) -> ir.Type:
    return _TYPES[dtype]


def _align(ty: ir.Type) -> int:
    return 4 if ty == F32 else max(1, ty.width // 8)


def _width(ty: ir.Type) -> int:
    return 32 if ty == F32 else ty.width


def _is_vec(v: ir.Value) -> bool:
    return isinstance(v.type, ir.VectorType)


class _Ctx:
    """Per-function state: builder, variable values, buffer pointers."""

    def __init__(self, fn: ir.Function, b: ir.IRBuilder, env: dict, bufs: dict) -> None:
        self.fn, self.b, self.env, self.bufs = fn, b, env, bufs


class LlvmCodegen:
    """Emits one module holding the kernel and its outlined parallel tasks."""

    def __init__(self, f: PrimFunc, name: str | None = None) -> None:
        self.f = f
        self.name = name or f"vta_te_{f.name}_{next(_IDS)}"
        self.module = ir.Module(name=self.name)
        self.buffers = list(f.args) + list(f.temps)
        self.vec: tuple[Var, int, int] | None = None  # (loop var, lanes, offset of lane 0)
        self.in_parallel = False
        self.ntasks = 0
        self.select_depth = 0
        self.ranges: dict = {}  # loop var -> extent (to prove loads in bounds)
        self.pre: dict = {}  # id(BufLoad) -> (vector var, unrolled var, its columns): see _transposed_loads
        self._setup()

    def _setup(self) -> None:
        """Create the kernel function ``void name(i8* launch, buffers...)``."""
        tys = [mem_type(b.dtype).as_pointer() for b in self.buffers]
        fty = ir.FunctionType(ir.VoidType(), [I8.as_pointer()] + tys)
        fn = ir.Function(self.module, fty, self.name)
        for a in fn.args[1:]:
            a.add_attribute("noalias")
        self.launch = fn.args[0]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.c = _Ctx(fn, b, {}, dict(zip(self.buffers, fn.args[1:])))

    # ------------------------------------------------------------ driver
    def generate(self) -> ir.Module:
        self.stmts(self.f.body)
        self.c.b.ret_void()
        return self.module

    def stmts(self, body: list) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s) -> None:
        if isinstance(s, For):
            self.loop(s)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, IfThen):
            self.if_then(s)
        elif isinstance(s, Allocate):
            self.allocate(s.buffer)
        elif isinstance(s, Sync):
            return
        else:
            raise TirError(f"llvm codegen: unknown statement {s!r}")

    # ---------------------------------------------------------- memory
    def allocate(self, buf: Buffer) -> None:
        b = self.c.b
        cur = b.block
        b.position_at_start(self.c.fn.entry_basic_block)
        slot = b.alloca(ir.ArrayType(mem_type(buf.dtype), buf.size))
        slot.align = 64
        ptr = b.bitcast(slot, mem_type(buf.dtype).as_pointer())
        b.position_at_end(cur)
        self.c.bufs[buf] = ptr

    def _ptr(self, buf: Buffer) -> ir.Value:
        if buf not in self.c.bufs:
            raise TirError(f"llvm codegen: buffer {buf.name} used outside its allocation")
        return self.c.bufs[buf]

    def _lane_step(self, index: Expr):
        """How far ``index`` moves per lane of the vector loop (its variable's coefficient), or ``None`` where the
        variable appears other than linearly."""
        var = self.vec[0]
        f = linear(index)
        for atom in f.coefs:
            if not isinstance(atom, Var) and var in atom_vars(atom):
                return None
        return f.coefs.get(var, 0)

    def _contiguous(self, index: Expr):
        """``(base index expr, 'contig'|'uniform')`` of ``index`` in the vector loop, or ``None`` (gather)."""
        c = self._lane_step(index)
        if c is None:
            return None
        if c == 0:
            return index, "uniform"
        if c == 1:
            return substitute(index, {self.vec[0]: Const(self.vec[2])}), "contig"
        return None

    def _maybe_out_of_bounds(self, e: BufLoad) -> bool:
        bnd = var_ranges_bounds(linear(e.index), self.ranges)
        return bnd is None or bnd[0] < 0 or bnd[1] >= e.buffer.size

    def _clamped_load(self, e: BufLoad) -> ir.Value:
        """A load inside a select branch whose index may leave the buffer (e.g. padding): the index is clamped so the
        access is always legal; the select discards the value where its condition is false."""
        b = self.c.b
        ptr = self._ptr(e.buffer)
        ty = mem_type(e.buffer.dtype)
        how = self._contiguous(e.index) if self.vec is not None else None
        if how is not None and how[1] == "contig" and e.buffer.size >= self.vec[1]:
            return self._guarded_vector_load(e, self.index(how[0]))
        idx = self.index(e.index)
        lo = self._splat_like(ir.Constant(I64, 0), idx)
        hi = self._splat_like(ir.Constant(I64, e.buffer.size - 1), idx)
        idx = b.select(b.icmp_signed("<", idx, lo), lo, idx)
        idx = b.select(b.icmp_signed(">", idx, hi), hi, idx)
        if not _is_vec(idx):
            return self._from_mem(b.load(b.gep(ptr, [idx], inbounds=True)), e.buffer.dtype)
        out = ir.Constant(ir.VectorType(ty, idx.type.count), ir.Undefined)
        for k in range(idx.type.count):
            kk = ir.Constant(ir.IntType(32), k)
            out = b.insert_element(out, b.load(b.gep(ptr, [b.extract_element(idx, kk)], inbounds=True)), kk)
        return self._from_mem(out, e.buffer.dtype)

    def _strided(self, index: Expr) -> tuple[Expr, int] | None:
        """``(lane-0 index, stride)`` of ``index`` in the vector loop when it steps 1..4 elements per lane, else
        None."""
        c = self._lane_step(index)
        if not isinstance(c, int) or not 1 <= c <= 4:
            return None
        return substitute(index, {self.vec[0]: Const(self.vec[2])}), c

    def _window_load(self, e: BufLoad, base: Expr, stride: int, lanes: int, masked: bool) -> ir.Value:
        """The lanes ``base + k * stride`` of ``e``'s buffer as one load of ``stride * lanes`` contiguous elements
        (``masked``: only the elements inside the buffer are read, the others are zero) and, with ``stride`` > 1,
        a shuffle picking every ``stride``-th (stride-2 columns of padded convs: no per-lane gather)."""
        b = self.c.b
        ty = mem_type(e.buffer.dtype)
        width = stride * lanes
        vty = ir.VectorType(ty, width)
        i0 = self.index(base)
        p = b.bitcast(b.gep(self._ptr(e.buffer), [i0]), vty.as_pointer())
        if masked and e.buffer.size >= width:
            # one scalar test per window: a plain load where the whole window lies in the buffer (a padded copy's
            # rows away from the buffer's two ends), the masked load only there (per-lane mask arithmetic and
            # vmaskmovps for every window were most of a stride-2 depthwise layer's padded-plane build)
            ok = b.and_(b.icmp_signed(">=", i0, ir.Constant(I64, 0)),
                        b.icmp_signed("<=", i0, ir.Constant(I64, e.buffer.size - width)))
            with b.if_else(ok, likely=True) as (inside, border):
                with inside:
                    v_in = b.load(p, align=_align(ty))
                    bb_in = b.block
                with border:
                    v_out = self._masked_window(e, i0, p, vty)
                    bb_out = b.block
            v = b.phi(vty)
            v.add_incoming(v_in, bb_in)
            v.add_incoming(v_out, bb_out)
        elif masked:
            v = self._masked_window(e, i0, p, vty)
        else:
            v = b.load(p, align=_align(ty))
        if stride > 1:
            v = b.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                                 ir.Constant(ir.VectorType(ir.IntType(32), lanes), [k * stride for k in range(lanes)]))
        return self._from_mem(v, e.buffer.dtype)

    def _masked_window(self, e: BufLoad, i0: ir.Value, p: ir.Value, vty: ir.VectorType) -> ir.Value:
        """``vty``'s elements from ``p`` (= element ``i0`` of ``e``'s buffer), reading only those inside the buffer
        (the others are zero): ``llvm.masked.load``."""
        b = self.c.b
        ty, width = vty.element, vty.count
        it = ir.IntType(32) if e.buffer.size + width < 1 << 31 else I64  # lane indices: one unsigned compare
        ix = b.trunc(i0, it) if it != I64 else i0
        idx = b.add(self._broadcast(ix, width), ir.Constant(ir.VectorType(it, width), list(range(width))))
        inside = b.icmp_unsigned("<", idx, ir.Constant(ir.VectorType(it, width), [e.buffer.size] * width))
        suffix = f"v{width}{'f32' if ty == F32 else f'i{ty.width}'}"
        name = f"llvm.masked.load.{suffix}.p0"
        fty = ir.FunctionType(vty, [vty.as_pointer(), ir.IntType(32), ir.VectorType(I1, width), vty])
        fn = self._declare(name, fty)
        return b.call(fn, [p, ir.Constant(ir.IntType(32), _align(ty)), inside, ir.Constant(vty, None)])

    def _guarded_vector_load(self, e: BufLoad, base: ir.Value) -> ir.Value:
        """A contiguous vector load at ``base`` inside a select: one vector load where every lane is in the buffer
        (a padded copy's interior), else the lanes clamped one by one (its border)."""
        b = self.c.b
        lanes = self.vec[1]
        ty = mem_type(e.buffer.dtype)
        vty = ir.VectorType(ty, lanes)
        ok = b.and_(b.icmp_signed(">=", base, ir.Constant(I64, 0)),
                    b.icmp_signed("<=", base, ir.Constant(I64, e.buffer.size - lanes)))
        with b.if_else(ok, likely=True) as (inside, border):
            with inside:
                p = b.gep(self._ptr(e.buffer), [base], inbounds=True)
                v_in = b.load(b.bitcast(p, vty.as_pointer()), align=_align(ty))
                bb_in = b.block
            with border:
                hi = ir.Constant(I64, e.buffer.size - 1)
                v_out = ir.Constant(vty, ir.Undefined)
                for k in range(lanes):
                    ik = b.add(base, ir.Constant(I64, k))
                    ik = b.select(b.icmp_signed("<", ik, ir.Constant(I64, 0)), ir.Constant(I64, 0), ik)
                    ik = b.select(b.icmp_signed(">", ik, hi), hi, ik)
                    v_out = b.insert_element(v_out, b.load(b.gep(self._ptr(e.buffer), [ik], inbounds=True)),
                                             ir.Constant(ir.IntType(32), k))
                bb_out = b.block
        phi = b.phi(vty)
        phi.add_incoming(v_in, bb_in)
        phi.add_incoming(v_out, bb_out)
        return self._from_mem(phi, e.buffer.dtype)

    def load(self, e: BufLoad) -> ir.Value:
        hit = self.pre.get(id(e)) if self.vec is not None else None  # see _transposed_loads
        if hit is not None and hit[0] is self.vec[0] and self.vec[2] == 0:  # a column of a transposed block
            return hit[2][self.c.env[hit[1]].constant]
        b = self.c.b
        ptr = self._ptr(e.buffer)
        ty = mem_type(e.buffer.dtype)
        if self.vec is not None and (ty == F32 or isinstance(ty, ir.IntType) and ty.width in (8, 16, 32, 64)):
            st = self._strided(e.index)
            narrow = isinstance(ty, ir.IntType) and ty.width < 32  # no masked vector load of bytes / halves on x86:
            if st is not None and st[1] * self.vec[1] <= 64 and (  # those take _clamped_load's guarded vector load
                    st[1] > 1 or self.select_depth and self._maybe_out_of_bounds(e) and not narrow):
                # a padded input's row inside its select (lanes past the buffer read nothing), or a strided row
                bnd = var_ranges_bounds(linear(e.index), self.ranges)
                masked = bnd is None or bnd[0] < 0 or bnd[1] + st[1] - 1 >= e.buffer.size
                return self._window_load(e, st[0], st[1], self.vec[1], masked)
        if self.select_depth and self._maybe_out_of_bounds(e):
            return self._clamped_load(e)
        if self.vec is not None:
            how = self._contiguous(e.index)
            lanes = self.vec[1]
            if how is not None and how[1] == "contig":
                p = b.gep(ptr, [self.index(how[0])], inbounds=True)
                v = b.load(b.bitcast(p, ir.VectorType(ty, lanes).as_pointer()), align=_align(ty))
                return self._from_mem(v, e.buffer.dtype)
            if how is None:
                idx = self.index(e.index)
                out = ir.Constant(ir.VectorType(ty, lanes), ir.Undefined)
                for k in range(lanes):
                    ik = b.extract_element(idx, ir.Constant(ir.IntType(32), k)) if _is_vec(idx) else idx
                    out = b.insert_element(out, b.load(b.gep(ptr, [ik], inbounds=True)), ir.Constant(ir.IntType(32), k))
                return self._from_mem(out, e.buffer.dtype)
        v = b.load(b.gep(ptr, [self.index(e.index)], inbounds=True))
        return self._from_mem(v, e.buffer.dtype)

    def _from_mem(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "bool":
            zero = self._splat_like(ir.Constant(I8, 0), v)
            return self.c.b.icmp_signed("!=", v, zero)
        return v

    def store(self, s: Store) -> None:
        b = self.c.b
        ptr = self._ptr(s.buffer)
        ty = mem_type(s.buffer.dtype)
        val = self.convert(self.value(s.value), s.value.dtype, s.buffer.dtype)
        if s.buffer.dtype == "bool":
            val = b.zext(val, self._vec_type(I8, val))
        if self.vec is not None:
            lanes = self.vec[1]
            how = self._contiguous(s.index)
            if how is not None and how[1] == "contig":
                val = self._broadcast(val, lanes)
                p = b.gep(ptr, [self.index(how[0])], inbounds=True)
                b.store(val, b.bitcast(p, ir.VectorType(ty, lanes).as_pointer()), align=_align(ty))
                return
            idx = self.index(s.index)
            if not _is_vec(idx) and not _is_vec(val):
                b.store(val, b.gep(ptr, [idx], inbounds=True))
                return
            if not _is_vec(idx):
                raise TirError(f"vectorized loop {self.vec[0].name}: every lane stores to the same element of "
                               f"{s.buffer.name}; vectorize a loop the stored index depends on")
            for k in range(lanes):
                kk = ir.Constant(ir.IntType(32), k)
                ik = b.extract_element(idx, kk) if _is_vec(idx) else idx
                vk = b.extract_element(val, kk) if _is_vec(val) else val
                b.store(vk, b.gep(ptr, [ik], inbounds=True))
            return
        b.store(val, b.gep(ptr, [self.index(s.index)], inbounds=True))

    # ------------------------------------------------------------ control
    def if_then(self, s: IfThen) -> None:
        cond = self.convert(self.value(s.cond), s.cond.dtype, "bool")
        if not _is_vec(cond):
            with self.c.b.if_then(cond):
                self.stmts(s.body)
            return
        # a guard inside a vectorized loop: the vector body when every lane passes, else the lanes one by one
        b = self.c.b
        lanes = cond.type.count
        every = b.icmp_unsigned("==", b.bitcast(cond, ir.IntType(lanes)), ir.Constant(ir.IntType(lanes), (1 << lanes) - 1))
        with b.if_else(every) as (full, partial):
            with full:
                self.stmts(s.body)
            with partial:
                var, vec_val = self.vec[0], self.c.env[self.vec[0]]
                saved = self.vec
                self.vec = None
                try:
                    self.serial(For(var, lanes, [s]), saved[2], saved[2] + lanes)
                finally:
                    self.vec = saved
                    self.c.env[var] = vec_val

    def loop(self, s: For) -> None:
        kind = s.kind
        self.ranges[s.var] = s.extent
        if kind.startswith(("blockIdx", "threadIdx")):
            raise TirError(f"loop {s.var.name} is bound to {kind}: bind is for target='cuda'; on the CPU use "
                           f"parallel/vectorize")
        if kind == "unroll":
            if self.vec is None and self._transposed_stores(s):
                return
            pre = self._transposed_loads(s) if self.vec is None else {}
            self.pre.update(pre)
            try:
                for k in range(s.extent):
                    self.c.env[s.var] = ir.Constant(I64, k)
                    self.stmts(s.body)
            finally:
                for key in pre:
                    self.pre.pop(key, None)
            del self.c.env[s.var]
            return
        if kind == "vectorize" and s.extent > 1 and self.vec is None and _vectorizable(s):
            # power-of-two pieces (LLVM's optimizer mishandles some odd vector widths): 10 lanes -> 8 + 2
            offset = 0
            for lanes in pow2_pieces(s.extent):
                if lanes == 1:
                    self.c.env[s.var] = ir.Constant(I64, offset)
                    self.stmts(s.body)
                else:
                    self.vec = (s.var, lanes, offset)
                    self.c.env[s.var] = ir.Constant(ir.VectorType(I64, lanes), list(range(offset, offset + lanes)))
                    try:
                        self.stmts(s.body)
                    finally:
                        self.vec = None
                offset += lanes
            del self.c.env[s.var]
            return
        if kind == "parallel" and not self.in_parallel and self.vec is None:
            self.parallel(s)
            return
        self.serial(s, 0, s.extent)

    def _transposed_loads(self, s: For) -> dict:
        """An unrolled loop ``u`` of L iterations around a vectorized loop ``v`` of L lanes (L = 4, 8, 16) whose
        loads step far in ``v`` and 1-4 elements in ``u`` (a channel-blocked copy of NCHW data: ``pad[.., x, c] =
        data[.., c, .., x]``, 8 channels x 8 columns): each such load's L x L block is read as L row windows along
        ``u`` (one vector load each, masked where a window may leave the buffer; strided ones shuffled), transposed in
        registers (log2(L) rounds of L shuffles), and iteration ``u`` of the loop takes column ``u`` as its vector
        instead of gathering L lanes one by one. Returns ``{id(load): (v, u, columns)}`` (empty where nothing
        applies: other loop shapes, 1- or 2-byte and 8-byte elements, loads of a buffer the body stores to)."""
        lanes = s.extent
        inner = s.body[0] if len(s.body) == 1 else None
        if isinstance(inner, IfThen) and len(inner.body) == 1:  # a ragged split's guard on u: the rows are read
            inner = inner.body[0]                                  # before it (masked where they may leave the buffer)
        if (lanes not in (4, 8, 16) or not isinstance(inner, For) or inner.kind != "vectorize"
                or inner.extent != lanes or not _vectorizable(inner)):
            return {}
        u, v = s.var, inner.var
        stored, found = set(), {}

        def visit(stmts) -> None:
            for x in stmts:
                exprs = [x.cond] if isinstance(x, IfThen) else [x.index, x.value]
                if isinstance(x, IfThen):
                    visit(x.body)
                else:
                    stored.add(x.buffer)
                for e in exprs:
                    for n in walk(e):
                        if isinstance(n, BufLoad):
                            found[id(n)] = n
        visit(inner.body)
        self.ranges[v] = lanes
        out = {}
        try:
            for e in found.values():
                if e.buffer in stored or mem_type(e.buffer.dtype) not in (F32, ir.IntType(32)):
                    continue
                f = linear(e.index)
                if any(not isinstance(a, Var) and atom_vars(a) & {u, v} for a in f.coefs):
                    continue
                sv, su = f.coefs.get(v, 0), f.coefs.get(u, 0)
                if not isinstance(sv, int) or not isinstance(su, int) or sv <= 4 or not 1 <= su <= 4:
                    continue  # lanes 0/1/2-4 apart already load as vectors or windows
                bnd = var_ranges_bounds(f, self.ranges)
                masked = bnd is None or bnd[0] < 0 or bnd[1] + su - 1 >= e.buffer.size
                rows = [self._window_load(e, substitute(e.index, {v: Const(k), u: Const(0)}), su, lanes, masked)
                        for k in range(lanes)]
                out[id(e)] = (v, u, self._transpose(rows))
        finally:
            del self.ranges[v]
        return out

    def _transpose(self, rows: list) -> list:
        """The columns of the square block whose rows are the L vectors ``rows``: log2(L) rounds, the round of
        distance d swapping the off-diagonal d x d blocks of each 2d x 2d block (L shuffles a round)."""
        b, n, rows = self.c.b, len(rows), list(rows)
        mask = lambda m: ir.Constant(ir.VectorType(ir.IntType(32), n), m)  # noqa: E731
        d = n // 2
        while d >= 1:
            lo = mask([j if not j & d else n + j - d for j in range(n)])
            hi = mask([j + d if not j & d else n + j for j in range(n)])
            for i in range(n):
                if not i & d:
                    a, c = rows[i], rows[i + d]
                    rows[i], rows[i + d] = b.shuffle_vector(a, c, lo), b.shuffle_vector(a, c, hi)
            d //= 2
        return rows

    @staticmethod
    def _steps_across(index: Expr, u: Var, v: Var, extent: int) -> bool:
        """``index`` moves 1 element per step of ``u`` and at least ``extent`` per lane of ``v`` (linearly): each
        lane of ``v`` owns a row of ``extent`` contiguous elements (an NCHW output pixel tile, one row a channel)."""
        f = linear(index)
        if any(not isinstance(a, Var) and atom_vars(a) & {u, v} for a in f.coefs):
            return False
        sv, su = f.coefs.get(v, 0), f.coefs.get(u, 0)
        return isinstance(sv, int) and isinstance(su, int) and su == 1 and abs(sv) >= extent

    def _transposed_stores(self, s: For) -> bool:
        """An unrolled loop ``u`` of U <= 16 iterations around a vectorized loop ``v`` of V = 8 or 16 lanes holding
        one store that steps 1 element in ``u`` and at least U in ``v`` (a channel-vector conv's output tile stored
        NCHW: U pixels x V channels, one channel's pixels contiguous): the U row vectors are computed, transposed in
        registers (P x P blocks, P = U rounded up to a power of two) and stored as V rows of U contiguous elements
        (masked where U < P) instead of V scattered lanes each. Loads in the stored value that step the same way (a
        fused residual) are read as V windows and transposed the other way. A guard on the rows (around ``v`` or
        the store; a ragged last tile: ``base + u < extent``) is tested for the first and the last row: the
        transposed rows where both hold, the rows one by one (lane stores) in the ragged tile. Returns False
        (nothing emitted) where the loop is not of that shape."""
        inner, guard = s.body[0] if len(s.body) == 1 else None, None
        if isinstance(inner, IfThen) and len(inner.body) == 1:  # a ragged tile's guard on the rows, around v
            inner, guard = inner.body[0], inner.cond
        if (not 2 <= s.extent <= 16 or not isinstance(inner, For) or inner.kind != "vectorize"
                or inner.extent not in (8, 16) or len(inner.body) != 1):
            return False
        st = inner.body[0]
        if isinstance(st, IfThen) and len(st.body) == 1 and guard is None:  # the guard inside v
            st, guard = st.body[0], st.cond
        if guard is not None and not self._rows_guard(guard, s.var, inner.var):
            return False
        if not isinstance(st, Store):
            return False
        u, v, n_u, n_v = s.var, inner.var, s.extent, inner.extent
        pw = 1 << (n_u - 1).bit_length()
        ty = mem_type(st.buffer.dtype)
        if n_v % pw or ty not in (F32, ir.IntType(32)) or st.value.dtype != st.buffer.dtype:
            return False
        if not self._steps_across(st.index, u, v, n_u):
            return False
        loads = [e for e in walk(st.value) if isinstance(e, BufLoad)]
        if any(e.buffer is st.buffer for e in loads):
            return False
        b = self.c.b
        if guard is not None:  # every row stored: the transposed rows; else (the ragged tile) row by row, guarded
            ends = []
            for k in (0, n_u - 1):
                self.c.env[u] = ir.Constant(I64, k)
                ends.append(self.convert(self.value(guard), guard.dtype, "bool"))
            del self.c.env[u]
            with b.if_else(b.and_(*ends), likely=True) as (every, ragged):
                with every:
                    self._emit_transposed(st, u, v, n_u, n_v, pw, loads)
                with ragged:
                    for k in range(n_u):
                        self.c.env[u] = ir.Constant(I64, k)
                        self.stmts(s.body)
                    del self.c.env[u]
            return True
        self._emit_transposed(st, u, v, n_u, n_v, pw, loads)
        return True

    def _rows_guard(self, cond: Expr, u: Var, v: Var) -> bool:
        """``cond`` holds for every row ``u`` of a tile where it holds for the first and the last: a conjunction of
        comparisons of expressions linear in ``u`` (a ragged tile's ``base + u < extent``), none reading ``v``."""
        for c in _conjuncts(cond):
            if not isinstance(c, Binary) or c.op not in ("lt", "le", "ge", "gt"):
                return False
            for side in (c.a, c.b):
                if any(isinstance(n, Var) and n is v for n in walk(side)):
                    return False
                if any(not isinstance(a, Var) and u in atom_vars(a) for a in linear(side).coefs):
                    return False
        return True

    def _emit_transposed(self, st: Store, u: Var, v: Var, n_u: int, n_v: int, pw: int, loads: list) -> None:
        """The body of :meth:`_transposed_stores` (its loop shape checked): rows computed, transposed, stored."""
        ty = mem_type(st.buffer.dtype)
        self.ranges[v] = n_v
        try:
            pre = {}
            for e in loads:
                if id(e) in pre or mem_type(e.buffer.dtype) != ty or not self._steps_across(e.index, u, v, n_u):
                    continue
                bnd = var_ranges_bounds(linear(e.index), self.ranges)
                masked = bnd is None or bnd[0] < 0 or bnd[1] + pw - n_u >= e.buffer.size
                cols = [self._window_load(e, substitute(e.index, {u: Const(0), v: Const(j)}), 1, pw, masked)
                        for j in range(n_v)]
                pre[id(e)] = (v, u, self._transpose_rect(cols))
            self.pre.update(pre)
            rows = []
            try:
                for k in range(n_u):
                    self.c.env[u] = ir.Constant(I64, k)
                    self.c.env[v] = ir.Constant(ir.VectorType(I64, n_v), list(range(n_v)))
                    self.vec = (v, n_v, 0)
                    val = self.convert(self.value(st.value), st.value.dtype, st.buffer.dtype)
                    rows.append(self._broadcast(val, n_v))
            finally:
                self.vec = None
                for key in pre:
                    self.pre.pop(key, None)
                self.c.env.pop(v, None)
                self.c.env.pop(u, None)
            rows += [ir.Constant(rows[0].type, ir.Undefined)] * (pw - n_u)
            for j, col in enumerate(self._transpose_rect(rows)):
                i0 = self.index(substitute(st.index, {u: Const(0), v: Const(j)}))
                self._store_row(st.buffer, i0, col, n_u)
        finally:
            del self.ranges[v]

    def _store_row(self, buf: Buffer, i0: ir.Value, vec: ir.Value, n: int) -> None:
        """Store the first ``n`` lanes of ``vec`` at element ``i0`` of ``buf``: one store where ``n`` is all of
        it, else a masked store on AVX-512 (a mask register), else power-of-two pieces (AVX2's ``vmaskmovps``
        store is microcoded on AMD cores before Zen 4)."""
        from compiler.backend.llvm.host import target_cpu

        b, ty, width = self.c.b, mem_type(buf.dtype), vec.type.count
        base = b.gep(self._ptr(buf), [i0], inbounds=True)
        if n == width:
            b.store(vec, b.bitcast(base, vec.type.as_pointer()), align=_align(ty))
            return
        if "avx512f" in target_cpu().enabled:
            vty = vec.type
            name = f"llvm.masked.store.v{width}{'f32' if ty == F32 else 'i32'}.p0"
            store = self._declare(name, ir.FunctionType(ir.VoidType(), [vty, vty.as_pointer(), ir.IntType(32),
                                                                      ir.VectorType(I1, width)]))
            mask = ir.Constant(ir.VectorType(I1, width), [k < n for k in range(width)])
            b.call(store, [vec, b.bitcast(base, vty.as_pointer()), ir.Constant(ir.IntType(32), _align(ty)), mask])
            return
        offset = 0
        for lanes in pow2_pieces(n):
            p = b.gep(base, [ir.Constant(I64, offset)], inbounds=True)
            if lanes == 1:
                b.store(b.extract_element(vec, ir.Constant(ir.IntType(32), offset)), p, align=_align(ty))
            else:
                piece = b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                               list(range(offset, offset + lanes))))
                b.store(piece, b.bitcast(p, piece.type.as_pointer()), align=_align(ty))
            offset += lanes

    def _transpose_rect(self, vecs: list) -> list:
        """The transpose of the matrix whose rows are ``vecs`` (A vectors of B lanes, A and B powers of two): B
        vectors of A lanes, through A x A (A < B: each row split in B / A pieces) or B x B (A > B: joined
        pairwise after) square transposes."""
        b, n_a, n_b = self.c.b, len(vecs), vecs[0].type.count
        if n_a == n_b:
            return self._transpose(vecs)
        imask = lambda m: ir.Constant(ir.VectorType(ir.IntType(32), len(m)), m)  # noqa: E731
        if n_a < n_b:
            out = []
            for c in range(n_b // n_a):
                piece = imask(list(range(c * n_a, (c + 1) * n_a)))
                out += self._transpose([b.shuffle_vector(r, r, piece) for r in vecs])
            return out
        groups = [self._transpose(vecs[g * n_b:(g + 1) * n_b]) for g in range(n_a // n_b)]
        return [self._concat(list(column)) for column in zip(*groups)]

    def _concat(self, pieces: list) -> ir.Value:
        """One vector of the equal-width ``pieces`` (a power-of-two count) in order, joined pairwise."""
        b = self.c.b
        while len(pieces) > 1:
            n = pieces[0].type.count
            join = ir.Constant(ir.VectorType(ir.IntType(32), 2 * n), list(range(2 * n)))
            pieces = [b.shuffle_vector(pieces[k], pieces[k + 1], join) for k in range(0, len(pieces), 2)]
        return pieces[0]

    def _declare(self, name: str, fty: ir.FunctionType) -> ir.Function:
        """The module's declaration of the intrinsic or library function ``name`` (made on first use)."""
        return self.module.globals.get(name) or ir.Function(self.module, fty, name)

    def serial(self, s: For, start, stop) -> None:
        b = self.c.b
        start = ir.Constant(I64, start) if isinstance(start, int) else start
        stop = ir.Constant(I64, stop) if isinstance(stop, int) else stop
        pre = b.block
        head = b.append_basic_block(f"{s.var.name}.head")
        body = b.append_basic_block(f"{s.var.name}.body")
        end = b.append_basic_block(f"{s.var.name}.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=s.var.name)
        i.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", i, stop), body, end)
        b.position_at_end(body)
        self.c.env[s.var] = i
        self.stmts(s.body)
        del self.c.env[s.var]
        nxt = b.add(i, ir.Constant(I64, 1), flags=["nsw"])
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(end)

    def parallel(self, s: For) -> None:
        """Outline ``s`` into a task ``void(i64 begin, i64 end, i64* closure)`` and hand it to the runtime."""
        outer = self.c
        b = outer.b
        captured = list(outer.env.items()) + list(outer.bufs.items())
        tname = f"{self.name}_task{self.ntasks}"
        self.ntasks += 1
        tfn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [I64, I64, I64.as_pointer()]), tname)
        # closure: one i64 per captured value, in the caller's entry block
        cur = b.block
        b.position_at_start(outer.fn.entry_basic_block)
        clo = b.alloca(ir.ArrayType(I64, max(1, len(captured))))
        b.position_at_end(cur)
        for k, (_, v) in enumerate(captured):
            slot = b.gep(clo, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), k)])
            b.store(b.ptrtoint(v, I64) if isinstance(v.type, ir.PointerType) else v, slot)
        launch_ty = ir.FunctionType(ir.VoidType(), [I8.as_pointer(), I64, I8.as_pointer()])
        launch = b.bitcast(self.launch, launch_ty.as_pointer())
        b.call(launch, [b.bitcast(tfn, I8.as_pointer()), ir.Constant(I64, s.extent), b.bitcast(clo, I8.as_pointer())])
        # the task body
        tb = ir.IRBuilder(tfn.append_basic_block("entry"))
        env, bufs = {}, {}
        for k, (key, v) in enumerate(captured):
            x = tb.load(tb.gep(tfn.args[2], [ir.Constant(I64, k)]))
            if isinstance(v.type, ir.PointerType):
                bufs[key] = tb.inttoptr(x, v.type)
            else:
                env[key] = x
        self.c = _Ctx(tfn, tb, env, bufs)
        self.in_parallel = True
        try:
            self.serial(For(s.var, s.extent, s.body), tfn.args[0], tfn.args[1])
            tb.ret_void()
        finally:
            self.c = outer
            self.in_parallel = False

    # ------------------------------------------------------------ values
    def _vec_type(self, scalar: ir.Type, like: ir.Value) -> ir.Type:
        return ir.VectorType(scalar, like.type.count) if _is_vec(like) else scalar

    def _splat_like(self, c: ir.Constant, like: ir.Value) -> ir.Value:
        if _is_vec(like):
            return ir.Constant(ir.VectorType(c.type, like.type.count), [c.constant] * like.type.count)
        return c

    def _broadcast(self, v: ir.Value, lanes: int) -> ir.Value:
        if _is_vec(v):
            return v
        if isinstance(v, ir.Constant):
            return ir.Constant(ir.VectorType(v.type, lanes), [v.constant] * lanes)
        b = self.c.b
        t = b.insert_element(ir.Constant(ir.VectorType(v.type, lanes), ir.Undefined), v, ir.Constant(ir.IntType(32), 0))
        return b.shuffle_vector(t, ir.Constant(ir.VectorType(v.type, lanes), ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

    def _match(self, a: ir.Value, b_: ir.Value) -> tuple[ir.Value, ir.Value]:
        if _is_vec(a) and not _is_vec(b_):
            b_ = self._broadcast(b_, a.type.count)
        elif _is_vec(b_) and not _is_vec(a):
            a = self._broadcast(a, b_.type.count)
        return a, b_

    def index(self, e: Expr) -> ir.Value:
        """An integer expression as i64 (scalar, or a vector inside a vectorized loop)."""
        v = self.value(e)
        return self.convert(v, e.dtype, "int64")

    def convert(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """``v`` (computed for dtype ``src``, ints possibly widened to i64) as ``dst``."""
        b = self.c.b
        st = v.type.element if _is_vec(v) else v.type
        if dst == "bool":
            if st == I1:
                return v
            zero = self._splat_like(ir.Constant(st, 0), v)
            return b.fcmp_unordered("!=", v, zero) if st == F32 else b.icmp_signed("!=", v, zero)
        dt = mem_type(dst)
        if st == dt:
            return v
        ty = self._vec_type(dt, v)
        if st == F32:
            return b.fptosi(v, ty)
        if dt == F32:
            return b.uitofp(v, ty) if st == I1 or is_unsigned(src) else b.sitofp(v, ty)
        if st == I1 or (is_unsigned(src) and _width(st) < _width(dt)):
            return b.zext(v, ty)
        return b.trunc(v, ty) if _width(st) > _width(dt) else b.sext(v, ty)

    def value(self, e: Expr) -> ir.Value:
        b = self.c.b
        if isinstance(e, Const):
            if is_float(e.dtype):
                return ir.Constant(F32, float(e.value))
            if e.dtype == "bool":
                return ir.Constant(I1, int(bool(e.value)))
            ty = mem_type(e.dtype)
            return ir.Constant(ty, (int(e.value) + (1 << (ty.width - 1))) % (1 << ty.width) - (1 << (ty.width - 1)))
        if isinstance(e, Var):
            if e not in self.c.env:
                raise TirError(f"llvm codegen: variable {e.name} used outside its loop")
            return self.c.env[e]
        if isinstance(e, BufLoad):
            return self.load(e)
        if isinstance(e, Cast):
            return self.convert(self.value(e.a), e.a.dtype, e.dtype)
        if isinstance(e, Select):
            return self.select(e)
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Binary):
            return self.binary(e)
        raise TirError(f"llvm codegen: cannot compile expression {e!r} ({type(e).__name__})")

    def select(self, e: Select) -> ir.Value:
        """``select(cond, a, b)``. In a vector loop the condition's conjuncts that are the same in every lane (a
        padded copy's row test) select whole vectors with one scalar ``i1``, the others lane by lane: one ``i1``
        vector of a scalar and per-lane bits was built lane by lane (``vpinsrb`` chains) for every row vector."""
        b = self.c.b
        conds = [self.convert(self.value(t), t.dtype, "bool") for t in _conjuncts(e.cond)]
        self.select_depth += 1
        try:
            x, y = self._pair(e.a, e.b, e.dtype)
        finally:
            self.select_depth -= 1
        uniform = [c for c in conds if not _is_vec(c)]
        lanes = [c for c in conds if _is_vec(c)]
        if not lanes:  # one condition for every lane: a vector select on its broadcast (a scalar i1 select of
            c = functools.reduce(b.and_, uniform)  # vectors became branches: the int8 stem's padded copy 1.4x slower)
            if _is_vec(x):
                c = self._broadcast(c, x.type.count)
            return b.select(c, x, y)
        c = functools.reduce(b.and_, lanes)
        x, y = self._broadcast(x, c.type.count), self._broadcast(y, c.type.count)
        x = b.select(c, x, y)
        if uniform:
            x = b.select(functools.reduce(b.and_, uniform), x, y)
        return x

    def _pair(self, ea: Expr, eb: Expr, dtype: str) -> tuple[ir.Value, ir.Value]:
        """Both operands in one type: float32 if ``dtype`` is float, else the wider integer type."""
        x, y = self.value(ea), self.value(eb)
        if is_float(dtype):
            x, y = self.convert(x, ea.dtype, "float32"), self.convert(y, eb.dtype, "float32")
        else:
            wx = (x.type.element if _is_vec(x) else x.type).width
            wy = (y.type.element if _is_vec(y) else y.type).width
            w = max(wx, wy, 8)
            name = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}[w]
            x, y = self.convert(x, ea.dtype, name), self.convert(y, eb.dtype, name)
        return self._match(x, y)

    def binary(self, e: Binary) -> ir.Value:
        b = self.c.b
        op = e.op
        if op in ("and", "or"):
            x = self.convert(self.value(e.a), e.a.dtype, "bool")
            y = self.convert(self.value(e.b), e.b.dtype, "bool")
            x, y = self._match(x, y)
            return b.and_(x, y) if op == "and" else b.or_(x, y)
        cmp_dtype = "float32" if (is_float(e.a.dtype) or is_float(e.b.dtype)) else "int64"
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            x, y = self._pair(e.a, e.b, cmp_dtype)
            sym = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}[op]
            if cmp_dtype == "float32":
                return b.fcmp_unordered(sym, x, y) if op == "ne" else b.fcmp_ordered(sym, x, y)
            return b.icmp_signed(sym, x, y)
        if op == "add" and self.vec is not None:
            dot = self._quad_dot(e)
            if dot is None:
                dot = self._pair_dot(e)
            if dot is not None:
                return dot
        if op == "mul" and self.vec is not None:
            prod = self._narrow_mul(e)
            if prod is not None:
                return prod
        x, y = self._pair(e.a, e.b, e.dtype)
        fl = is_float(e.dtype)
        if op == "add":
            return b.fadd(x, y, flags=_FLOAT_FLAGS) if fl else b.add(x, y)
        if op == "sub":
            return b.fsub(x, y, flags=_FLOAT_FLAGS) if fl else b.sub(x, y)
        if op == "mul":
            return b.fmul(x, y, flags=_FLOAT_FLAGS) if fl else b.mul(x, y)
        if op == "div":
            return b.fdiv(x, y)
        if op in ("min", "max"):
            sym = "<" if op == "min" else ">"
            c = b.fcmp_ordered(sym, x, y) if fl else b.icmp_signed(sym, x, y)
            return b.select(c, x, y)
        if op == "shr":
            return b.ashr(x, y)
        if op == "shl":
            return b.shl(x, y)
        if op in ("floordiv", "floormod"):
            if fl:
                q = self._math("floor", b.fdiv(x, y))
                return q if op == "floordiv" else b.fsub(x, b.fmul(q, y))
            q, r = b.sdiv(x, y), b.srem(x, y)
            zero = self._splat_like(ir.Constant(x.type.element if _is_vec(x) else x.type, 0), x)
            fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("!=", b.icmp_signed("<", r, zero),
                                                                       b.icmp_signed("<", y, zero)))
            if op == "floordiv":
                return b.sub(q, b.zext(fix, q.type))
            return b.select(fix, b.add(r, y), r)
        raise TirError(f"llvm codegen: unknown binary op {op!r}")

    def _pair_dot(self, e: Binary) -> ir.Value | None:
        """``int32(a0) * int32(b0) + int32(a1) * int32(b1)`` with 8/16-bit integer operands in a vectorized loop:
        the operands interleaved as int16 pairs and one ``pmaddwd`` per register (exact: no saturation), which
        LLVM fuses with an accumulator add into ``vpdpwssd`` on VNNI targets. None: ``e`` is not of that form."""
        terms = []
        for m in (e.a, e.b):
            if not (isinstance(m, Binary) and m.op == "mul" and m.dtype == "int32"):
                return None
            for f in (m.a, m.b):
                if not (isinstance(f, Cast) and f.dtype == "int32" and f.a.dtype in ("int8", "uint8", "int16")):
                    return None
            terms.append((m.a.a, m.b.a))
        lanes = self.vec[1]
        if lanes < 4 or lanes & (lanes - 1):
            return None
        b = self.c.b
        inter = ir.Constant(ir.VectorType(ir.IntType(32), 2 * lanes),
                            [k // 2 + (k % 2) * lanes for k in range(2 * lanes)])
        ops = []
        for side in range(2):  # the a's, then the b's: <2L x i16> (x0, x1, x0, x1, ...)
            both = self._pair_load(terms[0][side], terms[1][side], lanes)
            if both is not None:
                ops.append(both)
                continue
            v0, v1 = (self._broadcast(self.convert(self.value(t[side]), t[side].dtype, "int16"), lanes) for t in terms)
            ops.append(b.shuffle_vector(v0, v1, inter))
        return self._pmaddwd(ops[0], ops[1], lanes)

    def _narrow_mul(self, e: Binary) -> ir.Value | None:
        """``int32(a) * int32(b)`` with 8/16-bit integer operands in a vectorized loop as ``pmaddwd`` of ``a``
        sign-extended and ``b`` zero-extended from int16, both seen as int16 pairs: ``a * b + sign(a) * 0``, exact
        (``vpmulld`` is the slow multiply on x86). None: not that form, or the target has no pmaddwd."""
        from compiler.backend.llvm.host import target_cpu

        if e.dtype != "int32" or not any(f in target_cpu().enabled for f in ("avx512bw", "avx2", "sse2")):
            return None
        if not all(isinstance(f, Cast) and f.a.dtype in ("int8", "uint8", "int16") for f in (e.a, e.b)):
            return None
        lanes = self.vec[1]
        if lanes < 4 or lanes & (lanes - 1):
            return None
        b = self.c.b
        va, vb = self.value(e.a.a), self.value(e.b.a)
        if not (_is_vec(va) or _is_vec(vb)):
            return None
        vt32, vt16 = ir.VectorType(ir.IntType(32), lanes), ir.VectorType(ir.IntType(16), 2 * lanes)
        xa = self._broadcast(self.convert(va, e.a.a.dtype, "int32"), lanes)
        xb = b.zext(self._broadcast(self.convert(vb, e.b.a.dtype, "int16"), lanes), vt32)
        return self._pmaddwd(b.bitcast(xa, vt16), b.bitcast(xb, vt16), lanes)

    def _quad_dot(self, e: Binary) -> ir.Value | None:
        """``acc + sum_k int32(u_k) * int32(s_k)`` over four products of uint8 ``u`` and int8 ``s`` read as byte
        quads (``_quad_load``; any association of the adds) in a vectorized loop on a target with an int8 dot
        product (:func:`compiler.backend.llvm.host.int8_dot`): one ``vpdpbusd`` per register (exact: the four
        products' sum fits int32, the accumulator wraps like the scalar adds). None: not that form or no VNNI."""
        from compiler.backend.llvm.host import int8_dot, target_cpu, vector_bits

        if e.dtype != "int32" or self.select_depth:
            return None
        isa = int8_dot(target_cpu())
        lanes = self.vec[1]
        if isa is None or lanes < 4 or lanes % 4:
            return None
        prods, rest = [], []
        for t in _add_terms(e):
            pair = _byte_product(t)
            (prods if pair is not None else rest).append(pair if pair is not None else t)
        if len(prods) != 4:
            return None
        prods.sort(key=lambda p: linear(p[0].index).const)
        uq, sq = [p[0] for p in prods], [p[1] for p in prods]
        u_step, s_step = self._quad_step(uq), self._quad_step(sq)
        if u_step is None or s_step is None:
            return None
        u, s_ = self._quad_load(uq, lanes, u_step), self._quad_load(sq, lanes, s_step)
        b = self.c.b
        vt = ir.VectorType(ir.IntType(32), lanes)
        acc = ir.Constant(vt, [0] * lanes)
        for t in rest:
            acc = b.add(acc, self._broadcast(self.convert(self.value(t), t.dtype, "int32"), lanes))
        w = max(k for k in (16, 8, 4) if lanes % k == 0 and (k < 16 or (isa == "avx512vnni" and vector_bits() >= 512)))
        fty = ir.FunctionType(ir.VectorType(ir.IntType(32), w), [ir.VectorType(ir.IntType(32), w)] * 3)
        fn = self._declare(f"llvm.x86.avx512.vpdpbusd.{32 * w}", fty)
        pieces = []
        for k in range(0, lanes, w):
            idx = ir.Constant(ir.VectorType(ir.IntType(32), w), list(range(k, k + w)))
            parts = [v if w == lanes else b.shuffle_vector(v, v, idx) for v in (acc, u, s_)]
            pieces.append(b.call(fn, parts))
        return self._concat(pieces)

    def _quad_step(self, loads: list) -> int | None:
        """Four byte loads of one buffer at ``base + k`` (k = 0..3) that :meth:`_quad_load` reads as one: their
        index's step per vector lane (4: consecutive quads; 0: the same quad in every lane), else None."""
        if not all(isinstance(x, BufLoad) and x.buffer is loads[0].buffer for x in loads):
            return None
        var = self.vec[0]
        fs = [linear(x.index) for x in loads]
        c0 = {repr(k): v for k, v in fs[0].coefs.items()}  # atoms compared by structure (each load built its own)
        if any({repr(k): v for k, v in f.coefs.items()} != c0 or f.const - fs[0].const != k for k, f in enumerate(fs)):
            return None
        step = fs[0].coef(var)
        if step not in (0, 4) or any(not isinstance(a, Var) and var in atom_vars(a) for a in fs[0].coefs):
            return None
        return step

    def _quad_load(self, loads: list, lanes: int, step: int) -> ir.Value:
        """The quads of :meth:`_quad_step`'s loads as ``<L x i32>``: lane ``j`` holds the quad at ``base + 4 j`` (one
        contiguous ``<4L x i8>`` load; ``step`` 4) or the same quad in every lane (one 32-bit load, broadcast)."""
        var, _, offset = self.vec
        b = self.c.b
        i8, i32 = ir.IntType(8), ir.IntType(32)
        p = b.gep(self._ptr(loads[0].buffer), [self.index(substitute(loads[0].index, {var: Const(offset)}))],
                  inbounds=True)
        if step == 4:
            v = b.load(b.bitcast(p, ir.VectorType(i8, 4 * lanes).as_pointer()), align=1)
            return b.bitcast(v, ir.VectorType(i32, lanes))
        return self._broadcast(b.load(b.bitcast(p, i32.as_pointer()), align=1), lanes)

    def _pair_load(self, e0: Expr, e1: Expr, lanes: int) -> ir.Value | None:
        """Loads ``e0``, ``e1`` of one buffer at ``2 * lane + base`` and ``2 * lane + base + 1`` (pairs stored
        interleaved): one contiguous ``<2L x i16>`` load (int8: sign-extended), else None."""
        if not (isinstance(e0, BufLoad) and isinstance(e1, BufLoad) and e0.buffer is e1.buffer) or self.select_depth:
            return None
        var, _, offset = self.vec
        f0, f1 = linear(e0.index), linear(e1.index)
        c0 = {repr(k): v for k, v in f0.coefs.items()}  # atoms compared by structure (each load built its own)
        c1 = {repr(k): v for k, v in f1.coefs.items()}
        step = f0.coef(var)
        if c0 != c1 or f1.const - f0.const != 1 or step not in (0, 2):
            return None
        if any(not isinstance(a, Var) and var in atom_vars(a) for a in f0.coefs):
            return None
        b = self.c.b
        ty = mem_type(e0.buffer.dtype)
        p = b.gep(self._ptr(e0.buffer), [self.index(substitute(e0.index, {var: Const(offset)}))], inbounds=True)
        if step == 2:  # lane k reads elements 2k, 2k + 1
            v = b.load(b.bitcast(p, ir.VectorType(ty, 2 * lanes).as_pointer()), align=_align(ty))
            return self.convert(v, e0.buffer.dtype, "int16")
        # one pair for every lane: (x0, x1) repeated (int8: broadcast the byte pair, then widen once)
        pair = b.load(b.bitcast(p, ir.VectorType(ty, 2).as_pointer()), align=_align(ty))
        rep = ir.Constant(ir.VectorType(ir.IntType(32), 2 * lanes), [0, 1] * lanes)
        return self.convert(b.shuffle_vector(pair, pair, rep), e0.buffer.dtype, "int16")

    def _pmaddwd(self, a: ir.Value, b_: ir.Value, lanes: int) -> ir.Value:
        """``pmaddwd`` of two ``<2L x i16>`` vectors -> ``<L x i32>``, split into the target's widest registers."""
        from compiler.backend.llvm.host import target_cpu

        b = self.c.b
        f = target_cpu().enabled
        widths = [w for w, ok in ((16, "avx512bw" in f), (8, "avx2" in f), (4, "sse2" in f)) if ok and w <= lanes]
        i16, i32 = ir.IntType(16), ir.IntType(32)
        if not widths:  # no pmaddwd on this target: even/odd products in int32
            ev = ir.Constant(ir.VectorType(i32, lanes), list(range(0, 2 * lanes, 2)))
            od = ir.Constant(ir.VectorType(i32, lanes), list(range(1, 2 * lanes, 2)))
            vt = ir.VectorType(i32, lanes)
            prods = [b.mul(b.sext(b.shuffle_vector(a, a, idx), vt), b.sext(b.shuffle_vector(b_, b_, idx), vt))
                     for idx in (ev, od)]
            return b.add(*prods)
        w = widths[0]
        name = {16: "llvm.x86.avx512.pmaddw.d.512", 8: "llvm.x86.avx2.pmadd.wd", 4: "llvm.x86.sse2.pmadd.wd"}[w]
        fty = ir.FunctionType(ir.VectorType(i32, w), [ir.VectorType(i16, 2 * w)] * 2)
        fn = self._declare(name, fty)
        pieces = []
        for k in range(0, lanes, w):
            idx = ir.Constant(ir.VectorType(i32, 2 * w), list(range(2 * k, 2 * k + 2 * w)))
            pa = a if w == lanes else b.shuffle_vector(a, a, idx)
            pb = b_ if w == lanes else b.shuffle_vector(b_, b_, idx)
            pieces.append(b.call(fn, [pa, pb]))
        return self._concat(pieces)

    def _exp(self, x: ir.Value) -> ir.Value:
        """float32 ``exp`` in straight-line vector arithmetic (``llvm.exp`` on a vector became one libm ``expf`` call
        per lane): ``x = n ln2 + r`` with ``n = round(x / ln2)`` and ``|r| <= ln2 / 2`` (Cody-Waite: ``ln2`` in two
        parts), ``e^r`` by its Taylor series to ``r^7`` (truncation < 6e-9 relative), ``2^n`` as two exponent-field
        factors (``n`` from -126 to 128 stays normal); 0 below -87.3 (``e^x`` under the smallest normal), inf above
        88.7228, NaN kept. Scalars take the same code (a vector loop's remainder computes as its body)."""
        b = self.c.b
        vec = _is_vec(x)
        i32 = ir.IntType(32)
        ity = ir.VectorType(i32, x.type.count) if vec else i32

        def c(v: float) -> ir.Value:
            return ir.Constant(x.type, [float(v)] * x.type.count) if vec else ir.Constant(F32, float(v))

        def ci(v: int) -> ir.Value:
            return ir.Constant(ity, [v] * x.type.count) if vec else ir.Constant(i32, v)

        lo, hi = -87.3, 88.7228
        xc = b.select(b.fcmp_ordered("<", x, c(lo)), c(lo), x)
        xc = b.select(b.fcmp_ordered(">", xc, c(hi)), c(hi), xc)
        floor = self._declare(f"llvm.floor.{'v%df32' % x.type.count if vec else 'f32'}", ir.FunctionType(x.type, [x.type]))
        n = b.call(floor, [b.fadd(b.fmul(xc, c(1.4426950408889634)), c(0.5))])
        r = b.fsub(b.fsub(xc, b.fmul(n, c(0.693359375))), b.fmul(n, c(-2.12194440e-4)))
        p = c(1.0 / 5040.0)
        for k in (720, 120, 24, 6, 2, 1, 1):
            p = b.fadd(b.fmul(p, r), c(1.0 / k))
        ni = b.fptosi(n, ity)
        half = b.ashr(ni, ci(1))
        f1 = b.bitcast(b.shl(b.add(half, ci(127)), ci(23)), x.type)
        f2 = b.bitcast(b.shl(b.add(b.sub(ni, half), ci(127)), ci(23)), x.type)
        y = b.fmul(b.fmul(p, f1), f2)
        y = b.select(b.fcmp_ordered("<", x, c(lo)), c(0.0), y)
        y = b.select(b.fcmp_ordered(">", x, c(hi)), c(float("inf")), y)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _math(self, name: str, x: ir.Value) -> ir.Value:
        b = self.c.b
        if name == "exp":
            return self._exp(x)
        if name in _LLVM_MATH:
            suffix = f"v{x.type.count}f32" if _is_vec(x) else "f32"
            fname = f"{_LLVM_MATH[name]}.{suffix}"
            fn = self._declare(fname, ir.FunctionType(x.type, [x.type]))
            return b.call(fn, [x])
        fname = _LIBM[name]
        fn = self._declare(fname, ir.FunctionType(F32, [F32]))
        if not _is_vec(x):
            return b.call(fn, [x])
        out = ir.Constant(x.type, ir.Undefined)
        for k in range(x.type.count):
            kk = ir.Constant(ir.IntType(32), k)
            out = b.insert_element(out, b.call(fn, [b.extract_element(x, kk)]), kk)
        return out

    def call(self, e: Call) -> ir.Value:
        return self._math(e.name, self.convert(self.value(e.a), e.a.dtype, "float32"))


def _add_terms(e: Expr) -> list[Expr]:
    """The terms of ``e`` as a sum (``(a + b) + c`` -> ``[a, b, c]``; anything else -> ``[e]``)."""
    if isinstance(e, Binary) and e.op == "add":
        return _add_terms(e.a) + _add_terms(e.b)
    return [e]


def _byte_product(e: Expr) -> tuple[BufLoad, BufLoad] | None:
    """``(u, s)`` when ``e`` is ``int32(u) * int32(s)`` (either order) of a uint8 and an int8 buffer load."""
    if not (isinstance(e, Binary) and e.op == "mul" and e.dtype == "int32"):
        return None
    fs = (e.a, e.b)
    if not all(isinstance(f, Cast) and f.dtype == "int32" and isinstance(f.a, BufLoad) for f in fs):
        return None
    by = {f.a.dtype: f.a for f in fs}
    return (by["uint8"], by["int8"]) if set(by) == {"uint8", "int8"} else None


def _conjuncts(e: Expr) -> list[Expr]:
    """The terms of ``e`` as a conjunction (``a & b & c`` -> ``[a, b, c]``; anything else -> ``[e]``)."""
    if isinstance(e, Binary) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _vectorizable(s) -> bool:
    """A vectorized loop holds only stores and guards around stores (no nested loops or allocations)."""
    return all(isinstance(x, Store) or (isinstance(x, IfThen) and _vectorizable(x)) for x in s.body)


def generate(f: PrimFunc, name: str | None = None) -> tuple[ir.Module, str]:
    """The llvmlite module for ``f`` and the kernel's symbol name."""
    cg = LlvmCodegen(f, name)
    return cg.generate(), cg.name
