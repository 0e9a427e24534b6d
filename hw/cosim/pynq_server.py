"""The simulator side of the pynq shim (:mod:`hw.cosim.pynq_shim`): a cocotb test that serves register
accesses and interrupt waits from the host over a Unix socket.

Simulated time advances only while a request is served (the host is frozen in between, and so is the
design). Requests are JSON lines: ``{"op": "write", "off", "val"}`` (an AXI4-Lite write; a write of
CTRL bit 0 also starts serving the DRAM port in the background until ``irq``), ``{"op": "read", "off"}``
(an AXI4-Lite read, while the DRAM port keeps being served if a run is in progress),
``{"op": "wait_irq"}`` (runs until the accelerator's interrupt or the cycle limit), ``{"op": "close"}``.
The DRAM behind the AXI4 master is the shared memory file of the shim at its physical base address.
The design is reset once, when the overlay is loaded, like a board after a bitstream download.
"""
from __future__ import annotations

import json
import os
import socket

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from hw.cosim.bench import PERIOD_NS, axil_read, axil_write
from hw.cosim.dram_model import DramModel
from isa.registers import CTRL


@cocotb.test()
async def serve(dut):
    spec = json.loads(os.environ["VTA_PYNQ_SHIM"])
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    for name in ("s_axil_awvalid", "s_axil_wvalid", "s_axil_arvalid"):
        getattr(dut, name).value = 0
    dut.s_axil_bready.value = 1
    dut.s_axil_rready.value = 1
    dram = DramModel(dut, spec["latency"], spec["bus_bytes"], base=spec["phys_base"])
    dram.mem = np.memmap(spec["mem"], dtype=np.uint8, mode="r+", shape=(spec["mem_bytes"],))
    for name in ("m_axi_arready", "m_axi_awready", "m_axi_wready"):
        getattr(dut, name).value = 1
    for name in ("m_axi_rvalid", "m_axi_bvalid", "m_axi_rresp", "m_axi_bresp", "m_axi_rlast"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    t0 = get_sim_time("step")
    await RisingEdge(dut.clk)
    dram.period = get_sim_time("step") - t0
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(spec["socket"])
    rfile, wfile = sock.makefile("r"), sock.makefile("w")
    run = None  # the DRAM-serving task of the run in progress
    limit = int(spec["max_cycles"])

    def reply(**kw) -> None:
        wfile.write(json.dumps(kw) + "\n")
        wfile.flush()

    while True:
        line = rfile.readline()  # blocks the simulator: no simulated time passes between requests
        if not line:
            break
        req = json.loads(line)
        op = req["op"]
        if op == "write":
            await axil_write(dut, req["off"], req["val"])
            if req["off"] == CTRL and req["val"] & 1:
                if run is not None and not run.done():  # a start while running: the new run's port timeline
                    run.cancel()
                run = cocotb.start_soon(dram.run(dut.clk, limit=limit))
            reply(ok=True)
        elif op == "read":
            reply(ok=True, val=await axil_read(dut, req["off"]))
        elif op == "wait_irq":
            if run is None:
                reply(ok=False, error="no run was started (CTRL bit 0 never written)")
                continue
            finished = await run
            reply(ok=bool(finished), cycles_served=dram.cycle,
                  error=None if finished else f"no interrupt within {limit} cycles (deadlock or too long)")
        elif op == "close":
            reply(ok=True)
            break
        else:
            reply(ok=False, error=f"unknown request {op!r}")
    dram.mem.flush()
    sock.close()
