"""The DRAM behind the AXI4 port, in cocotb: numpy-backed, with the timing contract's latency and bandwidth.

One beat per cycle after a latency of ``L`` cycles: the data of a read burst whose AR
handshake is in cycle ``a`` starts in cycle ``max(a + L, end of the previous burst)``; a
write burst accepted in cycle ``a`` gets its B response in its last beat cycle
``max(a + L, end of the previous burst) + beats - 1`` (never before its last W beat).
Reads and writes share the one port timeline. Idle stretches are skipped with
``ClockCycles``/edge triggers instead of stepping every cycle.
"""
from __future__ import annotations

from collections import deque

import numpy as np
from cocotb.triggers import ClockCycles, First, ReadOnly, RisingEdge


class DramModel:
    """Serves ``dut.m_axi_*`` from ``self.mem`` (a uint8 array) until :meth:`stop`."""

    def __init__(self, dut, latency: int, bus_bytes: int, base: int = 0):
        self.dut, self.L, self.B = dut, latency, bus_bytes
        self.base = base  # bus address of mem[0] (a DDR-like physical address for the pynq shim)
        self.mem = np.zeros(0, np.uint8)
        self.cycle = 0
        self.busy_until = 0  # first cycle the port's data timeline is free
        self.reads: deque = deque()  # (first beat cycle, addr, beats)
        self.writes: deque = deque()  # [addr, beats, beats received, B cycle]
        self.bq: deque = deque()  # pending B cycles
        self.running = False
        self.period = 1
        self.log: list | None = None  # (channel, cycle, addr, beats) when debugging
        self._masks: dict[int, np.ndarray] = {}  # partial write strobe -> byte mask

    # ---------------------------------------------------------------- helpers
    def _read_beat(self, addr: int) -> int:
        addr -= self.base
        return int.from_bytes(self.mem[addr:addr + self.B].tobytes(), "little")

    def _write_beat(self, addr: int, data: int, strb: int) -> None:
        raw = np.frombuffer(data.to_bytes(self.B, "little"), np.uint8)
        addr -= self.base
        if strb == (1 << self.B) - 1:
            self.mem[addr:addr + self.B] = raw
        else:
            mask = self._masks.get(strb)
            if mask is None:
                mask = self._masks[strb] = np.array([(strb >> i) & 1 for i in range(self.B)], bool)
            self.mem[addr:addr + self.B][mask] = raw[mask]

    # ---------------------------------------------------------------- main loop
    async def run(self, clk, limit: int = 10_000_000) -> bool:
        """Serve the port until ``irq`` is seen (True) or ``limit`` cycles pass (False).

        Call right after an ``await RisingEdge(clk)``.

        cocotb reads, just after a rising edge, the values of the cycle that edge ended (the
        *sampled* cycle ``k``); values written then apply to cycle ``k + 1``.
        """
        from cocotb.utils import get_sim_time

        d = self.dut
        for name in ("m_axi_arready", "m_axi_awready", "m_axi_wready"):
            getattr(d, name).value = 1
        for name in ("m_axi_rvalid", "m_axi_bvalid", "m_axi_rresp", "m_axi_bresp", "m_axi_rlast"):
            getattr(d, name).value = 0
        L, B = self.L, self.B
        self.cycle = k = 0
        self.busy_until = 0
        self.reads.clear(), self.writes.clear(), self.bq.clear()
        cur_read = None  # [addr, beats left]
        rvalid = bvalid = False
        t_ref = get_sim_time("step")
        while True:
            # ---- the sampled cycle k: address and write-data channels
            arv, awv, wv = int(d.m_axi_arvalid.value), int(d.m_axi_awvalid.value), int(d.m_axi_wvalid.value)
            if arv:
                beats = int(d.m_axi_arlen.value) + 1
                first = max(k + L, self.busy_until)
                self.busy_until = first + beats
                self.reads.append((first, int(d.m_axi_araddr.value), beats))
                if self.log is not None:
                    self.log.append(("AR", k, int(d.m_axi_araddr.value), beats))
            if awv:
                beats = int(d.m_axi_awlen.value) + 1
                first = max(k + L, self.busy_until)
                self.busy_until = first + beats
                self.writes.append([int(d.m_axi_awaddr.value), beats, 0, first + beats - 1])
                if self.log is not None:
                    self.log.append(("AW", k, int(d.m_axi_awaddr.value), beats))
            if wv:
                w = self.writes[0]  # W beats come in burst order
                self._write_beat(w[0] + w[2] * B, int(d.m_axi_wdata.value), int(d.m_axi_wstrb.value))
                w[2] += 1
                if w[2] == w[1]:
                    self.writes.popleft()
                    self.bq.append(max(w[3], k + 1))
            if int(d.irq.value) and k > 1:  # k <= 1 (up to the start cycle) still shows the previous run's done
                break
            if k >= limit:
                self.cycle = k
                return False
            # ---- drive cycle k + 1
            want_b = bool(self.bq) and self.bq[0] == k + 1
            if want_b:
                self.bq.popleft()
            if want_b != bvalid:
                d.m_axi_bvalid.value = int(want_b)
                bvalid = want_b
            if cur_read is None and self.reads and self.reads[0][0] == k + 1:
                _, addr, beats = self.reads.popleft()
                cur_read = [addr, beats]
            if cur_read is not None:
                d.m_axi_rdata.value = self._read_beat(cur_read[0])
                d.m_axi_rlast.value = int(cur_read[1] == 1)
                if not rvalid:
                    d.m_axi_rvalid.value = 1
                    rvalid = True
                cur_read[0] += B
                cur_read[1] -= 1
                if cur_read[1] == 0:
                    cur_read = None
            elif rvalid:
                d.m_axi_rvalid.value = 0
                rvalid = False
            # ---- advance to the next cycle that matters
            stepping = rvalid or bvalid or cur_read is not None or self.writes or arv or awv or wv
            nxt = [c - 1 for c in ([self.reads[0][0]] if self.reads else []) + ([self.bq[0]] if self.bq else [])]
            n = (min(nxt) - k) if nxt else None
            if stepping or (n is not None and n <= 1):
                await RisingEdge(clk)
                k += 1
                t_ref = get_sim_time("step")
                continue
            await ReadOnly()  # settled values of cycle k + 1: is a transaction starting right now?
            if int(d.m_axi_arvalid.value) or int(d.m_axi_awvalid.value) or int(d.irq.value):
                await RisingEdge(clk)
                k += 1
                t_ref = get_sim_time("step")
                continue
            trig = [RisingEdge(d.m_axi_arvalid), RisingEdge(d.m_axi_awvalid), RisingEdge(d.irq)]
            n = min(n, limit - k) if n is not None else max(1, limit - k)
            trig.append(ClockCycles(clk, n))
            fired = await First(*trig)
            if isinstance(fired, ClockCycles):
                k += n
                t_ref = get_sim_time("step")
                continue
            # a valid rose at the edge that began cycle c; sample that cycle at the next edge
            c = k + 1 + (get_sim_time("step") - t_ref) // self.period
            await RisingEdge(clk)
            k = c
            t_ref = get_sim_time("step")
        self.cycle = k
        return True

    def stop(self) -> None:
        self.running = False
