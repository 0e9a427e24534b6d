"""The CPU runtime's thread pool: generated code hands a parallel loop to ``launch`` (a C callback).

A parallel loop is outlined into ``void task(i64 begin, i64 end, i8* closure)``; the kernel calls
the callback with that function, the trip count and the closure. The callback splits the range into
about four chunks per thread that the pool's threads and the calling thread take in turn (a dynamic
schedule, robust to a shared machine). On x86 the hand-off is native (:mod:`compiler.backend.llvm.native_pool`):
idle workers spin ~3 ms in native code and take chunks without the GIL, then (Linux) sleep natively on a futex,
and kernels call the native ``launch`` (:func:`launch_address`), which wakes sleeping workers itself and enters
Python only to start them; otherwise, or while another launch holds the native record, chunks go through a queue
and ctypes calls.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading

from compiler.backend.llvm.native_pool import (BUSY as _BUSY, PARKED as _PARKED, PYJOBS as _PYJOBS,
                                              QUEUED as _QUEUED, RETURN as _RETURN, SLOTS, SPINNING as _SPINNING,
                                              THREADS as _THREADS)

TASK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
LAUNCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)

_lock = threading.Lock()
_threads: int | None = None
_tasks: dict[int, object] = {}


class _Pool:
    """Persistent daemon workers fed through a C-implemented queue; a job is ``(callable, completion queue or None)``."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.size = 0

    def grow(self, n: int) -> None:
        with _lock:
            while self.size < n:
                threading.Thread(target=self._work, name=f"vta-cpu-{self.size}", daemon=True).start()
                self.size += 1

    def _work(self) -> None:
        while True:
            job, done = self.jobs.get()
            try:
                job()
            except BaseException as exc:  # reported to the launching thread
                if done is not None:
                    done.put(exc)
            else:
                if done is not None:
                    done.put(None)


_pool = _Pool()
SPIN_ITERATIONS = 100000  # pause-loop iterations an idle worker waits natively for a new launch (~3 ms) before
# sleeping: a sleeping worker is woken through the futex (or the queue and Python; in a VM also its halted virtual
# CPU), tens of microseconds or more, while the launching thread runs the chunks alone; with ~0.6 ms, 13-20 of
# MobileNetV2 int8's 44 launches a run (2 threads, loaded 2-core VM) found the worker asleep, with ~3 ms 1-5
_record = (ctypes.c_int64 * SLOTS)()  # the native hand-off record (compiler.backend.llvm.native_pool)
_record_addr = ctypes.addressof(_record)


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's worker threads: start from an empty pool and free locks."""
    global _pool, _lock
    _pool = _Pool()
    _lock = threading.Lock()
    _record[:] = [0] * len(_record)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _native_ok() -> bool:
    """The native hand-off publishes with plain stores, which keep their order on x86 (TSO) only."""
    import platform

    return platform.machine().lower() in ("x86_64", "amd64") and os.environ.get("VTA_NATIVE_POOL", "1") != "0"


_NATIVE = _native_ok()


def _native() -> dict:
    from compiler.backend.llvm.native_pool import functions

    return functions(_record_addr, LAUNCH_ADDRESS)


def _native_worker_job() -> None:
    """A queued spin job: the worker spins (and parks) in native code until something sends it back to the queue.
    Where workers park, one sent back by ``RETURN`` when no Python launch is in progress any more (``PYJOBS`` 0: it
    woke after that launch had ended without it) and with no spin job waiting (``QUEUED``) goes straight back in:
    at the queue it would wait with no job, as a native launch that counted it parked queued none for it."""
    with _lock:  # the record's QUEUED: native spin jobs queued and not started (written here under the lock only)
        _record[_QUEUED] -= 1
    _leave_launcher_cpu()
    native = _native()
    while True:
        native["worker"](_record_addr, SPIN_ITERATIONS)
        with _lock:  # a Python launch counts itself in PYJOBS under this lock before it sends workers back
            if not native["parks"] or _record[_PYJOBS] or _record[_QUEUED]:
                return


def _current_cpu() -> int:
    """The CPU this thread runs on (Linux ``sched_getcpu``), or -1 where unknown."""
    return _sched_getcpu() if _sched_getcpu is not None else -1


