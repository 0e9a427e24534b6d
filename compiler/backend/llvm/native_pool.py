"""The thread pool's native hand-off: idle workers and the launching thread take chunks without the GIL.

A launch publishes ``(task, closure, trip count, chunks)`` in a small shared record and bumps its
generation; workers that are spinning in :func:`worker` (native code, GIL released) see it at once and
take chunks by compare-and-swap on one word holding ``generation << 32 | next chunk``, so a worker that
read a previous launch's fields can never run them (its swap fails). The launching thread takes chunks
too and then waits natively for the count of finished chunks. An idle worker spins ~3 ms after its last
chunk, then (Linux) sleeps natively on a futex in the record (``PARKED``), where a launch or ``wake``
(``wake_workers``) wakes it with one system call and no GIL; elsewhere it returns to Python and blocks on the
pool's queue. A worker leaves native code for the queue when the record's ``RETURN`` count moves or while a
Python launch is in progress (``PYJOBS``: that path needs its workers at the queue), and instead of parking while a
spin job waits in the queue (``QUEUED``: it takes the job and spins again, so none is left behind a parked worker).

``launch`` is the whole hand-off in native code, the callback generated kernels call: while enough workers
are spinning or parked (it wakes those) and the record is free it publishes, works and waits without entering
Python (a Python callback per parallel loop cost microseconds of GIL and interpreter time on the critical path,
while the workers spun); otherwise it calls the Python launch (``slow``), which starts workers or takes the queue
path.
"""
from __future__ import annotations

import ctypes
import threading

from llvmlite import ir

I64 = ir.IntType(64)
I32 = ir.IntType(32)
SLOTS = 16  # word, task, closure, n, chunks, done, spinning, queued, busy, threads, parked, seq, return, ...
WORD, TASK_SLOT, CLOSURE, TRIP, CHUNKS, DONE, SPINNING = range(7)
QUEUED = 7    # native spin jobs in the pool's queue, not yet taken (written by Python under its lock): a worker
# about to park returns to the queue instead while one waits there, so no spin job is left behind a parked worker
BUSY = 8      # 1 while a launch owns the record (taken by compare-and-swap: native and Python launches alike)
THREADS = 9   # the pool's thread count as the Python side last saw it (0: unknown, the native launch defers)
PARKED = 10   # workers asleep on the futex (counted before they sleep, uncounted after they wake)
SEQ = 11      # the futex word (its low 32 bits): bumped by every wake, so a worker about to sleep misses none
RETURN = 12   # bumped by the Python side to send every native worker back to the pool's queue
WAKER_CPU = 13  # the CPU the last futex wake ran on (a worker woken onto it moves off: see move_off)
PYJOBS = 14   # Python launches in progress: while > 0 no worker stays in native code (their jobs are queued)
WAKES = 15    # times a worker left the park (woken, or a launch/return seen at its last look): for tests
SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129  # x86-64 Linux
SYS_SCHED_SETAFFINITY, SYS_SCHED_GETAFFINITY = 203, 204
MASK_WORDS = 16  # CPU masks of 1024 CPUs


def libc_addresses() -> tuple[int, int]:
    """The addresses of libc's ``syscall`` and ``sched_getcpu`` where workers can sleep on a futex (x86-64 Linux,
    a 64-bit process: the system call numbers are x86-64's), else ``(0, 0)``."""
    import sys

    if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_void_p) != 8:
        return 0, 0
    try:
        libc = ctypes.CDLL(None)
        return (ctypes.cast(libc.syscall, ctypes.c_void_p).value or 0,
                ctypes.cast(libc.sched_getcpu, ctypes.c_void_p).value or 0)
    except (OSError, AttributeError):
        return 0, 0

_lock = threading.Lock()
_fns: dict | None = None


