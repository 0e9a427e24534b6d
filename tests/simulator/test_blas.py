"""BLAS threads in the simulator: small products on one thread, mid-size ones on the free cores, the library default
restored after a run."""
from __future__ import annotations

import pytest

import simulator.blas as blas


def _threads() -> list[int]:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    libs = threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
    if not libs:
        pytest.skip("no BLAS that threadpoolctl controls")
    return [lib.num_threads for lib in libs]


def test_small_products_use_one_thread_and_the_default_comes_back(monkeypatch):
    before = _threads()
    monkeypatch.setattr(blas, "free_cores", lambda: 1)  # every other core busy
    with blas.blas_session():
        blas.use_threads_for(blas.IDLE_MACS - 1)
        assert _threads() == [1] * len(before)
        blas.use_threads_for(blas.SMALL_MACS - 1)  # mid-size on a busy machine: still one
        assert _threads() == [1] * len(before)
        blas.use_threads_for(blas.SMALL_MACS)
        assert _threads() == before
        blas.use_threads_for(10)
    assert _threads() == before


def test_mid_size_products_use_the_free_cores(monkeypatch):
    before = _threads()
    reads = []
    monkeypatch.setattr(blas, "free_cores", lambda: reads.append(1) or 64)  # an idle machine
    with blas.blas_session():
        blas.use_threads_for(blas.IDLE_MACS)
        assert _threads() == before  # the default (at most the free cores)
        blas.use_threads_for(blas.IDLE_MACS - 1)
        assert _threads() == [1] * len(before)
        blas.use_threads_for(blas.IDLE_MACS)
    assert len(reads) == 1  # read once per run
    with blas.blas_session():
        blas.use_threads_for(blas.IDLE_MACS)
    assert len(reads) == 2 and _threads() == before


def test_free_cores_is_at_least_one_and_at_most_the_cpus():
    import os

    free = blas.free_cores()
    assert 1 <= free <= (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())


def test_simulator_run_restores_the_default():
    import numpy as np

    from isa import make_config
    from jit_runtime.blocked_gemm import blocked_gemm
    from simulator import Simulator

    before = _threads()
    cfg = make_config("tiny")
    p, _ = blocked_gemm(cfg)
    Simulator(cfg).run(np.array(p.dram, copy=True), p.insn_addr, p.n_insns)
    assert _threads() == before


def test_a_blas_loaded_after_the_first_scan_is_controlled_too():
    """scipy brings its own OpenBLAS: imported after the simulator's first scan, it must still be set to one thread
    for small products (it was left at its default, and the suite saw [1, 2] instead of [1, 1])."""
    import subprocess
    import sys

    pytest.importorskip("threadpoolctl")
    pytest.importorskip("scipy")
    code = """
import simulator.blas as blas
from threadpoolctl import ThreadpoolController
with blas.blas_session():
    blas.use_threads_for(10)
import scipy.linalg, scipy.special  # noqa: E401,F401
with blas.blas_session():
    blas.use_threads_for(10)
    print([lib.num_threads for lib in ThreadpoolController().select(user_api="blas").lib_controllers])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    threads = eval(out.strip().splitlines()[-1])
    assert threads and all(n == 1 for n in threads), threads
