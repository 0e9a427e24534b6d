"""The thread pool's native hand-off: idle workers and the launching thread take chunks without the GIL.

A launch publishes ``(task, closure, trip count, chunks)`` in a small shared record and bumps its
generation; workers that are spinning in :func:`worker` (native code, GIL released) see it at once and
take chunks by compare-and-swap on one word holding ``generation << 32 | next chunk``, so a worker that
read a previous launch's fields can never run them (its swap fails). The launching thread takes chunks
too and then waits natively for the count of finished chunks. Workers that are asleep in Python (they
spin ~3 ms after their last chunk, then block on a queue) are woken through the queue.

``launch`` is the whole hand-off in native code, the callback generated kernels call: while enough workers
are spinning and the record is free it publishes, works and waits without entering Python (a Python
callback per parallel loop cost microseconds of GIL and interpreter time on the critical path, while the
workers spun); otherwise it calls the Python launch (``slow``), which wakes workers or takes the queue path.
"""
from __future__ import annotations

import ctypes
import threading

from llvmlite import ir

I64 = ir.IntType(64)
SLOTS = 16  # word, task, closure, n, chunks, done, spinning, pad, busy, threads, pad...
WORD, TASK_SLOT, CLOSURE, TRIP, CHUNKS, DONE, SPINNING = range(7)
BUSY = 8      # 1 while a launch owns the record (taken by compare-and-swap: native and Python launches alike)
THREADS = 9   # the pool's thread count as the Python side last saw it (0: unknown, the native launch defers)

_lock = threading.Lock()
_fns: dict | None = None


