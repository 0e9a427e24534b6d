"""A finished program: instruction stream + DRAM image + named buffers, runnable on any device.

``CommandQueue.finalize()`` makes one; ``Program.run(device)`` replays it on a fresh copy of
its DRAM image and returns the cycles, the profile and every named buffer's contents.
``Program.save``/``Program.load`` use the file format of :mod:`jit_runtime.program_file`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from isa import Instruction, decode_stream, unit_of
from isa.asm import mnemonic
from jit_runtime.device import Device, make_device

if TYPE_CHECKING:
    from isa import HwConfig


@dataclass(frozen=True)
class BufferInfo:
    """Where a named buffer lives in the program's DRAM image."""

    addr: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def read(self, image: np.ndarray) -> np.ndarray:
        return image[self.addr:self.addr + self.nbytes].view(np.dtype(self.dtype)).reshape(self.shape).copy()


@dataclass
class RunResult:
    """Cycles and profile of one run; ``outputs`` holds the named buffers after a ``Program.run``."""

    cycles: int
    profile: dict[str, Any]
    device_result: Any = field(repr=False, default=None)
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def write_trace(self, path: str | Path) -> None:
        """Chrome/Perfetto trace JSON (only devices that record traces, e.g. ``sim`` with ``trace=True``)."""
        self._device_method("write_trace")(path)

    def plot_timeline(self, path: str | Path) -> None:
        self._device_method("plot_timeline")(path)

    def _device_method(self, name: str) -> Any:
        fn = getattr(self.device_result, name, None)
        if fn is None:
            raise ValueError(f"the device result {type(self.device_result).__name__} has no {name}()")
        return fn


def stream_summary(insns: list[Instruction]) -> dict[str, Any]:
    """Counts by mnemonic and by unit, and dependency flag totals (for profiles and ``vta disasm``)."""
    kinds: Counter[str] = Counter()
    units: Counter[str] = Counter()
    flags: Counter[str] = Counter()
    # one representative per (class, memory, op, flags): a stream has a handful of distinct ones
    groups: dict[tuple, list] = {}
    for insn in insns:
        key = (type(insn), getattr(insn, "mem", None), getattr(insn, "op", None), insn.deps)
        g = groups.get(key)
        if g is None:
            groups[key] = [insn, 1]
        else:
            g[1] += 1
    for insn, n in groups.values():
        kinds[mnemonic(insn)] += n
        units[unit_of(insn).name.lower()] += n
        for f in insn.deps.names():
            flags[f] += n
    return {"n_insns": len(insns), "by_kind": dict(sorted(kinds.items())), "by_unit": dict(sorted(units.items())),
            "dep_flags": dict(sorted(flags.items()))}


@dataclass
class Program:
    """Everything a device needs to run a program, plus where its named buffers are."""

    cfg: "HwConfig"
    insn_bytes: np.ndarray
    dram: np.ndarray
    insn_addr: int
    n_insns: int
    buffers: dict[str, BufferInfo] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    runtime: dict[str, Any] = field(default_factory=dict)
    name: str = "program"

    def instructions(self) -> list[Instruction]:
        return decode_stream(self.insn_bytes, self.cfg)

    def input(self, name: str) -> np.ndarray:
        """The contents of buffer ``name`` before the run."""
        return self.buffers[name].read(self.dram)

    def run(self, device: "str | Device" = "sim", *, trace: bool = False) -> RunResult:
        """Run on a fresh copy of the DRAM image; ``outputs`` has every named buffer afterwards."""
        dev = make_device(device, self.cfg, trace=trace)
        image = self.dram.copy()
        res = dev.run(image, self.insn_addr, self.n_insns)
        profile = dict(res.profile)
        profile["runtime"] = self.runtime
        outputs = {name: info.read(image) for name, info in self.buffers.items()}
        return RunResult(int(res.cycles), profile, res, outputs)

    def mismatches(self, outputs: dict[str, np.ndarray]) -> list[str]:
        """Names of expected buffers whose ``outputs`` differ (bit-exact comparison)."""
        return [n for n, want in self.expected.items()
                if n not in outputs or outputs[n].shape != want.shape or not np.array_equal(outputs[n], want)]

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "config": self.cfg.name, "insn_addr": self.insn_addr,
                "dram_bytes": int(self.dram.size), **stream_summary(self.instructions()),
                "buffers": {n: {"addr": b.addr, "shape": list(b.shape), "dtype": np.dtype(b.dtype).name}
                            for n, b in self.buffers.items()},
                "uop_cache": self.runtime.get("uop_cache", {})}

    def save(self, path: str | Path) -> Path:
        from jit_runtime.program_file import save_program

        return save_program(self, path)

    @classmethod
    def load(cls, path: str | Path) -> "Program":
        from jit_runtime.program_file import load_program

        return load_program(path)
