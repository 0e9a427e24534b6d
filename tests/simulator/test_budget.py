"""The simulator's cycle budget, progress display, and the uop range check."""
from __future__ import annotations

import time

import numpy as np
import pytest

import isa
from isa import Alu, Finish, Gemm, Load, MemType
from simulator import BudgetError, InvalidInstructionError, Simulator
from simulator.budget import DEFAULT_MAX_CYCLES
from tests.simulator.helpers import Prog, deps

TINY = isa.HwConfig.from_preset("tiny")
OP = isa.alu_ops()[0].name


def test_huge_alu_instruction_is_rejected_before_running():
    """16383 x 16383 iterations (~27 minutes of host time before) stop at once with the budget named."""
    p = Prog(TINY).add(Alu(OP, False, 0, 1, 16383, 16383), Finish())
    t0 = time.perf_counter()
    with pytest.raises(BudgetError) as ei:
        p.run()
    assert time.perf_counter() - t0 < 5.0
    msg = str(ei.value)
    assert f"{16383 * 16383 + TINY.alu_pipeline:,}" in msg and f"{DEFAULT_MAX_CYCLES:,}" in msg
    assert "instruction 0 (ALU." in msg and "max_cycles" in msg


@pytest.mark.parametrize("timing", [True, False])
def test_budget_applies_in_both_modes(timing):
    insns = [Alu(OP, True, 0, 1, 1000, 1), Finish()]
    p = Prog(TINY).add(*insns)
    with pytest.raises(BudgetError, match="1,004"):
        p.run(sim=Simulator(TINY, timing=timing, max_cycles=1000))
    Prog(TINY).add(*insns).run(sim=Simulator(TINY, timing=timing, max_cycles=2000))  # fits


def test_stalls_past_the_budget_stop_the_timed_run():
    """Each unit alone fits (the floor), but the token chain LOAD -> ALU serializes them past the budget."""
    insns = [Load(MemType.INP, 0, 0, 1, 1, 1, deps=deps("push_next")),
             Alu(OP, True, 0, 1, 1000, 1, deps=deps("pop_prev")), Finish()]
    p = Prog(TINY).add(*insns)
    with pytest.raises(BudgetError, match="at cycle"):
        p.run(sim=Simulator(TINY, max_cycles=1010))
    res = Prog(TINY).add(*insns).run(sim=Simulator(TINY, max_cycles=None))
    assert res.cycles > 1010


def test_progress_bar_on_request(capsys):
    Prog(TINY).add(Alu(OP, True, 0, 1, 100, 1), Finish()).run(sim=Simulator(TINY, progress=True))
    assert "simulate" in capsys.readouterr().err


def test_bad_budget_argument():
    with pytest.raises(ValueError, match="max_cycles"):
        Simulator(TINY, max_cycles=0)


@pytest.mark.parametrize("insn", [Alu(OP, False, 5, 2, 1, 1), Gemm(False, 5, 2, 1, 1)])
def test_uop_bgn_after_uop_end_is_rejected(insn):
    for timing in (True, False):
        with pytest.raises(InvalidInstructionError) as ei:
            Prog(TINY).add(insn, Finish()).run(timing=timing)
        assert "instruction 0" in str(ei.value) and "uop_bgn=5 > uop_end=2" in str(ei.value)


# ------------------------------------------- repeated ALU loops (zero factors) match the per-uop reference
from isa import Uop  # noqa: E402
from tests.simulator.reference import ref_execute  # noqa: E402
from tests.simulator.test_semantics import run_compute  # noqa: E402
from isa.config import make_config  # noqa: E402

#: TINY with an ALU pipeline of depth 2: no micro-op is in flight when the next reads, so an ALU loop may read the
#: row the previous micro-op wrote (the hazard rule, docs/timing.md) and these chains are valid programs.
SEQ = make_config(TINY, alu_pipeline=2)


@pytest.mark.parametrize("op,uops,iters", [
    ("ADD", [Uop(0, 0)], (50, 1)),             # doubling: wraps to 0 and settles
    ("ADD", [Uop(0, 1)], (7, 3)),              # acc[0] += acc[1]: never settles, every repetition counts
    ("MAX", [Uop(2, 3), Uop(3, 2)], (4, 5)),   # settles after one repetition
    ("SHR", [Uop(1, 0), Uop(0, 1)], (6, 1)),
])
def test_repeated_alu_loops_match_the_reference(op, uops, iters):
    rng = np.random.default_rng(0)
    acc = rng.integers(-50, 50, (8, 1, 4))
    insn = Alu(op, False, 0, len(uops), *iters)
    sim = run_compute(SEQ, [insn], uops, acc=acc)
    ref = acc.copy()
    ref_execute(SEQ, insn, uops, None, None, ref)
    assert np.array_equal(sim.scratchpads["acc"][:8], ref)


def test_long_unsettling_chain_stops_at_the_host_budget(monkeypatch):
    import simulator.alu

    monkeypatch.setattr(simulator.alu, "MAX_SEQUENTIAL_STEPS", 100)
    with pytest.raises(BudgetError, match="instruction 0 .*sequential"):
        run_compute(SEQ, [Alu("ADD", False, 0, 1, 500, 1)], [Uop(0, 1)], acc=np.ones((8, 1, 4), np.int64))


def test_settling_chain_of_a_million_iterations_is_fast():
    """MIN of an accumulator with itself over 1024 x 1024 iterations: settles after one step."""
    t0 = time.perf_counter()
    sim = run_compute(SEQ, [Alu("MIN", False, 0, 1, 1024, 1024)], [Uop(0, 0)], acc=np.full((8, 1, 4), 7))
    assert time.perf_counter() - t0 < 5.0
    assert (sim.scratchpads["acc"][0] == 7).all()