def _build(record: int, slow: int) -> dict:
    from compiler.backend.llvm.jit import get_host_jit

    jit = get_host_jit()  # runtime code: always this machine's CPU
    mod = ir.Module(name="vta_native_pool")
    p64 = I64.as_pointer()
    task_ty = ir.FunctionType(ir.VoidType(), [I64, I64, ir.IntType(8).as_pointer()])
    pause = None
    if jit.triple.startswith(("x86_64", "i686", "i386")):
        pause = mod.declare_intrinsic("llvm.x86.sse2.pause", (), ir.FunctionType(ir.VoidType(), []))

    def slot(b, st, k):
        return b.gep(st, [ir.Constant(I64, k)])

    def c(v):
        return ir.Constant(I64, v)

    # i64 work(i64* st, i64 gen): run chunks of launch `gen` while any are left; returns chunks run
    work = ir.Function(mod, ir.FunctionType(I64, [p64, I64]), "vta_pool_work")
    st, gen = work.args
    b = ir.IRBuilder(work.append_basic_block("entry"))
    entry = b.block
    head, take, run, out = (work.append_basic_block(n) for n in ("head", "take", "run", "out"))
    b.branch(head)
    b.position_at_end(head)
    ran = b.phi(I64)
    ran.add_incoming(c(0), entry)
    v = b.load_atomic(slot(b, st, WORD), "acquire", 8)
    same = b.icmp_unsigned("==", b.lshr(v, c(32)), gen)
    idx = b.and_(v, c(0xFFFFFFFF))
    nch = b.load_atomic(slot(b, st, CHUNKS), "monotonic", 8)
    b.cbranch(b.and_(same, b.icmp_signed("<", idx, nch)), take, out)
    b.position_at_end(take)
    fn = b.load_atomic(slot(b, st, TASK_SLOT), "monotonic", 8)
    clo = b.load_atomic(slot(b, st, CLOSURE), "monotonic", 8)
    n = b.load_atomic(slot(b, st, TRIP), "monotonic", 8)
    pair = b.cmpxchg(slot(b, st, WORD), v, b.add(v, c(1)), "acq_rel", "acquire")
    ok = b.extract_value(pair, 1)
    ran.add_incoming(ran, take)
    b.cbranch(ok, run, head)
    b.position_at_end(run)
    begin = b.sdiv(b.mul(n, idx), nch)
    end = b.sdiv(b.mul(n, b.add(idx, c(1))), nch)
    b.call(b.inttoptr(fn, task_ty.as_pointer()), [begin, end, b.inttoptr(clo, ir.IntType(8).as_pointer())])
    b.atomic_rmw("add", slot(b, st, DONE), c(1), "release")
    ran.add_incoming(b.add(ran, c(1)), run)
    b.branch(head)
    b.position_at_end(out)
    b.ret(ran)

    # void worker(i64* st, i64 iters): work on the current launch, then on every new one seen within `iters` pauses
    wk = ir.Function(mod, ir.FunctionType(ir.VoidType(), [p64, I64]), "vta_pool_worker")
    st, iters = wk.args
    b = ir.IRBuilder(wk.append_basic_block("entry"))
    b.atomic_rmw("add", slot(b, st, SPINNING), c(1), "acq_rel")
    g0 = b.lshr(b.load_atomic(slot(b, st, WORD), "acquire", 8), c(32))
    b.call(work, [st, g0])
    entry = b.block
    head, busy, idle, out = (wk.append_basic_block(n) for n in ("head", "busy", "idle", "out"))
    b.branch(head)
    b.position_at_end(head)
    g = b.phi(I64)
    i = b.phi(I64)
    g.add_incoming(g0, entry)
    i.add_incoming(c(0), entry)
    gn = b.lshr(b.load_atomic(slot(b, st, WORD), "acquire", 8), c(32))
    b.cbranch(b.icmp_unsigned("!=", gn, g), busy, idle)
    b.position_at_end(busy)
    b.call(work, [st, gn])
    g.add_incoming(gn, busy)
    i.add_incoming(c(0), busy)
    b.branch(head)
    b.position_at_end(idle)
    cont = wk.append_basic_block("cont")
    b.cbranch(b.icmp_signed("<", i, iters), cont, out)
    b.position_at_end(cont)
    if pause is not None:
        b.call(pause, [])
    g.add_incoming(g, cont)
    i.add_incoming(b.add(i, c(1)), cont)
    b.branch(head)
    b.position_at_end(out)
    b.atomic_rmw("sub", slot(b, st, SPINNING), c(1), "acq_rel")
    b.ret_void()

    # void wait(i64* st, i64 chunks): until `chunks` chunks of the current launch have finished
    wt = ir.Function(mod, ir.FunctionType(ir.VoidType(), [p64, I64]), "vta_pool_wait")
    st, chunks = wt.args
    b = ir.IRBuilder(wt.append_basic_block("entry"))
    head, body, out = (wt.append_basic_block(n) for n in ("head", "body", "out"))
    b.branch(head)
    b.position_at_end(head)
    d = b.load_atomic(slot(b, st, DONE), "acquire", 8)
    b.cbranch(b.icmp_signed("<", d, chunks), body, out)
    b.position_at_end(body)
    if pause is not None:
        b.call(pause, [])
    b.branch(head)
    b.position_at_end(out)
    b.ret_void()

    # i64 try_busy(i64* st): take the record (1) or find it taken (0)
    tb = ir.Function(mod, ir.FunctionType(I64, [p64]), "vta_pool_try_busy")
    b = ir.IRBuilder(tb.append_basic_block("entry"))
    pair = b.cmpxchg(slot(b, tb.args[0], BUSY), c(0), c(1), "acquire", "monotonic")
    b.ret(b.zext(b.extract_value(pair, 1), I64))

    # void launch(i8* task, i64 n, i8* closure): the kernels' parallel-loop callback (see the module docstring)
    i8p = ir.IntType(8).as_pointer()
    slow_ty = ir.FunctionType(ir.VoidType(), [i8p, I64, i8p])
    ln = ir.Function(mod, slow_ty, "vta_pool_launch")
    task, trip, clo = ln.args
    b = ir.IRBuilder(ln.append_basic_block("entry"))
    fast, own, slow_bb = (ln.append_basic_block(n) for n in ("fast", "own", "slow"))
    st = b.inttoptr(c(record), p64)
    t = b.load_atomic(slot(b, st, THREADS), "monotonic", 8)
    tt = b.select(b.icmp_signed("<", trip, t), trip, t)
    spinning = b.load_atomic(slot(b, st, SPINNING), "monotonic", 8)
    ok = b.and_(b.icmp_signed(">=", tt, c(2)), b.icmp_signed(">=", spinning, b.sub(tt, c(1))))
    b.cbranch(ok, fast, slow_bb)
    b.position_at_end(fast)
    pair = b.cmpxchg(slot(b, st, BUSY), c(0), c(1), "acquire", "monotonic")
    b.cbranch(b.extract_value(pair, 1), own, slow_bb)
    b.position_at_end(own)
    four = b.mul(tt, c(4))
    nch = b.select(b.icmp_signed("<", trip, four), trip, four)
    old = b.load_atomic(slot(b, st, WORD), "monotonic", 8)
    gen = b.and_(b.add(b.lshr(old, c(32)), c(1)), c(0x7FFFFFFF))
    b.store_atomic(b.ptrtoint(task, I64), slot(b, st, TASK_SLOT), "monotonic", 8)
    b.store_atomic(b.ptrtoint(clo, I64), slot(b, st, CLOSURE), "monotonic", 8)
    b.store_atomic(trip, slot(b, st, TRIP), "monotonic", 8)
    b.store_atomic(nch, slot(b, st, CHUNKS), "monotonic", 8)
    b.store_atomic(c(0), slot(b, st, DONE), "monotonic", 8)
    b.store_atomic(b.shl(gen, c(32)), slot(b, st, WORD), "release", 8)  # publishes the fields above
    b.call(work, [st, gen])
    b.call(wt, [st, nch])
    b.store_atomic(c(0), slot(b, st, BUSY), "release", 8)
    b.ret_void()
    b.position_at_end(slow_bb)
    b.call(b.inttoptr(c(slow), slow_ty.as_pointer()), [task, trip, clo])
    b.ret_void()

    ref = jit.optimize(mod)
    with _lock:
        jit.engine.add_module(ref)
        jit.engine.finalize_object()
    addr = jit.engine.get_function_address
    return {
        "work": ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)(addr("vta_pool_work")),
        "worker": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(addr("vta_pool_worker")),
        "wait": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(addr("vta_pool_wait")),
        "try_busy": ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(addr("vta_pool_try_busy")),
        "launch": addr("vta_pool_launch"),
    }


def functions(record: int, slow: int) -> dict:
    """The compiled ``work``/``worker``/``wait``/``try_busy`` functions and the address of ``launch`` (built on
    first use for the record at address ``record``, with ``slow`` the address of the Python launch callback)."""
    global _fns
    if _fns is None:
        fns = _build(record, slow)
        with _lock:
            if _fns is None:
                _fns = fns
    return _fns
