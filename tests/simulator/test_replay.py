"""Programs run again replay their recorded timeline (simulator/replay.py): same bytes, same cycles, same events
as the timing engine on every input; a changed program, DRAM size or cycle budget is a miss; the cache is bounded."""
from __future__ import annotations

import numpy as np
import pytest

import isa
import simulator.replay as replay
from hw.random_programs import random_program
from isa import Alu, Finish, Gemm, Load, MemType, Store, Uop
from simulator import BudgetError, OutOfRangeError, Simulator
from tests.simulator.helpers import Prog, deps

TINY = isa.HwConfig.from_preset("tiny")
PYNQ = isa.HwConfig.from_preset("pynq-z1")


@pytest.fixture
def engine_calls(monkeypatch):
    calls = []
    real = replay.run_timed

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(replay, "run_timed", counting)
    return calls


def _fresh(cfg, dram, addr, n):
    """The timing engine on a new simulator: the reference for every replayed run."""
    return Simulator(cfg, replay=False).run(dram, addr, n)


def _with_data(dram, seed):
    """The image with other bytes in its first data region (random programs keep INP data there)."""
    out = dram.copy()
    out[64:4096] = np.random.default_rng(seed).integers(0, 256, 4096 - 64, dtype=np.uint8)
    return out


@pytest.mark.parametrize("cfg, seeds", [(TINY, range(8)), (PYNQ, range(3))])
def test_replay_equals_the_engine_on_other_data(cfg, seeds, engine_calls):
    for seed in seeds:
        p = random_program(cfg, seed)
        sim = Simulator(cfg)
        for k in range(3):  # recorded, then replayed twice on other data
            engine_calls.clear()
            dram, ref = _with_data(p.dram, 100 * seed + k), _with_data(p.dram, 100 * seed + k)
            sim.reset()  # random programs may read scratchpad rows they did not load
            got = sim.run(dram, p.insn_addr, p.n_insns)
            want = _fresh(cfg, ref, p.insn_addr, p.n_insns)
            assert len(engine_calls) == (2 if k == 0 else 1), (seed, k)  # replayed runs skip the engine
            assert np.array_equal(dram, ref), (seed, k)
            assert got.cycles == want.cycles and got.events == want.events, (seed, k)
            assert got.timeline.bursts == want.timeline.bursts and got.profile == want.profile


def _uop_gemm_program(cfg: isa.HwConfig) -> tuple[Prog, int]:
    """LOAD.UOP from DRAM, LOAD.INP/WGT, GEMMs over the loaded uops (two rounds, dst + 64 in the second), STORE:
    the GEMMs' indices are data."""
    p = Prog(cfg, 1 << 15)
    rng = np.random.default_rng(5)
    inp = p.place("inp", rng.integers(-128, 128, (8, cfg.batch, cfg.block_in)))
    wgt = p.place("wgt", rng.integers(-128, 128, (4, cfg.block_out, cfg.block_in)))
    uops = p.place_uops([Uop(0, 0, 0), Uop(1, 1, 1), Uop(2, 2, 2)])
    out = p.alloc("out", 4)
    p.add(Load(MemType.UOP, 0, uops, 1, 3, 3),
          Load(MemType.WGT, 0, wgt, 1, 4, 4),
          Load(MemType.INP, 0, inp, 1, 8, 8, deps=deps("push_next")),
          Gemm(True, 0, 3, 2, 1, dst_factor_out=64, deps=deps("pop_prev")),
          Gemm(False, 0, 3, 2, 1, dst_factor_out=64, deps=deps("push_next")),
          Store(MemType.OUT, 0, out, 1, 4, 4, deps=deps("pop_prev")),
          Finish())
    return p, uops


