"""Threading for large GEMMs: BLAS limited to one thread, work split over a small thread pool.

Many medium-sized matmuls (one per GEMM instruction) run badly on a multi-threaded BLAS
when the machine is busy (its threads spin-wait); splitting each product over Python
threads that each call a single-threaded BLAS degrades gracefully instead.
"""
from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

_pool: ThreadPoolExecutor | None = None
_controller = None
WORKERS = max(1, min(4, os.cpu_count() or 1))


def pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="vta-sim")
    return _pool


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit numpy's BLAS to one thread inside the block (no-op without threadpoolctl)."""
    global _controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield
        return
    if _controller is None:
        _controller = ThreadpoolController().select(user_api="blas")
    with _controller.limit(limits=1):
        yield
