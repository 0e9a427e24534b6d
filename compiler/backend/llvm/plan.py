"""A hand-written kernel plan: the cache key, the IR emitter and the host-side runner of one specialized kernel,
compiled once per key (:func:`compile_plan`)."""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from compiler.backend.llvm.irutil import Kernel
from compiler.backend.llvm.jit import get_jit


@dataclass
class Plan:
    """``key`` identifies the compiled code; ``emit()`` builds it; ``run(fn, inputs)`` calls it on buffers."""

    key: tuple
    emit: Callable[[], Kernel]
    run: Callable[[Callable, Sequence[np.ndarray | None]], list[np.ndarray]]


_FROM_BUFFER = ctypes.c_char.from_buffer
_ADDRESSOF = ctypes.addressof


def ptr(a: np.ndarray) -> int:
    """Address of an array's first element (the array must stay alive during the call).

    ``from_buffer`` is ~4x cheaper than ``a.ctypes.data`` but needs a writable, non-empty buffer.
    """
    try:
        return _ADDRESSOF(_FROM_BUFFER(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def sig(a: np.ndarray | None) -> tuple | None:
    return None if a is None else (a.shape, a.dtype.str)


def contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


_KERNELS: dict[tuple, Callable] = {}  # process-wide: (target CPU, plan key) -> compiled function
_LOCK = threading.Lock()


def compiled_count() -> int:
    """How many distinct hand-written kernels this process has compiled."""
    return len(_KERNELS)


def compile_plan(plan: Plan) -> Callable:
    """The compiled function of ``plan`` (compiled once per key and target CPU, -O3 MCJIT)."""
    jit = get_jit()
    key = (jit.key, plan.key)
    fn = _KERNELS.get(key)
    if fn is None:
        with _LOCK:
            fn = _KERNELS.get(key)
            if fn is None:
                k = plan.emit()
                fn = jit.compile(k.finish(), k.name, len(k.args))
                _KERNELS[key] = fn
    return fn
