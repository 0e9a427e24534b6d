"""Emit operations as JIT-runtime calls (``CommandQueue``): DMA, micro-kernels and dependency tokens."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.schedule.errors import LowerError
from compiler.tir.accel.tokens import Op

if TYPE_CHECKING:
    from jit_runtime.buffers import DeviceBuffer
    from jit_runtime.command_queue import CommandQueue


def _finit(loops, uops: np.ndarray):
    def finit(k) -> None:
        for ext, (fd, fs, fw) in loops:
            k.loop_begin(ext, fd, fs, fw)
        for d, s, w in uops.tolist():
            k.push(d, s, w)
        for _ in loops:
            k.loop_end()
    return finit


def _signature(op: Op) -> tuple:
    a = op.args
    return (op.kind, a.get("reset", False), a.get("op"), a.get("intrinsic", "gemm"), tuple(a["loops"]),
            a["uops"].shape[0], a["uops"].tobytes())


def emit(ops: list[Op], q: "CommandQueue", dram: dict) -> None:
    """Issue ``ops`` in order on ``q``; ``dram`` maps each input/output tensor to its DeviceBuffer. The micro-kernels
    of all GEMM/ALU operations are recorded first and preloaded in one LOAD.UOP (``CommandQueue.preload_kernels``)."""
    kernels = []
    for op in ops:
        a = op.args
        if op.kind == "gemm":
            kernels.append(q.kernel("gemm", _finit(a["loops"], a["uops"]), _signature(op)))
        elif op.kind == "alu":
            kernels.append(q.kernel("alu", _finit(a["loops"], a["uops"]), _signature(op) + (a["use_imm"], a["imm"])))
    q.preload_kernels(kernels)
    for op in ops:
        for src in op.pops:
            q.dep_pop(src, op.unit)
        a = op.args
        if op.kind == "load":
            d = a["desc"]
            buf = _buf(dram, d.tensor)
            q.load_2d(a["mem"], a["sram"], buf, d.dram, x_size=d.x, y_size=d.y, x_stride=d.stride,
                      x_pad0=d.x_pad0, x_pad1=d.x_pad1, y_pad0=d.y_pad0, y_pad1=d.y_pad1, pad_value=d.pad_value)
        elif op.kind == "store":
            d = a["desc"]
            q.store_2d(a["sram"], _buf(dram, d.tensor), d.dram, x_size=d.x, y_size=d.y, x_stride=d.stride)
        elif op.kind == "gemm":
            q.push_gemm(_finit(a["loops"], a["uops"]), signature=_signature(op), reset=a["reset"],
                        overwrite=a.get("overwrite", False), intrinsic=a.get("intrinsic", "gemm"))
        elif op.kind == "alu":
            q.push_alu(_finit(a["loops"], a["uops"]), op=a["op"], use_imm=a["use_imm"], imm=a["imm"],
                       signature=_signature(op) + (a["use_imm"], a["imm"]))
        else:
            raise LowerError(f"unknown operation kind {op.kind!r}")
        for dst in op.pushes:
            q.dep_push(op.unit, dst)


def _buf(dram: dict, t) -> "DeviceBuffer":
    try:
        return dram[t]
    except KeyError:
        raise LowerError(f"no DRAM buffer was given for tensor {t.name}") from None
