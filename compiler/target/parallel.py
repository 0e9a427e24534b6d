"""The CPU runtime's thread pool: generated code hands a parallel loop to ``launch`` (a C callback).

A parallel loop is outlined into ``void task(i64 begin, i64 end, i8* closure)``; the kernel calls
the callback with that function, the trip count and the closure. The callback splits the range into
about four chunks per thread that the pool's threads and the calling thread take in turn (a dynamic
schedule, robust to a shared machine), each run through ctypes (which releases the GIL).
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading

TASK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
LAUNCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)

_lock = threading.Lock()
_threads: int | None = None
_tasks: dict[int, object] = {}


class _Pool:
    """Persistent daemon workers fed through C-implemented queues (cheaper per launch than futures); each launch
    brings its own completion queue, so launches from several Python threads do not mix."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.size = 0

    def grow(self, n: int) -> None:
        with _lock:
            while self.size < n:
                threading.Thread(target=self._work, name=f"vta-cpu-{self.size}", daemon=True).start()
                self.size += 1

    def _work(self) -> None:
        seen = _generation.value
        while True:
            try:
                job, done = self.jobs.get_nowait()
            except queue.Empty:
                # back-to-back parallel loops: wait briefly in native code (GIL released) for the next launch instead
                # of sleeping, so the next job does not pay a scheduler wake-up on a busy machine
                seen = _spinner()(ctypes.addressof(_generation), seen, SPIN_ITERATIONS)
                job, done = self.jobs.get()
            try:
                job()
            except BaseException as exc:  # reported to the launching thread
                done.put(exc)
            else:
                done.put(None)


_pool = _Pool()
_generation = ctypes.c_int64(0)  # bumped by every multi-threaded launch; idle workers watch it
SPIN_ITERATIONS = 20000  # pause-loop iterations an idle worker waits for a new launch (~1 ms) before sleeping
_SPIN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_spin_fn = None


def _spinner():
    """``i64 spin(i64* gen, i64 seen, i64 iters)``: wait until ``*gen != seen`` or ``iters`` pauses; returns ``*gen``."""
    global _spin_fn
    if _spin_fn is None:
        with _lock:
            if _spin_fn is None:
                from llvmlite import ir

                from compiler.codegen.llvm.jit import get_jit

                i64 = ir.IntType(64)
                mod = ir.Module(name="vta_spin")
                fn = ir.Function(mod, ir.FunctionType(i64, [i64.as_pointer(), i64, i64]), "vta_pool_spin")
                gen, seen, iters = fn.args
                b = ir.IRBuilder(fn.append_basic_block("entry"))
                entry, head, body, done = b.block, fn.append_basic_block("head"), fn.append_basic_block("body"), \
                    fn.append_basic_block("done")
                b.branch(head)
                b.position_at_end(head)
                i = b.phi(i64)
                i.add_incoming(ir.Constant(i64, 0), entry)
                v = b.load_atomic(gen, "monotonic", 8)
                go = b.and_(b.icmp_signed("==", v, seen), b.icmp_signed("<", i, iters))
                b.cbranch(go, body, done)
                b.position_at_end(body)
                jit = get_jit()
                if jit.triple.startswith(("x86_64", "i686", "i386")):
                    b.call(mod.declare_intrinsic("llvm.x86.sse2.pause", (), ir.FunctionType(ir.VoidType(), [])), [])
                i.add_incoming(b.add(i, ir.Constant(i64, 1)), body)
                b.branch(head)
                b.position_at_end(done)
                b.ret(v)
                ref = jit.optimize(mod)
                jit.engine.add_module(ref)
                jit.engine.finalize_object()
                _spin_fn = _SPIN(jit.engine.get_function_address("vta_pool_spin"))
    return _spin_fn


def num_threads() -> int:
    """Threads a parallel loop uses: ``set_num_threads``, else ``$VTA_NUM_THREADS``, else the CPU count."""
    if _threads is not None:
        return _threads
    env = os.environ.get("VTA_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"VTA_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n > 0:
            return n
        raise ValueError(f"VTA_NUM_THREADS must be a positive integer, got {env!r}")
    return os.cpu_count() or 1


def set_num_threads(n: int | None) -> None:
    """Use ``n`` threads for parallel loops (``None``: back to the default)."""
    global _threads
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n <= 0):
        raise ValueError(f"set_num_threads: need a positive int or None, got {n!r}")
    _threads = n


def _launch(fn: int, n: int, closure: int) -> None:
    task = _tasks.get(fn)
    if task is None:
        task = _tasks.setdefault(fn, TASK(fn))
    t = min(num_threads(), n)
    if t <= 1:
        task(0, n, closure)
        return
    # dynamic schedule: ~4 chunks per thread, taken in order by whichever thread is free (the machine may be shared)
    nchunks = min(n, 4 * t)
    bounds = [n * i // nchunks for i in range(nchunks + 1)]
    counter = itertools.count()

    def worker() -> None:
        while True:
            c = next(counter)
            if c >= nchunks:
                return
            task(bounds[c], bounds[c + 1], closure)

    _pool.grow(t - 1)
    done: queue.SimpleQueue = queue.SimpleQueue()
    _generation.value += 1
    for _ in range(t - 1):
        _pool.jobs.put((worker, done))
    worker()
    errors = [e for e in (done.get() for _ in range(t - 1)) if e is not None]
    if errors:
        raise errors[0]


LAUNCH_CALLBACK = LAUNCH(_launch)
LAUNCH_ADDRESS = ctypes.cast(LAUNCH_CALLBACK, ctypes.c_void_p).value
