"""The CUDA target's runtime side: a built op holds PTX for every kernel and launches them through cuda-python.

Compiling needs nothing but llvmlite; ``assemble()`` runs ``ptxas`` when the CUDA toolkit is installed;
calling the op needs an NVIDIA GPU, its driver and the ``cuda-python`` package (``pip install cuda-python``).
"""
from __future__ import annotations

import functools
import glob
import threading
import weakref

import numpy as np

from compiler.backend.op_args import NP_DTYPES, check_inputs, check_outputs
from compiler.backend.cuda.codegen import DEFAULT_ARCH, generate_ptx
from compiler.tir.errors import TirError
from compiler.tir.ir import PrimFunc, format_func


class NoGpuError(RuntimeError):
    """No CUDA device (or no driver) on this machine: CUDA ops compile here but cannot run."""


def _driver():
    try:
        from cuda.bindings import driver  # cuda-python >= 12.6
    except ImportError:
        try:
            from cuda import cuda as driver  # older cuda-python
        except ImportError:
            return None
    return driver


def _check(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver error {err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def gpu_present() -> bool:
    """Whether an NVIDIA GPU device node exists (the driver is loaded)."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


@functools.lru_cache(maxsize=1)
def _context():
    if not gpu_present():
        raise NoGpuError("no GPU: no /dev/nvidia* device on this machine; the CUDA target compiles PTX here "
                         "(CudaOp.ptx) but running it needs an NVIDIA GPU")
    drv = _driver()
    if drv is None:
        raise TirError("a GPU is present but cuda-python is not installed: pip install cuda-python")
    _check(drv.cuInit(0))
    if _check(drv.cuDeviceGetCount()) == 0:
        raise NoGpuError("no GPU: the CUDA driver reports no device")
    dev = _check(drv.cuDeviceGet(0))
    ctx = _check(drv.cuDevicePrimaryCtxRetain(dev))
    _check(drv.cuCtxSetCurrent(ctx))
    major = _check(drv.cuDeviceGetAttribute(drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = _check(drv.cuDeviceGetAttribute(drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    return drv, ctx, f"sm_{major}{minor}"


class CudaOp:
    """A TE schedule compiled for CUDA: ``ptx`` (text), ``kernels`` (names and launch shapes); calling it
    (``op(*inputs, out=None)``) copies the inputs to the GPU, launches the kernels in order and copies back."""

    target = "cuda"

    def __init__(self, func: PrimFunc, arch: str = DEFAULT_ARCH) -> None:
        self.func = func
        self.arch = arch
        self.ptx, self.kernels, self.llvm_ir = generate_ptx(func, arch)
        self._loaded = None
        self._pinned: dict[int, int | None] = {}  # id(host array) -> device pointer (None: not uploaded yet)
        self._scratch: dict[int, tuple[int, int]] = {}  # argument position -> (bytes, device pointer), reused
        self._lock = threading.Lock()

    def pin(self, *arrays: np.ndarray) -> None:
        """Declare host arrays constant (packed weights, biases): each is copied to the GPU at its first use
        and reused by identity afterwards, instead of being copied on every call. The caller must not modify
        a pinned array; its device copy is freed when the host array is garbage-collected."""
        for a in arrays:
            if isinstance(a, np.ndarray) and id(a) not in self._pinned:
                self._pinned[id(a)] = None
                weakref.finalize(a, self._unpin, id(a))

    def _unpin(self, key: int) -> None:
        d = self._pinned.pop(key, None)
        if d is not None:
            drv = _driver()
            if drv is not None:
                drv.cuMemFree(d)  # best effort: the context may already be gone at interpreter exit

    @property
    def loop_ir(self) -> str:
        return format_func(self.func)

    def assemble(self) -> bytes:
        """A cubin from the PTX (``ptxas``; raises ``CudaToolError`` when the CUDA toolkit is missing)."""
        from compiler.backend.cuda.nvcc import assemble_ptx

        return assemble_ptx(self.ptx, self.arch)

    def _load(self):
        drv, ctx, arch = _context()
        _check(drv.cuCtxSetCurrent(ctx))  # the context is per calling thread
        if self._loaded is None:
            # a device of another architecture gets PTX of its own; the kernels are looked up by the names
            # that this PTX defines (a fresh code generation names its module afresh)
            ptx, kernels = (self.ptx, self.kernels) if arch == self.arch else generate_ptx(self.func, arch)[:2]
            mod = _check(drv.cuModuleLoadData(ptx.encode() + b"\0"))
            fns = [_check(drv.cuModuleGetFunction(mod, k.name.encode())) for k in kernels]
            self._loaded = (mod, fns)
        return drv, self._loaded[1]

    def _device(self, drv, pos: int, host: np.ndarray, given) -> int:
        """The device buffer for argument ``pos``: a pinned constant's resident copy (uploaded once), else a
        buffer kept for this position and reused while its size fits."""
        key = id(given) if given is not None else None
        if key is not None and key in self._pinned:
            d = self._pinned[key]
            if d is None:
                d = _check(drv.cuMemAlloc(max(1, host.nbytes)))
                _check(drv.cuMemcpyHtoD(d, host.ctypes.data, host.nbytes))
                self._pinned[key] = d
            return d
        size, d = self._scratch.get(pos, (-1, None))
        if size < host.nbytes:
            if d is not None:
                _check(drv.cuMemFree(d))
            d = _check(drv.cuMemAlloc(max(1, host.nbytes)))
            self._scratch[pos] = (host.nbytes, d)
        if given is not None:
            _check(drv.cuMemcpyHtoD(d, host.ctypes.data, host.nbytes))
        return d

    def __call__(self, *inputs: np.ndarray, out=None):
        ins = check_inputs(self.func, inputs)
        outs = check_outputs(self.func, out)
        drv, fns = self._load()
        hosts = ins + outs + [np.empty(b.shape, NP_DTYPES[b.dtype]) for b in self.func.temps]
        given = list(inputs) + [None] * (len(hosts) - len(ins))
        with self._lock:  # the reused device buffers belong to one call at a time
            dptrs = [self._device(drv, i, h, g) for i, (h, g) in enumerate(zip(hosts, given))]
            vals = np.array([int(d) for d in dptrs], dtype=np.uint64)
            params = np.array([vals[i:].ctypes.data for i in range(len(vals))], dtype=np.uint64)
            for k, fn in zip(self.kernels, fns):
                _check(drv.cuLaunchKernel(fn, *k.grid, *k.block, 0, 0, params.ctypes.data, 0))
            _check(drv.cuCtxSynchronize())
            for h, d in zip(outs, dptrs[len(ins):]):
                _check(drv.cuMemcpyDtoH(h.ctypes.data, d, h.nbytes))
        return outs[0] if len(outs) == 1 else tuple(outs)