def test_replay_follows_data_dependent_micro_ops_and_their_errors(engine_calls):
    cfg = TINY
    p, uops = _uop_gemm_program(cfg)
    addr, n = p.stream()
    sim = Simulator(cfg)
    variants = [[Uop(0, 0, 0), Uop(1, 1, 1), Uop(2, 2, 2)], [Uop(3, 7, 3), Uop(0, 5, 1), Uop(3, 6, 0)],
                [Uop(0, 0, 0), Uop(1, 1, 1), Uop(cfg.acc_depth - 64, 2, 2)]]  # the last: dst + 64 out of range
    for k, table in enumerate(variants + variants[:2]):
        p.put("uop", uops, isa.encode_uops(table, cfg))
        sim.reset()  # the reference starts from zeroed scratchpads
        dram, ref = p.dram.copy(), p.dram.copy()
        if table is variants[2]:
            with pytest.raises(OutOfRangeError) as fresh_err:
                _fresh(cfg, ref, addr, n)
            with pytest.raises(OutOfRangeError) as got_err:
                sim.run(dram, addr, n)
            assert str(got_err.value) == str(fresh_err.value)
            continue
        fresh = Simulator(cfg, replay=False)
        got, want = sim.run(dram, addr, n), fresh.run(ref, addr, n)
        assert np.array_equal(dram, ref) and got.events == want.events, k
        assert np.array_equal(sim.scratchpads["acc"], fresh.scratchpads["acc"]), k
    assert sum(engine_calls) == 1 + 5  # recorded once; 5 reference runs
    engine_calls.clear()
    sim = Simulator(cfg)
    p.put("uop", uops, isa.encode_uops(variants[2], cfg))
    with pytest.raises(OutOfRangeError):
        sim.run(p.dram.copy(), addr, n)
    p.put("uop", uops, isa.encode_uops(variants[0], cfg))
    sim.reset()
    sim.run(p.dram.copy(), addr, n)
    assert len(engine_calls) == 2  # a run that raised recorded nothing: the next run uses the engine again


def test_a_changed_program_dram_size_or_budget_misses(engine_calls):
    cfg = TINY
    sim = Simulator(cfg)
    a, b = random_program(cfg, 1), random_program(cfg, 2)
    assert a.insn_addr == b.insn_addr and a.n_insns != b.n_insns or not np.array_equal(
        a.dram[a.insn_addr:a.insn_addr + 16 * a.n_insns], b.dram[b.insn_addr:b.insn_addr + 16 * b.n_insns])
    first = sim.run(a.dram.copy(), a.insn_addr, a.n_insns)
    sim.reset()
    other = sim.run(b.dram.copy(), b.insn_addr, b.n_insns)  # another program at the same address
    assert other.events == _fresh(cfg, b.dram.copy(), b.insn_addr, b.n_insns).events
    assert other.cycles != first.cycles
    engine_calls.clear()
    sim.reset()
    bigger = np.concatenate([a.dram, np.zeros(4096, np.uint8)])  # same bytes, larger DRAM: checked again
    assert sim.run(bigger, a.insn_addr, a.n_insns).events == first.events
    assert len(engine_calls) == 1
    sim.max_cycles = first.cycles - 1  # the budget is part of the key: the engine stops the run
    with pytest.raises(BudgetError):
        sim.run(a.dram.copy(), a.insn_addr, a.n_insns)


def test_program_cache_is_bounded_least_recently_used_first():
    cfg = TINY
    sim = Simulator(cfg)
    progs = [random_program(cfg, s) for s in range(6)]
    sizes = [p.n_insns for p in progs]
    sim._decoder.max_cached_insns = sizes[0] + sizes[1] + sizes[2]
    for p in progs:
        sim.reset()
        sim.run(p.dram.copy(), p.insn_addr, p.n_insns)
        assert sim._decoder.cached_insns <= sim._decoder.max_cached_insns
    kept = [len(pr.infos) for pr in sim._decoder._programs.values()]  # oldest first
    assert kept[-1] == sizes[-1] and sum(kept) == sim._decoder.cached_insns
    want = []  # the most recent programs that fit, newest last
    for size in reversed(sizes):
        if sum(want) + size > sim._decoder.max_cached_insns:
            break
        want.insert(0, size)
    assert kept == want
    before = list(sim._decoder._programs.values())
    sim._decoder.max_cached_insns = progs[0].n_insns - 1  # a program larger than the bound is not cached at all
    sim.run(progs[0].dram.copy(), progs[0].insn_addr, progs[0].n_insns)
    assert list(sim._decoder._programs.values()) == before