def _build(record: int, slow: int) -> dict:
    from compiler.backend.llvm.jit import get_host_jit

    jit = get_host_jit()  # runtime code: always this machine's CPU
    mod = ir.Module(name="vta_native_pool")
    p64 = I64.as_pointer()
    sys_addr, cpu_addr = libc_addresses()
    if not cpu_addr:
        sys_addr = 0
    sys_ty = ir.FunctionType(I64, [I64], var_arg=True)
    cpu_ty = ir.FunctionType(I32, [])
    task_ty = ir.FunctionType(ir.VoidType(), [I64, I64, ir.IntType(8).as_pointer()])
    pause = None
    if jit.triple.startswith(("x86_64", "i686", "i386")):
        pause = mod.declare_intrinsic("llvm.x86.sse2.pause", (), ir.FunctionType(ir.VoidType(), []))

    def slot(b, st, k):
        return b.gep(st, [ir.Constant(I64, k)])

    def c(v):
        return ir.Constant(I64, v)

    def futex_word(b, st):
        return b.bitcast(slot(b, st, SEQ), I32.as_pointer())

    def syscall(b, *args):  # libc's syscall(number, args...): ints become i64 constants
        return b.call(b.inttoptr(c(sys_addr), sys_ty.as_pointer()), [c(a) if isinstance(a, int) else a for a in args])

    def futex(b, st, op, val):
        return syscall(b, SYS_FUTEX, b.ptrtoint(futex_word(b, st), I64), op, val, 0, 0, 0)

    def this_cpu(b):
        return b.sext(b.call(b.inttoptr(c(cpu_addr), cpu_ty.as_pointer()), []), I64)

    # void move_off(i64 cpu): move this thread off `cpu` (affinity narrowed to the other allowed CPUs, then restored
    # at once: nothing stays pinned). Linux may wake a worker onto its waker's CPU (in a VM: when the other virtual
    # CPU is halted), where it and the launching thread then share one CPU until the next balancing tick (~4 ms)
    move = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I64]), "vta_pool_move_off")
    b = ir.IRBuilder(move.append_basic_block("entry"))
    if sys_addr:
        cpu = move.args[0]
        mask_ty = ir.ArrayType(I64, MASK_WORDS)
        allowed, rest = b.alloca(mask_ty), b.alloca(mask_ty)
        for w in range(MASK_WORDS):
            b.store(c(0), b.gep(allowed, [ir.Constant(I32, 0), ir.Constant(I32, w)]))
        got = syscall(b, SYS_SCHED_GETAFFINITY, 0, 8 * MASK_WORDS, b.ptrtoint(allowed, I64))
        fits = b.and_(b.icmp_signed(">", got, c(0)), b.icmp_unsigned("<", cpu, c(64 * MASK_WORDS)))
        go, done_bb = move.append_basic_block("go"), move.append_basic_block("done")
        b.cbranch(fits, go, done_bb)
        b.position_at_end(go)
        word, bit = b.lshr(cpu, c(6)), b.shl(c(1), b.and_(cpu, c(63)))
        others = c(0)
        for w in range(MASK_WORDS):
            v = b.load(b.gep(allowed, [ir.Constant(I32, 0), ir.Constant(I32, w)]))
            v = b.select(b.icmp_unsigned("==", word, c(w)), b.and_(v, b.not_(bit)), v)
            b.store(v, b.gep(rest, [ir.Constant(I32, 0), ir.Constant(I32, w)]))
            others = b.or_(others, v)
        moved = move.append_basic_block("moved")
        b.cbranch(b.icmp_unsigned("!=", others, c(0)), moved, done_bb)
        b.position_at_end(moved)
        syscall(b, SYS_SCHED_SETAFFINITY, 0, 8 * MASK_WORDS, b.ptrtoint(rest, I64))  # migrates this thread now
        syscall(b, SYS_SCHED_SETAFFINITY, 0, 8 * MASK_WORDS, b.ptrtoint(allowed, I64))
        b.branch(done_bb)
        b.position_at_end(done_bb)
    b.ret_void()

    # void wake(i64* st): wake every parked worker (bump the futex word first: one about to sleep then does not)
    wake = ir.Function(mod, ir.FunctionType(ir.VoidType(), [p64]), "vta_pool_wake")
    b = ir.IRBuilder(wake.append_basic_block("entry"))
    if sys_addr:
        st = wake.args[0]
        b.atomic_rmw("add", futex_word(b, st), ir.Constant(I32, 1), "seq_cst")
        call_bb, done_bb = wake.append_basic_block("call"), wake.append_basic_block("done")
        b.cbranch(b.icmp_signed(">", b.load_atomic(slot(b, st, PARKED), "seq_cst", 8), c(0)), call_bb, done_bb)
        b.position_at_end(call_bb)
        b.store_atomic(this_cpu(b), slot(b, st, WAKER_CPU), "monotonic", 8)
        futex(b, st, FUTEX_WAKE_PRIVATE, c(0x7FFFFFFF))
        b.branch(done_bb)
        b.position_at_end(done_bb)
    b.ret_void()

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

    # void worker(i64* st, i64 iters): work on the current launch, then on every new one; after `iters` pauses with
    # none, sleep on the futex (then spin again) or, with no futex, return; return when RETURN moves
    wk = ir.Function(mod, ir.FunctionType(ir.VoidType(), [p64, I64]), "vta_pool_worker")
    st, iters = wk.args
    b = ir.IRBuilder(wk.append_basic_block("entry"))
    r0 = b.load_atomic(slot(b, st, RETURN), "acquire", 8)
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
    cont, stay, tired = (wk.append_basic_block(n) for n in ("cont", "stay", "tired"))
    back = b.or_(b.icmp_unsigned("!=", b.load_atomic(slot(b, st, RETURN), "acquire", 8), r0),
                 b.icmp_signed(">", b.load_atomic(slot(b, st, PYJOBS), "acquire", 8), c(0)))
    b.cbranch(back, out, stay)
    b.position_at_end(stay)
    b.cbranch(b.icmp_signed("<", i, iters), cont, tired)
    b.position_at_end(cont)
    if pause is not None:
        b.call(pause, [])
    g.add_incoming(g, cont)
    i.add_incoming(b.add(i, c(1)), cont)
    b.branch(head)
    b.position_at_end(tired)
    if sys_addr:  # park: counted first, then the futex word read, then a last look for a launch or a return
        sleep, woke = wk.append_basic_block("sleep"), wk.append_basic_block("woke")
        unqueued, leave_park = wk.append_basic_block("unqueued"), wk.append_basic_block("leave_park")
        b.atomic_rmw("add", slot(b, st, PARKED), c(1), "seq_cst")
        b.atomic_rmw("sub", slot(b, st, SPINNING), c(1), "seq_cst")
        seq = b.load_atomic(futex_word(b, st), "seq_cst", 4)
        g2 = b.lshr(b.load_atomic(slot(b, st, WORD), "seq_cst", 8), c(32))
        r2 = b.load_atomic(slot(b, st, RETURN), "seq_cst", 8)
        py = b.load_atomic(slot(b, st, PYJOBS), "seq_cst", 8)
        calm = b.and_(b.icmp_unsigned("==", r2, r0), b.icmp_signed("==", py, c(0)))
        b.cbranch(b.and_(b.icmp_unsigned("==", g2, g), calm), unqueued, woke)
        b.position_at_end(unqueued)  # a spin job left in the queue (queued while this worker was on its way in):
        queued = b.load_atomic(slot(b, st, QUEUED), "seq_cst", 8)  # take it (back to Python) rather than park
        b.cbranch(b.icmp_signed(">", queued, c(0)), leave_park, sleep)
        b.position_at_end(leave_park)
        b.atomic_rmw("add", slot(b, st, SPINNING), c(1), "seq_cst")
        b.atomic_rmw("sub", slot(b, st, PARKED), c(1), "seq_cst")
        b.branch(out)
        b.position_at_end(sleep)
        futex(b, st, FUTEX_WAIT_PRIVATE, b.zext(seq, I64))
        here = this_cpu(b)
        same = b.icmp_signed("==", here, b.load_atomic(slot(b, st, WAKER_CPU), "monotonic", 8))
        leave = wk.append_basic_block("leave")
        b.cbranch(same, leave, woke)
        b.position_at_end(leave)
        b.call(move, [here])
        b.branch(woke)
        b.position_at_end(woke)  # counted spinning before WAKES moves: a reader that saw WAKES, then SPINNING == 0
        b.atomic_rmw("add", slot(b, st, SPINNING), c(1), "seq_cst")  # with PARKED, saw this worker before its wake
        b.atomic_rmw("add", slot(b, st, WAKES), c(1), "monotonic")
        b.atomic_rmw("sub", slot(b, st, PARKED), c(1), "seq_cst")
        g.add_incoming(g, woke)
        i.add_incoming(c(0), woke)
        b.branch(head)
    else:
        b.branch(out)
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
    ready = b.add(spinning, b.load_atomic(slot(b, st, PARKED), "monotonic", 8))  # parked ones are woken below
    ok = b.and_(b.icmp_signed(">=", tt, c(2)), b.icmp_signed(">=", ready, b.sub(tt, c(1))))
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
    # publishes the fields above; seq_cst (a locked exchange on x86): the spinning count read next is not read
    # ahead of it, so a worker that stops spinning after that read sees this launch at its last look before
    # sleeping (released, a read before the store left the buffer missed such a worker: it slept through the launch)
    b.store_atomic(b.shl(gen, c(32)), slot(b, st, WORD), "seq_cst", 8)
    if sys_addr:  # too few spinning: wake the parked (after the publish: one about to sleep sees the launch)
        wake_bb, go_bb = ln.append_basic_block("wake"), ln.append_basic_block("go")
        now = b.load_atomic(slot(b, st, SPINNING), "seq_cst", 8)
        b.cbranch(b.icmp_signed("<", now, b.sub(tt, c(1))), wake_bb, go_bb)
        b.position_at_end(wake_bb)
        b.call(wake, [st])
        b.branch(go_bb)
        b.position_at_end(go_bb)
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
        "wake": ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr("vta_pool_wake")),
        "move_off": ctypes.CFUNCTYPE(None, ctypes.c_int64)(addr("vta_pool_move_off")),
        "launch": addr("vta_pool_launch"),
        "parks": bool(sys_addr),  # idle workers sleep on the futex (else a tired worker returns to the queue)
    }


def functions(record: int, slow: int) -> dict:
    """The compiled ``work``/``worker``/``wait``/``try_busy``/``wake``/``move_off`` functions, the address of
    ``launch`` (built on first use for the record at address ``record``, with ``slow`` the address of the Python
    launch callback) and ``parks`` (whether idle workers sleep on the futex)."""
    global _fns
    if _fns is None:
        fns = _build(record, slow)
        with _lock:
            if _fns is None:
                _fns = fns
    return _fns
