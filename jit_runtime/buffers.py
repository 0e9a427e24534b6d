"""Device buffers: typed, shaped regions of a :class:`~jit_runtime.dram.Dram` image.

A buffer knows its byte address (the "physical address" the device sees), shape and
dtype. ``copy_from``/``copy_to`` move numpy arrays in and out, checking shape and dtype.
After ``free()`` every use raises :class:`UseAfterFreeError`.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from jit_runtime.dram import Dram
from jit_runtime.errors import DeviceBufferError, UseAfterFreeError

if TYPE_CHECKING:
    from isa import HwConfig

MEMORIES = ("uop", "inp", "wgt", "acc", "out")


def buffer_alignment(cfg: "HwConfig") -> int:
    """Alignment that lets a buffer hold elements of any memory type: the largest element or bus beat."""
    return max([cfg.elem_bytes(m) for m in MEMORIES] + [cfg.bus_bytes, 16])


class DeviceBuffer:
    """A shaped, typed array living in DRAM at byte address :attr:`addr`."""

    def __init__(self, dram: Dram, addr: int, shape: tuple[int, ...], dtype: np.dtype, name: str):
        self._dram = dram
        self._addr = addr
        self._shape = tuple(int(s) for s in shape)
        self._dtype = np.dtype(dtype)
        self.name = name
        self._freed = False

    @classmethod
    def allocate(cls, dram: Dram, shape: int | tuple[int, ...], dtype: np.dtype | type | str, *,
                 name: str, align: int = 64) -> "DeviceBuffer":
        """Allocate a zeroed buffer of ``shape`` and ``dtype`` in ``dram``."""
        shape_t = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if any(int(s) < 0 for s in shape_t):
            raise DeviceBufferError(f"buffer {name!r}: negative dimension in shape {shape_t}")
        dt = np.dtype(dtype)
        nbytes = max(1, int(np.prod(shape_t, dtype=np.int64)) * dt.itemsize)
        return cls(dram, dram.alloc(nbytes, align), shape_t, dt, name)

    # ---------------------------------------------------------------- checks
    def _live(self) -> None:
        if self._freed:
            raise UseAfterFreeError(f"buffer {self.name!r} (address {self._addr:#x}) was used after free()")

    # ------------------------------------------------------------ properties
    @property
    def addr(self) -> int:
        """Byte address in DRAM (what the device sees)."""
        self._live()
        return self._addr

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self._shape) * self._dtype.itemsize

    @property
    def freed(self) -> bool:
        return self._freed

    def elem_offset(self, cfg: "HwConfig", mem: str) -> int:
        """The buffer's start as an element index of memory ``mem`` (what LOAD/STORE ``dram_base`` counts)."""
        self._live()
        size = cfg.elem_bytes(mem)
        if self._addr % size:
            raise DeviceBufferError(f"buffer {self.name!r} at {self._addr:#x} is not aligned to {mem} elements "
                                    f"of {size} bytes")
        return self._addr // size

    def n_elems(self, cfg: "HwConfig", mem: str) -> int:
        """How many whole ``mem`` elements the buffer holds."""
        return self.nbytes // cfg.elem_bytes(mem)

    # ----------------------------------------------------------------- data
    def copy_from(self, array: np.ndarray) -> None:
        """Copy ``array`` (same shape and dtype as the buffer) into DRAM."""
        self._live()
        array = np.asarray(array)
        if array.shape != self._shape or array.dtype != self._dtype:
            raise DeviceBufferError(
                f"copy into buffer {self.name!r}: got an array of shape {array.shape} dtype {array.dtype}, "
                f"the buffer is shape {self._shape} dtype {self._dtype}")
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        self._dram.image[self._addr:self._addr + raw.size] = raw

    def copy_to(self, out: np.ndarray | None = None) -> np.ndarray:
        """A copy of the buffer's contents (or fill ``out``, which must match shape and dtype)."""
        self._live()
        raw = self._dram.image[self._addr:self._addr + self.nbytes]
        data = raw.view(self._dtype).reshape(self._shape)
        if out is None:
            return data.copy()
        if out.shape != self._shape or out.dtype != self._dtype:
            raise DeviceBufferError(
                f"copy from buffer {self.name!r}: the destination is shape {out.shape} dtype {out.dtype}, "
                f"the buffer is shape {self._shape} dtype {self._dtype}")
        out[...] = data
        return out

    def numpy(self) -> np.ndarray:
        """Alias of :meth:`copy_to` with no argument."""
        return self.copy_to()

    def free(self) -> None:
        """Release the DRAM block; further use raises :class:`UseAfterFreeError`."""
        self._live()
        self._dram.free(self._addr)
        self._freed = True

    def __repr__(self) -> str:
        state = "freed" if self._freed else f"addr={self._addr:#x}"
        return f"DeviceBuffer({self.name!r}, shape={self._shape}, dtype={self._dtype}, {state})"
