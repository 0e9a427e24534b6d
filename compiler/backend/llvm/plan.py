"""A kernel plan: the cache key, the IR emitter and the host-side runner of one specialized kernel."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from compiler.backend.llvm.irutil import Kernel


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
