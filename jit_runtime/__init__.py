"""The JIT runtime: DRAM buffers, a VTA-like command queue with a uop kernel cache and
dependency tokens, programs that save/replay on any registered device.

See ``docs/runtime.md``. The main entry points::

    from jit_runtime import CommandQueue
    q = CommandQueue(cfg, device="sim")
    buf = q.alloc(shape, dtype, name="x")
    q.load_2d(...); q.push_gemm(finit, signature=...); q.push_alu(...); q.store_2d(...)
    q.dep_push("load", "compute"); q.dep_pop("load", "compute")
    result = q.synchronize()          # or: program = q.finalize(); program.save(path)
"""
from jit_runtime.buffers import DeviceBuffer
from jit_runtime.command_queue import CommandQueue
from jit_runtime.deps import TOKEN_QUEUES
from jit_runtime.device import Device, DeviceResult, device_names, make_device, register_device
from jit_runtime.dram import Dram
from jit_runtime.exported import RuntimeModule, load_module
from jit_runtime.errors import (BitstreamError, ModuleFileError, ConfigMismatchError, ContiguousMemoryError, DependencyError, DeviceBufferError, KernelError, OutOfMemoryError,
                                ProgramFileError, RuntimeApiError, UnknownDeviceError, UopLoopError,
                                UseAfterFreeError)
from jit_runtime.program import BufferInfo, Program, RunResult
from jit_runtime.program import load_program, save_program
from jit_runtime.uop_kernel import KernelBuilder, UopKernel

__all__ = [
    "CommandQueue", "DeviceBuffer", "Dram", "Device", "DeviceResult", "device_names", "make_device",
    "register_device", "Program", "RunResult", "BufferInfo", "load_program", "save_program", "KernelBuilder",
    "UopKernel", "TOKEN_QUEUES", "RuntimeApiError", "DeviceBufferError", "UseAfterFreeError", "OutOfMemoryError",
    "UopLoopError", "KernelError", "DependencyError", "UnknownDeviceError", "ProgramFileError", "BitstreamError",
    "ConfigMismatchError", "ContiguousMemoryError", "ModuleFileError", "RuntimeModule", "load_module",
]