def test_replay_off_runs_the_engine_every_time(engine_calls):
    p = random_program(TINY, 3)
    sim = Simulator(TINY, replay=False)
    for _ in range(2):
        sim.reset()
        sim.run(p.dram.copy(), p.insn_addr, p.n_insns)
    assert len(engine_calls) == 2


def test_racing_program_replays_the_engines_order():
    """No tokens between a GEMM and the loads that overwrite its inputs: the result depends on the event order,
    which the replay keeps (other data, same interleaving as the engine)."""
    cfg = TINY
    rng = np.random.default_rng(9)
    p = Prog(cfg, 1 << 15)
    first = p.place("inp", rng.integers(-128, 128, (8, cfg.batch, cfg.block_in)))
    second = p.place("inp", rng.integers(-128, 128, (8, cfg.batch, cfg.block_in)))
    wgt = p.place("wgt", rng.integers(-128, 128, (1, cfg.block_out, cfg.block_in)))
    out = p.alloc("out", 8)
    p.add(Load(MemType.UOP, 0, p.place_uops([Uop(0, 0, 0)]), 1, 1, 1),
          Load(MemType.WGT, 0, wgt, 1, 1, 1),
          Load(MemType.INP, 0, first, 1, 8, 8),
          Gemm(True, 0, 1, 8, 1, dst_factor_out=1),
          Gemm(False, 0, 1, 8, 1, dst_factor_out=1, src_factor_out=1),  # races with the next load
          Load(MemType.INP, 0, second, 1, 8, 8),
          Gemm(False, 0, 1, 8, 1, dst_factor_out=1, src_factor_out=1, deps=deps("push_next")),
          Store(MemType.OUT, 0, out, 1, 8, 8, deps=deps("pop_prev")),
          Finish())
    addr, n = p.stream()
    sim = Simulator(cfg)
    sim.run(p.dram.copy(), addr, n)
    for seed in range(3):
        dram = p.dram.copy()
        k = first * cfg.inp_elem_bytes
        dram[k:k + 16 * cfg.inp_elem_bytes] = np.random.default_rng(seed).integers(0, 256, 16 * cfg.inp_elem_bytes,
                                                                                   dtype=np.uint8)
        ref = dram.copy()
        sim.reset()
        got, want = sim.run(dram, addr, n), _fresh(cfg, ref, addr, n)
        assert np.array_equal(dram, ref) and got.events == want.events


def test_re_registered_alu_op_decodes_anew():
    """The same words after an ALU op is re-registered (same opcode, other pipeline depth): decoded again, the new
    timing applies on the same simulator."""
    from isa.alu import alu_ops, register_alu_op, unregister_alu_op
    from isa.declared_timing import Timing

    cfg = TINY
    opcode = max(op.opcode for op in alu_ops()) + 1
    cycles = []
    sim = Simulator(cfg)
    for depth in (4, 9):
        register_alu_op("SIMREPLAYTEST", opcode, lambda ops, a, b: ops.add(a, b), timing=Timing(1, depth))
        try:
            p = Prog(cfg)
            p.add(Alu("SIMREPLAYTEST", False, 0, 1, 1, 1, use_imm=True, imm=3), Finish())
            addr, n = p.stream()
            got = sim.run(p.dram, addr, n).cycles
            assert got == Simulator(cfg, replay=False).run(p.dram.copy(), addr, n).cycles
            cycles.append(got)
        finally:
            unregister_alu_op("SIMREPLAYTEST")
    assert cycles[1] == cycles[0] + 5
