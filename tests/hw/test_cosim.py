"""Co-simulation (cocotb + Verilator) against the simulator: byte-identical DRAM and equal cycle counts.

One Verilator build (cached in build/rtl/) and one simulator process for all programs of a config.
"""
from __future__ import annotations

import pytest

from hw.cosim.compare import compare
from hw.cosim.workloads import blocked_gemms
from hw.random_programs import random_program
from isa import make_config

N_RANDOM = 200


def _suite(cfg):
    from jit_runtime.suite import suite_cases

    out = []
    for name, build in suite_cases(cfg).items():
        prog, _ = build()
        out.append((name, prog.dram, prog.insn_addr, prog.n_insns))
    return out


@pytest.mark.slow
def test_tiny_suite_and_random_programs_match_simulator():
    cfg = make_config("tiny")
    progs = _suite(cfg)
    for name, p in blocked_gemms(cfg)[2:]:  # the default-plan blocked GEMM (the suite has gemm_vt1/vt2)
        progs.append((name, p.dram, p.insn_addr, p.n_insns))
    for seed in range(N_RANDOM):
        p = random_program(cfg, seed)
        progs.append((p.name, p.dram, p.insn_addr, p.n_insns))
    res = compare(cfg, progs)
    bad = [c for c in res if not c.ok]
    names = {c.name for c in res}
    assert len(res) == len(progs) and {"gemm_vt2", "blocked_gemm"} <= names
    assert not bad, bad[:5]
