"""Build DRAM images and instruction streams by hand for the simulator tests."""
from __future__ import annotations

import numpy as np

import isa
from isa.instructions import Deps
from simulator import Simulator
from simulator.dram import elem_layout


def deps(*names: str) -> Deps:
    return Deps(**{n: True for n in names})


class Prog:
    """A DRAM image with data regions plus an instruction list; ``run`` places the stream and simulates it."""

    def __init__(self, cfg: isa.HwConfig, dram_bytes: int = 1 << 16):
        self.cfg = cfg
        self.dram = np.zeros(dram_bytes, np.uint8)
        self.top = 64  # bytes; keep address 0 unused
        self.insns: list = []

    def alloc(self, mem: str, n: int) -> int:
        """Element index of a fresh region of ``n`` elements of ``mem`` (beat aligned)."""
        eb = self.cfg.elem_bytes(mem)
        align = max(eb, self.cfg.bus_bytes, 16)
        self.top = -(-self.top // align) * align
        base = self.top // eb
        self.top += n * eb
        assert self.top <= self.dram.size, "test DRAM too small"
        return base

    def put(self, mem: str, base: int, values: np.ndarray) -> None:
        dtype, _ = elem_layout(self.cfg, mem)
        raw = np.ascontiguousarray(values, dtype=dtype).view(np.uint8).reshape(-1)
        start = base * self.cfg.elem_bytes(mem)
        self.dram[start:start + raw.size] = raw

    def place(self, mem: str, values: np.ndarray) -> int:
        """Allocate and write ``values`` (shape (n, *elem_shape)); returns the element index."""
        base = self.alloc(mem, len(values))
        self.put(mem, base, values)
        return base

    def get(self, mem: str, base: int, n: int) -> np.ndarray:
        dtype, shape = elem_layout(self.cfg, mem)
        eb = self.cfg.elem_bytes(mem)
        raw = self.dram[base * eb:(base + n) * eb].copy()
        return raw.view(dtype).reshape((n,) + shape).astype(np.int64)

    def place_uops(self, uops: list[isa.Uop]) -> int:
        return self.place("uop", isa.encode_uops(uops, self.cfg))

    def add(self, *insns) -> "Prog":
        self.insns.extend(insns)
        return self

    def stream(self) -> tuple[int, int]:
        """Write the instructions after the data; returns (insn_addr, n)."""
        words = isa.encode_stream(self.insns, self.cfg).reshape(-1)
        self.top = -(-self.top // 64) * 64
        addr = self.top
        self.dram[addr:addr + words.size] = words
        self.top += words.size
        return addr, len(self.insns)

    def run(self, timing: bool = True, sim: Simulator | None = None):
        addr, n = self.stream()
        sim = sim or Simulator(self.cfg, timing=timing)
        return sim.run(self.dram, addr, n)
