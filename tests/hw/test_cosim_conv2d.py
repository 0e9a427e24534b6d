"""A compiled conv2d layer on the pynq-z1 RTL: byte-identical DRAM and the same cycle count as the simulator.

The layer (3x3, stride 1, pad 1, 16 -> 32 channels, 8x8, int8, bias + requant epilogue) is compiled by the
real backend (:class:`compiler.backend.accel.backend.SimAccelBackend`: schedule, lower, codegen, jit_runtime
``Program``); a recording device runs it on the simulator and keeps the DRAM image the device received
(:func:`compiler.backend.accel.conv_job.compiled_conv2d`). That image then runs on the Verilator model of the RTL, in one
simulator process together with the pynq-z1 blocked GEMMs (one pynq-z1 build, cached in build/rtl/ like
every other pynq-z1 co-simulation: the cache key is the config + RTL sources).
"""
from __future__ import annotations

import numpy as np
import pytest

from isa import make_config

CFG = make_config("pynq-z1")


@pytest.mark.slow
def test_compiled_conv2d_pynq_z1_matches_simulator_and_numpy():
    """Also: a layer with the full quantized epilogue (per-channel 31-bit multipliers, bias, zero point, relu) as
    ONE fused REQUANT pass and padding with a non-zero pad value; the REQUANT suite case (signed multipliers,
    shifts 20..63, random clip bounds)."""
    import dataclasses

    from compiler.quant.requant_params import choose_requant
    from hw.cosim.runner import run_programs
    from compiler.backend.accel.conv_job import compiled_conv2d
    from hw.cosim.workloads import blocked_gemms
    from jit_runtime.suite import requant

    conv = compiled_conv2d(CFG)
    assert np.array_equal(conv.output, conv.expected)  # the simulator runs the compiled layer correctly
    gemms = [i for i in conv.insns if type(i).__name__ == "Gemm"]
    assert gemms and any(g.overwrite for g in gemms)  # the layer exercises overwrite GEMMs
    rq = dataclasses.replace(choose_requant(np.linspace(2e-4, 9e-4, 32), 0, relu=True), zero_point=-6)
    fused = compiled_conv2d(CFG, seed=3, pad_value=-11, requant=rq)
    assert np.array_equal(fused.output, fused.expected)
    alus = [i for i in fused.insns if type(i).__name__ == "Alu"]
    assert alus and all(a.op == "REQUANT" for a in alus)  # the whole epilogue is one pass per output tile
    assert any(i.pad_value == -11 for i in fused.insns if type(i).__name__ == "Load")

    jobs = [conv.job, fused.job]
    sim_ref = [(conv.sim_dram, conv.sim_cycles), (fused.sim_dram, fused.sim_cycles)]
    sim = conv.device.sim  # one simulator across the jobs, as the RTL keeps its scratchpads across them
    progs = [prog for _, prog in blocked_gemms(CFG)] + [requant(CFG)[0]]
    for prog in progs:
        img = prog.dram.copy()
        sim_ref.append((img, int(sim.run(img, prog.insn_addr, prog.n_insns).cycles)))
        jobs.append((prog.dram.copy(), prog.insn_addr, prog.n_insns))

    rtl = run_programs(CFG, jobs)
    assert len(rtl) == len(jobs)
    for (img, cyc), r in zip(sim_ref, rtl):
        assert not r.timeout
        assert r.cycles == cyc
        assert r.dram.shape == img.shape and np.array_equal(r.dram, img)
    assert np.array_equal(conv.read_output(rtl[0].dram), conv.expected)
    assert np.array_equal(fused.read_output(rtl[1].dram), fused.expected)
    print(f"conv2d 16->32 8x8 3x3 on pynq-z1: {conv.sim_cycles} cycles, {conv.job[2]} instructions, "
          f"{sum(g.overwrite for g in gemms)} overwrite GEMMs")

