"""Whether a kernel target can run in this process (cuda needs a GPU and its driver)."""
from __future__ import annotations

from functools import lru_cache


class NoDeviceError(RuntimeError):
    """The model was compiled for a GPU target but this machine has no usable GPU."""


@lru_cache(maxsize=None)
def cuda_device_available() -> bool:
    """True when the CUDA driver loads and reports at least one device."""
    try:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    if lib.cuInit(0) != 0:
        return False
    count = ctypes.c_int(0)
    return lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def check_runnable(target: str) -> None:
    """Raise :class:`NoDeviceError` when ``target`` cannot execute here."""
    if target == "cuda" and not cuda_device_available():
        raise NoDeviceError("target 'cuda': the kernels are compiled but this machine has no CUDA GPU (libcuda.so.1 "
                            "with a device) to run them; use target='llvm' here")
