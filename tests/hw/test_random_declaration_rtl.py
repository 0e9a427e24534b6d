"""A random declaration (tests/simulator/test_declaration_fuzz.py's generator) on the RTL harness: its default
datapath (the semantics elaborated term by term) with vector operands in both scratchpads, a reduction and
two product terms gives the simulator's bytes and cycles on random programs. One seeded declaration (the
harness build for its design takes ~30-60 s once, cached in build/); more were checked one-off."""
from __future__ import annotations

import numpy as np

from tests.simulator.test_declaration_fuzz import ROW, TINY, declare, random_spec


def test_random_declaration_matches_on_rtl():
    from hw.cosim.harness import Harness
    from hw.random_programs import random_program
    from isa.declare import register_intrinsic, unregister_intrinsic
    from isa.intrinsics import intrinsics
    from simulator import Simulator

    spec = random_spec(np.random.default_rng(1022))
    register_intrinsic(declare(spec), check_configs=("tiny",))
    try:
        intr = intrinsics(TINY)["fz"]
        assert min(intr.vectors[o.name] for o in intr.inputs) > 1 and intr.reduce_axes and len(spec["terms"]) == 2
        assert {o.scope for o in intr.inputs} == {"inp", "wgt"} and ROW["wgt"] > ROW["inp"]
        with Harness(TINY) as h:
            sim = Simulator(TINY)
            for seed in range(3):
                p = random_program(TINY, 50_000 + seed, tensor=("gemm", "fz"))
                img = p.dram.copy()
                s = sim.run(img, p.insn_addr, p.n_insns)
                r = h.run(p.dram, p.insn_addr, p.n_insns)
                assert (r.cycles, r.timeout) == (int(s.cycles), False), p.name
                assert np.array_equal(r.dram, img), p.name
    finally:
        unregister_intrinsic("fz")
