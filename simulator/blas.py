"""BLAS threads for the simulator's matrix products.

A dense GEMM instruction is one BLAS call (:mod:`simulator.gemm`). Up to ``SMALL_MACS`` multiply-adds
(every convolution GEMM of the zoo models, and the 32 x 1024 x 256 tiles of bench_simulator's
1024^3 GEMM) it runs on one thread: a second thread saves at most half of a call that takes well
under a millisecond, while on a machine whose cores are busy with other work, OpenBLAS workers that
spin-wait for a descheduled partner can make one such call take tens of milliseconds (measured on a
2-core machine under load: 8.4M multiply-adds in 0.38 ms on one thread, 66 ms on two). Larger calls
run on the library's default. :func:`blas_session` restores the default when a program run ends.
Without ``threadpoolctl`` (or without a BLAS it can control) nothing changes.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

#: Multiply-adds below which a matrix product runs on one BLAS thread.
SMALL_MACS = 1 << 27

_state: dict = {}


def _controllers() -> list:
    if "libs" not in _state:
        try:
            from threadpoolctl import ThreadpoolController

            libs = ThreadpoolController().select(user_api="blas").lib_controllers
        except Exception:  # noqa: BLE001 - no threadpoolctl or an unknown BLAS: leave threads alone
            libs = []
        _state["libs"] = libs
        _state["default"] = [lib.num_threads for lib in libs]
        _state["current"] = None
    return _state["libs"]


def use_threads_for(macs: int) -> None:
    """Set the BLAS thread count for a product of ``macs`` multiply-adds (one thread when small)."""
    libs = _controllers()
    if not libs:
        return
    small = macs < SMALL_MACS
    if _state["current"] == small:
        return
    for lib, default in zip(libs, _state["default"]):
        lib.set_num_threads(1 if small else default)
    _state["current"] = small


@contextmanager
def blas_session() -> Iterator[None]:
    """A program run: the thread counts set by :func:`use_threads_for` are restored at the end."""
    try:
        yield
    finally:
        if _state.get("current") is not None:
            for lib, default in zip(_state["libs"], _state["default"]):
                lib.set_num_threads(default)
            _state["current"] = None
