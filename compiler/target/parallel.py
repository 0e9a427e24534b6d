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
import threading
from concurrent.futures import ThreadPoolExecutor

TASK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
LAUNCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_threads: int | None = None
_tasks: dict[int, object] = {}


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
    global _threads, _pool
    if n is not None and (not isinstance(n, int) or n <= 0):
        raise ValueError(f"set_num_threads: need a positive int or None, got {n!r}")
    with _lock:
        _threads = n
        if _pool is not None:
            _pool.shutdown(wait=True)
            _pool = None


def _get_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool._max_workers < workers:  # noqa: SLF001 - resize on demand
            if _pool is not None:
                _pool.shutdown(wait=True)
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vta-cpu")
        return _pool


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

    pool = _get_pool(t - 1)
    futs = [pool.submit(worker) for _ in range(t - 1)]
    worker()
    for f in futs:
        f.result()


LAUNCH_CALLBACK = LAUNCH(_launch)
LAUNCH_ADDRESS = ctypes.cast(LAUNCH_CALLBACK, ctypes.c_void_p).value
