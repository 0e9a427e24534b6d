"""Blocked GEMM with one and two virtual threads: correct, and faster with two (load overlaps compute)."""
import numpy as np
import pytest

from isa import Gemm, Load, MemType, make_config
from jit_runtime.blocked_gemm import (GemmPlan, blocked_gemm, build_blocked_gemm, default_plan, random_operands,
                                      reference, unpack_output)


def _overlap(program, result) -> int:
    """Cycles during which an INP/WGT load transfers data while a (non-reset) GEMM computes."""
    insns = program.instructions()
    events = result.device_result.events
    loads = [(e.grant, e.end) for e in events
             if isinstance(insns[e.index], Load) and insns[e.index].mem in (MemType.INP, MemType.WGT) and e.grant >= 0]
    gemms = [(e.start, e.end) for e in events if isinstance(insns[e.index], Gemm) and not insns[e.index].reset
             and insns[e.index].iter_out > 0]
    assert loads and gemms
    return sum(max(0, min(le, ge) - max(ls, gs)) for ls, le in loads for gs, ge in gemms)


@pytest.fixture(scope="module", params=["pynq-z1", "tiny"])
def runs(request):
    cfg = make_config(request.param)
    out = {}
    for vt in (1, 2):
        program, expected = blocked_gemm(cfg, virtual_threads=vt)
        out[vt] = (program, expected, program.run("sim"))
    return cfg, out


def test_outputs_match_numpy(runs):
    cfg, out = runs
    plan = default_plan(cfg)
    a, w = random_operands(plan)
    want = reference(a, w, cfg, plan.shift, plan.relu)
    for vt, (program, expected, result) in out.items():
        np.testing.assert_array_equal(unpack_output(result.outputs["c"]), want)
    assert len(np.unique(want)) > 50  # the clip does not flatten everything


def test_two_virtual_threads_are_faster_and_overlap_load_with_compute(runs):
    cfg, out = runs
    (p1, _, r1), (p2, _, r2) = out[1], out[2]
    assert r2.cycles < r1.cycles
    assert r2.profile["utilization"] > r1.profile["utilization"]
    assert _overlap(p1, r1) == 0  # one thread: a load never runs under a GEMM
    assert _overlap(p2, r2) > 0.25 * sum(e.end - e.grant for e in r2.device_result.events if e.grant >= 0
                                         and isinstance(p2.instructions()[e.index], Load))
    # the same work was done: same MACs, same bytes of inputs and outputs
    assert r1.profile["macs"] == r2.profile["macs"] == cfg.macs_per_cycle * (default_plan(cfg).n // cfg.batch) * \
        (default_plan(cfg).k // cfg.block_in) * (default_plan(cfg).m // cfg.block_out)


def test_pynq_problem_is_256_cubed_with_four_block_tiles():
    plan = default_plan(make_config("pynq-z1"))
    assert (plan.n, plan.k, plan.m, plan.tile_m) == (256, 256, 256, 4)


def test_plans_that_do_not_fit_are_rejected():
    cfg = make_config("tiny")
    a, w = random_operands(GemmPlan(32, 32, 32, tile_n=8))
    with pytest.raises(ValueError, match="scratchpad holds"):
        build_blocked_gemm(cfg, a, w, GemmPlan(32, 32, 32, tile_n=32, tile_m=8), virtual_threads=2)
    with pytest.raises(ValueError, match="must divide"):
        build_blocked_gemm(cfg, a, w, GemmPlan(32, 32, 32, tile_n=3), virtual_threads=1)
    with pytest.raises(ValueError, match="virtual_threads"):
        build_blocked_gemm(cfg, a, w, GemmPlan(32, 32, 32, tile_n=8), virtual_threads=3)
