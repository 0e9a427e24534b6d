"""The cocotb test bench: runs every job of ``$VTA_COSIM_JOBS`` (a JSON file) on the DUT, one after another.

Each job: a DRAM image (``.npy``), ``insn_addr``, ``n_insns``; the bench resets the design
(scratchpads keep their contents, as the simulator's do), programs the AXI4-Lite
registers, serves DRAM until ``irq``, reads the cycle count and saves the DRAM image.
"""
from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from hw.cosim.dram_model import DramModel
from hw.regfile import CTRL, CYCLES, INSN_ADDR, INSN_COUNT

PERIOD_NS = 2


async def _until(dut, signal) -> None:
    """Wait for the first rising edge that ends a cycle in which ``signal`` is high."""
    while True:
        await RisingEdge(dut.clk)
        if int(signal.value):
            return


async def axil_write(dut, addr: int, value: int) -> None:
    dut.s_axil_awaddr.value = addr
    dut.s_axil_wdata.value = value
    dut.s_axil_wstrb.value = 0xF
    dut.s_axil_awvalid.value = 1
    dut.s_axil_wvalid.value = 1
    await _until(dut, dut.s_axil_awready)
    dut.s_axil_awvalid.value = 0
    dut.s_axil_wvalid.value = 0


async def axil_read(dut, addr: int) -> int:
    dut.s_axil_araddr.value = addr
    dut.s_axil_arvalid.value = 1
    await _until(dut, dut.s_axil_arready)
    dut.s_axil_arvalid.value = 0
    await _until(dut, dut.s_axil_rvalid)
    return int(dut.s_axil_rdata.value)


@cocotb.test()
async def run_jobs(dut):
    spec = json.loads(open(os.environ["VTA_COSIM_JOBS"]).read())
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    for name in ("s_axil_awvalid", "s_axil_wvalid", "s_axil_arvalid"):
        getattr(dut, name).value = 0
    dut.s_axil_bready.value = 1
    dut.s_axil_rready.value = 1
    dram = DramModel(dut, spec["latency"], spec["bus_bytes"])
    await RisingEdge(dut.clk)
    t0 = get_sim_time("step")
    await RisingEdge(dut.clk)
    dram.period = get_sim_time("step") - t0
    results = []
    if os.environ.get("VTA_COSIM_LOG"):
        dram.log = []
    for job in spec["jobs"]:
        dram.mem = np.load(job["dram"])
        dut.rst.value = 1
        await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
        dut.rst.value = 0
        await axil_write(dut, INSN_ADDR, job["insn_addr"])
        await axil_write(dut, INSN_COUNT, job["n_insns"])
        await axil_write(dut, CTRL, 1)
        ok = await dram.run(dut.clk, limit=job.get("max_cycles", 10_000_000))
        cycles = await axil_read(dut, CYCLES) if ok else -1
        np.save(job["out"], dram.mem)
        results.append({"cycles": cycles, "timeout": not ok, "model_cycles": dram.cycle,
                        "log": dram.log[:2000] if dram.log is not None else None})
        if dram.log is not None:
            dram.log = []
    with open(spec["results"], "w") as fh:
        json.dump(results, fh)
