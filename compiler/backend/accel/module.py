"""``build``: a schedule compiled for the accelerator, runnable on a JIT-runtime device."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from compiler.backend.accel.emit import emit
from compiler.backend.accel.ops import OpBuilder
from compiler.tir.accel import lower

if TYPE_CHECKING:
    from compiler.tir.accel.ir import LoweredFunc
    from compiler.schedule import Schedule
    from isa import HwConfig

_NP = {"int8": np.int8, "int16": np.int16, "int32": np.int32}


@dataclass
class AccelModule:
    """Lowered function + operations; ``run`` fills DRAM buffers, issues the calls and returns the output."""

    cfg: "HwConfig"
    func: "LoweredFunc"
    ops: list

    def run(self, inputs: dict, device: str = "sim") -> tuple[np.ndarray, dict]:
        """Run with ``inputs`` (placeholder -> array); returns ``(output, profile)``."""
        from jit_runtime.command_queue import CommandQueue

        q = CommandQueue(self.cfg, device)
        dram = {}
        missing = [t.name for t in self.func.inputs if t not in inputs]
        if missing:
            raise ValueError(f"AccelModule.run: no value for inputs {missing}")
        for t, arr in inputs.items():
            arr = np.asarray(arr)
            if arr.shape != t.shape:
                raise ValueError(f"input {t.name}: expected shape {t.shape}, got {arr.shape}")
            buf = q.alloc(t.shape, _NP[t.dtype], name=t.name)
            buf.copy_from(np.ascontiguousarray(arr, dtype=_NP[t.dtype]))
            dram[t] = buf
        out_t = self.func.output
        out = q.alloc(out_t.shape, _NP[out_t.dtype], name=out_t.name)
        dram[out_t] = out
        emit(self.ops, q, dram)
        res = q.synchronize()
        return out.copy_to(), {"cycles": int(res.cycles), "device": res.profile}


def build(sched: "Schedule", cfg: "HwConfig", name: str = "kernel") -> AccelModule:
    """Lower ``sched`` and generate its operations (see :mod:`compiler.tir.accel`, :mod:`compiler.backend.accel`)."""
    func = lower(sched, cfg, name)
    return AccelModule(cfg, func, OpBuilder(func, cfg).build())
