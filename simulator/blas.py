"""BLAS threads for the simulator's matrix products.

A dense GEMM instruction is one BLAS call (:mod:`simulator.gemm`), usually a small one. On a machine
whose cores are busy with other work, OpenBLAS workers that spin-wait for a descheduled partner make
such calls very slow (measured on a 2-core machine under load: 32 x 1024 x 256 in 0.38 ms on one
thread, 66 ms on two), while on an idle machine a second thread nearly halves a call of a few
million multiply-adds. So:

* below ``IDLE_MACS`` multiply-adds (every convolution GEMM of the zoo models): one thread;
* from ``SMALL_MACS``: the library's default;
* in between (e.g. the 32 x 1024 x 256 tiles of bench_simulator's 1024^3 GEMM): as many threads as
  there are cores that nobody else is using when the run's first such product starts
  (:func:`free_cores`; one thread where that cannot be read).

:func:`blas_session` restores the default when a program run ends. Without ``threadpoolctl`` (or
without a BLAS it can control) nothing changes.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

#: Multiply-adds below which a matrix product always runs on one BLAS thread.
IDLE_MACS = 1 << 22
#: Multiply-adds from which a product runs on the library's default threads whatever the load.
SMALL_MACS = 1 << 27

_state: dict = {}


def _controllers() -> list:
    # Rescan when modules were imported since the last scan (an extension such as scipy's may bring its own
    # BLAS), but only while every library is at its default, so the defaults read are the libraries' own.
    stale = "libs" in _state and _state["current"] is None and _state["nmods"] != len(sys.modules)
    if "libs" not in _state or stale:
        _state["nmods"] = len(sys.modules)
        try:
            from threadpoolctl import ThreadpoolController

            libs = ThreadpoolController().select(user_api="blas").lib_controllers
        except Exception:  # noqa: BLE001 - no threadpoolctl or an unknown BLAS: leave threads alone
            libs = []
        _state["libs"] = libs
        _state["default"] = [lib.num_threads for lib in libs]
        _state["current"] = None
        _state["free"] = None
    return _state["libs"]


def free_cores() -> int:
    """Usable CPUs minus the runnable threads of other processes right now (Linux ``/proc``; this process's own
    threads, e.g. BLAS workers still spinning after a call, do not count); 1 where that cannot be read."""
    try:
        cpus = len(os.sched_getaffinity(0))
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        own = 0
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/stat") as f:
                    stat = f.read()
            except OSError:  # the thread ended meanwhile
                continue
            own += stat[stat.rindex(")") + 2] == "R"
    except (OSError, ValueError, IndexError, AttributeError):
        return 1
    return max(1, cpus - max(0, running - own))


def _threads_for(macs: int, default: int) -> int:
    if macs < IDLE_MACS:
        return 1
    if macs >= SMALL_MACS:
        return default
    if _state["free"] is None:  # read once per run, at its first mid-size product
        _state["free"] = free_cores()
    return max(1, min(default, _state["free"]))


def use_threads_for(macs: int) -> None:
    """Set the BLAS thread count for a product of ``macs`` multiply-adds (see the module docstring)."""
    if macs < IDLE_MACS and _state.get("single"):  # the common case, already set: nothing to do
        return
    libs = _controllers()
    if not libs:
        return
    want = [_threads_for(macs, default) for default in _state["default"]]
    _state["single"] = all(n == 1 for n in want)
    if _state["current"] == want:
        return
    for lib, n in zip(libs, want):
        lib.set_num_threads(n)
    _state["current"] = want


@contextmanager
def blas_session() -> Iterator[None]:
    """A program run: the thread counts set by :func:`use_threads_for` are restored at the end (and the free
    cores are read again in the next run)."""
    try:
        yield
    finally:
        if _state.get("current") is not None:
            for lib, default in zip(_state["libs"], _state["default"]):
                lib.set_num_threads(default)
            _state["current"] = None
        _state["free"] = None
        _state["single"] = False
