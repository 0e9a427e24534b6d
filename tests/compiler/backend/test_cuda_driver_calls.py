"""``GpuDevice``'s driver calls against the real cuda-python bindings (``cuda.bindings.driver``), on a machine without
an NVIDIA driver: the bindings convert every argument before they load the driver, so a call whose arguments they
accept fails only for want of the driver, while a wrong argument (type, count) is a ``TypeError`` here as it would
be on a GPU machine. (On a GPU machine the calls run for real: ``benchmarks/gpu_check.sh``.)"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend.cuda import device as cuda_device
from compiler.backend.cuda.codegen import KernelInfo

drv = pytest.importorskip("cuda.bindings.driver", reason="needs cuda-python's bindings (the test extra has them)")
pytestmark = pytest.mark.skipif(cuda_device.gpu_present(), reason="a GPU machine runs these calls for real")


def _driver_missing(exc: BaseException) -> bool:
    """Whether ``exc`` is the bindings' report that the NVIDIA driver library is not installed."""
    return not isinstance(exc, TypeError) and "driver" in str(exc).lower()


def _device() -> cuda_device.GpuDevice:
    """A GpuDevice on the real bindings with a null context (its constructor needs a GPU to get one)."""
    dev = object.__new__(cuda_device.GpuDevice)
    dev.drv, dev.ctx = drv, drv.CUcontext(0)
    return dev


class _Synchronized:
    """The real bindings, with the wait for an event answered "done" (so the calls after it are reached)."""

    def __getattr__(self, name):
        return getattr(drv, name)

    @staticmethod
    def cuEventSynchronize(event):
        assert isinstance(event, drv.CUevent)
        return (drv.CUresult.CUDA_SUCCESS,)


def _timer(recorded: int, bindings=drv) -> cuda_device.GpuTimer:
    """A GpuTimer on the real bindings with null events, ``recorded`` of them marked."""
    t = object.__new__(cuda_device.GpuTimer)
    t.drv, t.events, t._next = bindings, [drv.CUevent(0), drv.CUevent(0)], recorded
    return t


HOST = np.zeros(16, np.float32)
KERNELS = [KernelInfo("k0", (4, 2, 1), (16, 8, 1)), KernelInfo("k1", (7, 1, 1), (256, 1, 1))]
CALLS = {
    "activate": lambda d: d.activate(),
    "alloc": lambda d: d.alloc(64),
    "free": lambda d: d.free(4096),
    "upload": lambda d: d.upload(4096, HOST.ctypes.data, HOST.nbytes),
    "download": lambda d: d.download(HOST.ctypes.data, 4096, HOST.nbytes),
    "copy": lambda d: d.copy(8192, 4096, HOST.nbytes),
    "load": lambda d: d.load(".version 8.0\n.target sm_80\n.address_size 64\n", ["k0", "k1"]),
    "launch": lambda d: d.launch((drv.CUmodule(0), [drv.CUfunction(0), drv.CUfunction(0)]), KERNELS, [4096, 8192]),
    "launcher": lambda d: d.launcher((drv.CUmodule(0), [drv.CUfunction(0), drv.CUfunction(0)]), KERNELS, (4096, 8192))(),
    "synchronize": lambda d: d.synchronize(),
    "timer": lambda d: d.timer(2),
    "timer.mark": lambda d: _timer(0).mark(),
    "timer.seconds": lambda d: _timer(2).seconds(),
    "timer.seconds.elapsed": lambda d: _timer(2, _Synchronized()).seconds(),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_driver_call_passes_arguments_the_bindings_accept(name):
    with pytest.raises(Exception) as caught:
        CALLS[name](_device())
    assert _driver_missing(caught.value), f"{name}: {type(caught.value).__name__}: {caught.value}"


def test_the_constructor_reaches_the_driver(monkeypatch):
    monkeypatch.setattr(cuda_device, "gpu_present", lambda: True)
    with pytest.raises(Exception) as caught:
        cuda_device.GpuDevice()
    assert _driver_missing(caught.value), f"{type(caught.value).__name__}: {caught.value}"


def test_a_wrong_argument_is_told_apart():
    """The check itself: arguments the bindings refuse raise TypeError before any driver is looked for."""
    params = np.zeros(2, np.uint64)
    with pytest.raises(TypeError):
        drv.cuLaunchKernel(drv.CUfunction(0), 1, 1, 1, 32, 1, 1, 0, 0, params.ctypes.data)  # no `extra`
    with pytest.raises(TypeError):
        drv.cuMemcpyHtoD(drv.CUdeviceptr(4096), HOST.ctypes.data, "64")
