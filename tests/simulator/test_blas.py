"""BLAS threads in the simulator: small products on one thread, the library default restored after a run."""
from __future__ import annotations

import pytest

import simulator.blas as blas


def _threads() -> list[int]:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    libs = threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
    if not libs:
        pytest.skip("no BLAS that threadpoolctl controls")
    return [lib.num_threads for lib in libs]


def test_small_products_use_one_thread_and_the_default_comes_back():
    before = _threads()
    with blas.blas_session():
        blas.use_threads_for(blas.SMALL_MACS - 1)
        assert _threads() == [1] * len(before)
        blas.use_threads_for(blas.SMALL_MACS)
        assert _threads() == before
        blas.use_threads_for(10)
    assert _threads() == before


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
