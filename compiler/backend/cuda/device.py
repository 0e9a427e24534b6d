"""Where the ``cuda`` target's kernels run: an NVIDIA GPU through cuda-python's driver API, or this CPU.

:class:`GpuDevice` is the real thing. :class:`EmulatedDevice` (``VTA_CUDA_DEVICE=emulate``) keeps "device memory" in
host buffers of its own and runs each op's loop IR with every block/thread loop serial, compiled for this CPU: a
shared-memory fill then runs once per thread instead of cooperatively, which gives the same values. It checks what
a GPU run would compute and what crosses the bus (its own copies are counted), anywhere, slowly; it says nothing
about the driver, the PTX or the speed. Both hand out device pointers as plain ints.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading
import time
from collections.abc import Callable

import numpy as np

from compiler.tir.errors import TirError
from compiler.tir.ir import For, IfThen, PrimFunc

DEVICE_ENV = "VTA_CUDA_DEVICE"
DEVICE_KINDS = ("gpu", "emulate")


class NoGpuError(RuntimeError):
    """No CUDA device (or no driver) on this machine: CUDA ops compile here but cannot run."""


def gpu_present() -> bool:
    """Whether an NVIDIA GPU device node exists (the driver is loaded)."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def _driver():
    try:
        from cuda.bindings import driver  # cuda-python >= 12.6
    except ImportError:
        try:
            from cuda import cuda as driver  # older cuda-python
        except ImportError:
            return None
    return driver


_RECORDING = threading.local()  # .device, .ops: the device whose operations this thread records (record_ops)


class record_ops:
    """While open (``with record_ops(dev) as ops:``), every copy, launch and synchronize that ``dev`` makes on this
    thread is appended to ``ops`` as ``(kind, *args)``: ``("upload", dptr, src, nbytes)``, ``("download", dst,
    dptr, nbytes)``, ``("copy", dst, src, nbytes)``, ``("launch", loaded, kernels, dptrs)``, ``("sync",)``.
    :func:`replayable` turns each back into a call (:mod:`compiler.backend.cuda.run_replay`)."""

    def __init__(self, dev) -> None:
        self.dev, self.ops = dev, []

    def start(self) -> list:
        """Begin recording on this thread (one recording per thread at a time); the list the operations go to."""
        if recording():
            raise RuntimeError("record_ops: this thread is already recording device operations")
        _RECORDING.device, _RECORDING.ops = self.dev, self.ops
        return self.ops

    def stop(self) -> None:
        _RECORDING.device = _RECORDING.ops = None

    def __enter__(self) -> list:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def recording() -> bool:
    """Whether this thread is recording device operations (:class:`record_ops`)."""
    return getattr(_RECORDING, "device", None) is not None


def _log(dev, *op) -> None:
    if getattr(_RECORDING, "device", None) is dev:
        _RECORDING.ops.append(op)


def replayable(dev, op: tuple) -> Callable[[], None]:
    """The call that repeats recorded operation ``op`` (see :class:`record_ops`) on ``dev``, not recorded again."""
    kind, *args = op
    if kind == "launch":
        return dev.launcher(*args)
    if kind == "sync":
        return dev.synchronize
    if kind not in ("upload", "download", "copy"):
        raise ValueError(f"replayable: unknown device operation {kind!r}")
    return functools.partial(getattr(dev, kind), *args)