def _find_sched_getcpu():
    """libc's ``sched_getcpu`` through ctypes, or None where the OS has no affinity API or libc lacks it."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


_sched_getcpu = _find_sched_getcpu()
_launcher_cpu = [-1]  # the CPU the launching thread ran on when it last woke sleeping workers


def _leave_launcher_cpu() -> None:
    """A worker just woken onto the launching thread's CPU moves to another allowed CPU, then lets the OS place it
    freely again (its affinity mask is restored at once: nothing stays pinned, several processes still balance).

    Linux woke a sleeping worker onto the waker's CPU; the launching thread went on to take chunks and spin there
    while the other CPU idled, until the scheduler's next balancing tick (~4 ms): MobileNetV2 fp32 on two threads,
    after 300 ms pauses, had one kernel of its first eight stalled 3-5 ms in 17 of 28 runs; moved, 6 of 28."""
    cpu = _current_cpu()
    if cpu >= 0 and cpu == _launcher_cpu[0]:
        _move_off({cpu})


def _move_off(cpus: set[int]) -> None:
    """Move this thread off ``cpus`` now (affinity narrowed to the other allowed CPUs, then restored at once)."""
    try:
        allowed = os.sched_getaffinity(0)
        rest = allowed - cpus
        if rest and rest != allowed:
            os.sched_setaffinity(0, rest)  # migrates this thread now
            os.sched_setaffinity(0, allowed)
    except OSError:  # a restricted container: stay where the OS put us
        pass


def _wake(want: int, published: bool = False) -> None:
    """Wake the workers parked on the native futex, and queue native spin jobs for the workers missing from
    ``want`` spinning or parked ones (counting those already queued: while the launching thread holds the GIL the
    workers cannot take them, and more would pile up). ``published``: a launch was just published, so the native
    wake runs even with none counted parked (its locked bump orders the publish before its PARKED read); else a
    plain look at PARKED decides."""
    if published or _record[_PARKED]:
        _native()["wake"](_record_addr)
    with _lock:
        n = max(0, want - _record[_SPINNING] - _record[_PARKED] - _record[_QUEUED])
        _record[_QUEUED] += n
        if n:
            _launcher_cpu[0] = _current_cpu()
    for _ in range(n):
        _pool.jobs.put((_native_worker_job, None))


def wake_workers() -> None:
    """Get the pool's idle workers spinning (natively) ahead of the parallel loops to come: a run of many layers
    calls this first, so its first loop finds them there instead of waking them (no-op off x86 or on one thread)."""
    if not _NATIVE:
        return
    want = num_threads() - 1
    if want <= 0:
        return
    _pool.grow(want)
    _wake(want)


def native_wake():
    """:func:`wake_workers`' wake of the parked workers as a :class:`~compiler.backend.llvm.native_replay.KernelCall`
    (the native ``wake`` on the record; a native caller makes it with no Python), or None off x86. Workers that
    are neither parked nor spinning are started by the first parallel loop's launch instead."""
    from compiler.backend.llvm.native_replay import KernelCall

    if not _NATIVE:
        return None
    return KernelCall(ctypes.cast(_native()["wake"], ctypes.c_void_p).value, (_record_addr,))


def launch_address() -> int:
    """The ``launch`` callback to pass generated kernels: the native one on x86 (no Python while workers spin),
    else the Python callback."""
    return _native()["launch"] if _NATIVE else LAUNCH_ADDRESS


def generation() -> int:
    """How many native launches this process has made (mod 2**31): the record's generation."""
    return _record[0] >> 32


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
    _record[_THREADS] = 0  # the native launch defers to Python until the next Python launch has read the count


def _launch(fn: int, n: int, closure: int) -> None:
    threads = num_threads()
    t = min(threads, n)
    if t <= 1:
        _task(fn)(0, n, closure)
        return
    # dynamic schedule: ~4 chunks per thread, taken in order by whichever thread is free (the machine may be shared)
    nchunks = min(n, 4 * t)
    if _NATIVE:
        native = _native()
        if native["try_busy"](_record_addr):
            try:
                _record[_THREADS] = threads  # the native launch runs on its own while workers spin
                _launch_native(native, fn, n, closure, t, nchunks)
            finally:
                _record[_BUSY] = 0
            return
    _launch_python(_task(fn), n, closure, t, nchunks)


def _task(fn: int):
    task = _tasks.get(fn)
    if task is None:
        task = _tasks.setdefault(fn, TASK(fn))
    return task


def _launch_native(native: dict, fn: int, n: int, closure: int, t: int, nchunks: int) -> None:
    """Publish the launch in the record (held: BUSY); spinning workers join without the GIL, sleeping ones are
    woken."""
    from compiler.backend.llvm.native_pool import CHUNKS, CLOSURE, DONE, TASK_SLOT, TRIP, WORD

    rec = _record
    gen = ((rec[WORD] >> 32) + 1) & 0x7FFFFFFF
    rec[TASK_SLOT], rec[CLOSURE], rec[TRIP], rec[CHUNKS], rec[DONE] = fn, closure, n, nchunks, 0
    rec[WORD] = gen << 32  # publishes the fields above (x86 keeps store order)
    _pool.grow(t - 1)
    _wake(t - 1, published=True)
    native["work"](_record_addr, gen)
    native["wait"](_record_addr, nchunks)


def _launch_python(task, n: int, closure: int, t: int, nchunks: int) -> None:
    """The same schedule through Python (another thread's launch holds the native record, or not x86). While it
    waits, no worker stays in native code nor enters it for a queued spin job (``PYJOBS``): they take its jobs."""
    if not _NATIVE:
        _run_python_chunks(task, n, closure, t, nchunks)
        return
    with _lock:
        _record[_PYJOBS] += 1
        _record[_RETURN] += 1
    _native()["wake"](_record_addr)  # after the counts: a worker about to park sees them (or this wake)
    try:
        _run_python_chunks(task, n, closure, t, nchunks)
    finally:
        with _lock:
            _record[_PYJOBS] -= 1


def _run_python_chunks(task, n: int, closure: int, t: int, nchunks: int) -> None:
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
    for _ in range(t - 1):
        _pool.jobs.put((worker, done))
    worker()
    errors = [e for e in (done.get() for _ in range(t - 1)) if e is not None]
    if errors:
        raise errors[0]


LAUNCH_CALLBACK = LAUNCH(_launch)
LAUNCH_ADDRESS = ctypes.cast(LAUNCH_CALLBACK, ctypes.c_void_p).value  # the Python launch (the native one's slow path)
