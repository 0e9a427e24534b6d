"""The CUDA target's runtime side: a built op holds PTX for every kernel and launches them on the device.

Compiling needs nothing but llvmlite; ``assemble()`` runs ``ptxas`` when the CUDA toolkit is installed;
calling the op needs an NVIDIA GPU, its driver and the ``cuda-python`` package (``pip install cuda-python``), or
``VTA_CUDA_DEVICE=emulate`` (:mod:`compiler.backend.cuda.device`: this CPU plays the GPU, to check values).
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from compiler.backend.op_args import NP_DTYPES, check_inputs, check_outputs
from compiler.backend.cuda.codegen import DEFAULT_ARCH, generate_ptx
from compiler.backend.cuda.device import NoGpuError, get_device, gpu_present  # noqa: F401  (re-exported)
from compiler.backend.cuda.mirror import find_mirror
from compiler.tir.ir import PrimFunc, format_func


class CudaOp:
    """A TE schedule compiled for CUDA: ``ptx`` (text), ``kernels`` (names and launch shapes); calling it
    (``op(*inputs, out=None)``) runs the kernels on the device (:func:`~compiler.backend.cuda.device.get_device`).

    An argument inside a mirrored host buffer (the executor's arena: :mod:`compiler.backend.cuda.mirror`) is used
    in place in the buffer's device copy: an input is uploaded only where the host wrote it since, an output stays
    on the device until the host asks for it. Other inputs are copied in on every call (pinned ones once), other
    outputs copied back."""

    target = "cuda"

    def __init__(self, func: PrimFunc, arch: str = DEFAULT_ARCH) -> None:
        self.func = func
        self.arch = arch
        self.ptx, self.kernels, self.llvm_ir = generate_ptx(func, arch)
        self._loaded: dict[int, tuple] = {}  # id(device) -> (device, what its load returned, kernel infos)
        self._pinned: dict[int, tuple[object, int] | None] = {}  # id(host array) -> (device, pointer) once uploaded
        self._scratch: dict[int, tuple[int, int]] = {}  # argument position -> (bytes, device pointer), reused
        self._scratch_device = None
        self._lock = threading.Lock()

    def pin(self, *arrays: np.ndarray) -> None:
        """Declare host arrays constant (packed weights, biases): each is copied to the device at its first use
        and reused by identity afterwards, instead of being copied on every call. The caller must not modify
        a pinned array; its device copy is freed when the host array is garbage-collected."""
        for a in arrays:
            if isinstance(a, np.ndarray) and id(a) not in self._pinned:
                self._pinned[id(a)] = None
                weakref.finalize(a, self._unpin, id(a))

    def is_pinned(self, a: np.ndarray) -> bool:
        """Whether ``a`` was declared constant with :meth:`pin`."""
        return id(a) in self._pinned

    def _unpin(self, key: int) -> None:
        d = self._pinned.pop(key, None)
        if d is not None:
            d[0].free(d[1])

    @property
    def loop_ir(self) -> str:
        return format_func(self.func)

    def assemble(self) -> bytes:
        """A cubin from the PTX (``ptxas``; raises ``CudaToolError`` when the CUDA toolkit is missing)."""
        from compiler.backend.cuda.nvcc import assemble_ptx

        return assemble_ptx(self.ptx, self.arch)

    def _load(self, dev):
        hit = self._loaded.get(id(dev))
        if hit is None:
            if dev.kind == "emulate":
                hit = (dev, dev.load_func(self.func), self.kernels)
            else:
                # a device of another architecture gets PTX of its own; the kernels are looked up by the names
                # that this PTX defines (a fresh code generation names its module afresh)
                ptx, kernels = ((self.ptx, self.kernels) if dev.arch == self.arch
                                else generate_ptx(self.func, dev.arch)[:2])
                hit = (dev, dev.load(ptx, [k.name for k in kernels]), kernels)
            self._loaded[id(dev)] = hit
        return hit

    def _device_ptr(self, dev, pos: int, nbytes: int, src: np.ndarray | None = None, given=None) -> int:
        """The device buffer for argument ``pos``: where ``given`` (the caller's array) is pinned, its resident
        copy (uploaded once); else a buffer kept for this position, reused while its size fits and filled from
        ``src`` when given."""
        if given is not None and id(given) in self._pinned:
            d = self._pinned[id(given)]
            if d is None or d[0] is not dev:
                d = self._pinned[id(given)] = (dev, dev.alloc(nbytes))
                dev.upload(d[1], src.ctypes.data, nbytes)
            return d[1]
        if self._scratch_device is not dev:  # buffers of another device (the device kind changed) are not reused
            self._scratch, self._scratch_device = {}, dev
        size, d = self._scratch.get(pos, (-1, None))
        if size < nbytes:
            if d is not None:
                dev.free(d)
            d = dev.alloc(nbytes)
            self._scratch[pos] = (nbytes, d)
        if src is not None:
            dev.upload(d, src.ctypes.data, nbytes)
        return d

    def __call__(self, *inputs: np.ndarray, out=None):
        ins = check_inputs(self.func, inputs)
        outs = check_outputs(self.func, out)
        dev = get_device()
        _, loaded, kernels = self._load(dev)
        with self._lock:  # the reused device buffers belong to one call at a time
            dptrs, back = [], []
            for i, a in enumerate(ins):
                hit = find_mirror(a)
                dptrs.append(hit[0].for_read(dev, hit[1], hit[2]) if hit is not None
                             else self._device_ptr(dev, i, a.nbytes, a, inputs[i]))
            for i, a in enumerate(outs, len(ins)):
                hit = find_mirror(a)
                if hit is not None:
                    dptrs.append(hit[0].for_write(dev, hit[1], hit[2]))
                else:
                    dptrs.append(self._device_ptr(dev, i, a.nbytes))
                    back.append((a, dptrs[-1]))
            for i, b in enumerate(self.func.temps, len(ins) + len(outs)):
                dptrs.append(self._device_ptr(dev, i, b.size * np.dtype(NP_DTYPES[b.dtype]).itemsize))
            dev.launch(loaded, kernels, dptrs)
            if back:  # results into the mirror stay on the device: the copy that reads them waits for the kernels
                dev.synchronize()
            for a, d in back:
                dev.download(a.ctypes.data, d, a.nbytes)
        return outs[0] if len(outs) == 1 else tuple(outs)