def _check(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver error {err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)


class GpuDevice:
    """The first NVIDIA GPU, its primary context made current on each calling thread."""

    kind = "gpu"

    def __init__(self) -> None:
        if not gpu_present():
            raise NoGpuError(f"no GPU: no /dev/nvidia* device on this machine; the CUDA target compiles PTX here "
                             f"(CudaOp.ptx) but running it needs an NVIDIA GPU ({DEVICE_ENV}=emulate runs the "
                             f"kernels' loop IR on this CPU instead, serially: to check values, not speed)")
        drv = _driver()
        if drv is None:
            raise TirError("a GPU is present but cuda-python is not installed: pip install cuda-python")
        _check(drv.cuInit(0))
        if _check(drv.cuDeviceGetCount()) == 0:
            raise NoGpuError("no GPU: the CUDA driver reports no device")
        dev = _check(drv.cuDeviceGet(0))
        self.drv = drv
        self.ctx = _check(drv.cuDevicePrimaryCtxRetain(dev))
        _check(drv.cuCtxSetCurrent(self.ctx))
        attr = drv.CUdevice_attribute
        major = _check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
        minor = _check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        self.arch = f"sm_{major}{minor}"
        try:  # the product name keys tuning records ("NVIDIA H200"); the architecture alone where unreadable
            self.name = bytes(_check(drv.cuDeviceGetName(256, dev))).split(b"\0")[0].decode().strip() or self.arch
        except Exception:  # noqa: BLE001 - a name is a label, not a requirement
            self.name = self.arch

    def activate(self) -> None:
        _check(self.drv.cuCtxSetCurrent(self.ctx))  # the context is per calling thread

    def alloc(self, nbytes: int) -> int:
        return int(_check(self.drv.cuMemAlloc(max(1, nbytes))))

    def free(self, dptr: int) -> None:
        self.drv.cuMemFree(self.drv.CUdeviceptr(dptr))  # best effort: the context may be gone at interpreter exit

    def upload(self, dptr: int, src: int, nbytes: int) -> None:
        _log(self, "upload", dptr, src, nbytes)
        _check(self.drv.cuMemcpyHtoD(self.drv.CUdeviceptr(dptr), src, nbytes))

    def download(self, dst: int, dptr: int, nbytes: int) -> None:
        _log(self, "download", dst, dptr, nbytes)
        _check(self.drv.cuMemcpyDtoH(dst, self.drv.CUdeviceptr(dptr), nbytes))

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device to device, ordered after the kernels launched before it."""
        _log(self, "copy", dst, src, nbytes)
        _check(self.drv.cuMemcpyDtoD(self.drv.CUdeviceptr(dst), self.drv.CUdeviceptr(src), nbytes))

    def load(self, ptx: str, names: list[str]):
        """The module of ``ptx`` and its kernels ``names``, ready to launch."""
        mod = _check(self.drv.cuModuleLoadData(ptx.encode() + b"\0"))
        return mod, [_check(self.drv.cuModuleGetFunction(mod, n.encode())) for n in names]

    def launcher(self, loaded, kernels: list, dptrs) -> Callable[[], None]:
        """The call that launches every kernel of a loaded op in order on ``dptrs`` (its buffers' device pointers),
        its parameter block built once."""
        vals = np.array(dptrs, dtype=np.uint64)
        params = np.array([vals[i:].ctypes.data for i in range(len(vals))], dtype=np.uint64)
        drv, block = self.drv, params.ctypes.data
        calls = [(fn, *k.grid, *k.block) for k, fn in zip(kernels, loaded[1])]

        def launch(_keep=(vals, params)) -> None:  # the parameter block lives as long as the call
            for fn, gx, gy, gz, bx, by, bz in calls:
                _check(drv.cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, 0, 0, block, 0))
        return launch

    def launch(self, loaded, kernels: list, dptrs: list[int]) -> None:
        """Launch every kernel of a loaded op in order on ``dptrs`` (its buffers' device pointers)."""
        _log(self, "launch", loaded, kernels, tuple(dptrs))
        self.launcher(loaded, kernels, dptrs)()

    def synchronize(self) -> None:
        _log(self, "sync")
        _check(self.drv.cuCtxSynchronize())

    def timer(self, marks: int) -> "GpuTimer":
        """A timer of ``marks`` points in the device's work (CUDA events; see :class:`GpuTimer`)."""
        return GpuTimer(self.drv, marks)


class GpuTimer:
    """``marks`` CUDA events: :meth:`mark` records the next one after the work launched so far, :meth:`seconds`
    waits for the last and returns the device time between consecutive marks."""

    def __init__(self, drv, marks: int) -> None:
        self.drv = drv
        self.events = [_check(drv.cuEventCreate(0)) for _ in range(marks)]
        self._next = 0

    def mark(self) -> None:
        _check(self.drv.cuEventRecord(self.events[self._next], 0))
        self._next += 1

    def seconds(self) -> list[float]:
        done = self.events[:self._next]
        if done:
            _check(self.drv.cuEventSynchronize(done[-1]))
        ms = [_check(self.drv.cuEventElapsedTime(a, b)) for a, b in zip(done, done[1:])]
        for e in self.events:
            self.drv.cuEventDestroy(e)
        self.events, self._next = [], 0
        return [float(x) / 1e3 for x in ms]


def serial_copy(body: list) -> list:
    """``body`` with every loop serial (block/thread bindings, vectorize and unroll dropped); statements other than
    loops and guards are shared, not copied."""
    out = []
    for s in body:
        if isinstance(s, For):
            s = For(s.var, s.extent, serial_copy(s.body), "serial")
        elif isinstance(s, IfThen):
            s = IfThen(s.cond, serial_copy(s.body))
        out.append(s)
    return out


class EmulatedDevice:
    """A GPU played by this CPU: device memory in host buffers (pointers are their addresses), an op's kernels run
    as its loop IR with every loop serial. ``uploads``/``downloads`` count the bytes copied each way."""

    kind = "emulate"
    name = "emulate"
    arch = "sm_80"

    def __init__(self) -> None:
        self._mem: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self.uploads = self.downloads = 0
        self.upload_bytes = self.download_bytes = 0

    def activate(self) -> None:
        pass

    def alloc(self, nbytes: int) -> int:
        a = np.empty(max(1, nbytes) + 64, np.uint8)
        p = a.ctypes.data
        p += -p % 64
        with self._lock:
            self._mem[p] = a
        return p

    def free(self, dptr: int) -> None:
        with self._lock:
            self._mem.pop(dptr, None)

    def upload(self, dptr: int, src: int, nbytes: int) -> None:
        _log(self, "upload", dptr, src, nbytes)
        ctypes.memmove(dptr, src, nbytes)
        self.uploads += 1
        self.upload_bytes += nbytes

    def download(self, dst: int, dptr: int, nbytes: int) -> None:
        _log(self, "download", dst, dptr, nbytes)
        ctypes.memmove(dst, dptr, nbytes)
        self.downloads += 1
        self.download_bytes += nbytes

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        _log(self, "copy", dst, src, nbytes)
        ctypes.memmove(dst, src, nbytes)

    def load_func(self, func: PrimFunc):
        """``func`` (a CUDA op's loop IR) compiled serially for this CPU: a ctypes function of its buffers."""
        from compiler.backend.llvm import parallel
        from compiler.backend.llvm.codegen import generate
        from compiler.backend.llvm.jit import get_host_jit

        serial = PrimFunc(func.name + "_emulated", func.args, func.temps, serial_copy(func.body), func.num_inputs,
                          dict(func.meta))
        module, symbol = generate(serial)
        cfunc = get_host_jit().compile(module, symbol, len(func.args) + len(func.temps) + 1)
        return functools.partial(cfunc, parallel.launch_address())

    def launcher(self, loaded, kernels: list, dptrs) -> Callable[[], None]:
        return functools.partial(loaded, *dptrs)

    def launch(self, loaded, kernels: list, dptrs: list[int]) -> None:
        _log(self, "launch", loaded, kernels, tuple(dptrs))
        self.launcher(loaded, kernels, dptrs)()

    def synchronize(self) -> None:
        _log(self, "sync")

    def timer(self, marks: int) -> "HostTimer":
        """A timer of ``marks`` points in the work (this CPU runs the kernels as they are launched: the host's
        clock times them)."""
        return HostTimer()


class HostTimer:
    """:class:`GpuTimer`'s interface on the host's clock: for a device whose operations finish when called, or the
    host's own time to make them."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def mark(self) -> None:
        self.times.append(time.perf_counter())

    def seconds(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:])]


_DEVICE: dict[str, object] = {}
_DEVICE_LOCK = threading.Lock()


def device_kind() -> str:
    """The device kind ``VTA_CUDA_DEVICE`` asks for (``gpu`` when unset)."""
    kind = os.environ.get(DEVICE_ENV, "").strip().lower() or "gpu"
    if kind not in DEVICE_KINDS:
        raise ValueError(f"{DEVICE_ENV}={os.environ[DEVICE_ENV]!r}: allowed values are {', '.join(DEVICE_KINDS)} "
                         f"(gpu: the first NVIDIA GPU; emulate: this CPU runs the kernels' loop IR serially)")
    return kind


def get_device():
    """The process's device of the kind ``VTA_CUDA_DEVICE`` names, created on first use (:class:`NoGpuError`
    where ``gpu`` is asked for and there is none)."""
    kind = device_kind()
    with _DEVICE_LOCK:
        dev = _DEVICE.get(kind)
        if dev is None:
            dev = _DEVICE[kind] = GpuDevice() if kind == "gpu" else EmulatedDevice()
    dev.activate()
    return dev
