"""The DRAM image shared by the host and a device: a growable uint8 array with a first-fit allocator.

Addresses are byte addresses into :attr:`Dram.image`. Free blocks are kept sorted and
coalesced with their neighbours; the image grows (doubling) when no free block fits.
The image may be re-allocated when it grows, so never keep views of it: keep addresses.
"""
from __future__ import annotations

import bisect

import numpy as np

from jit_runtime.errors import OutOfMemoryError, RuntimeApiError

#: Largest image: DRAM_ADDR_BITS (32) element indices of >= 1 byte reach 4 GiB.
MAX_DRAM_BYTES = 1 << 32


def _align_up(value: int, align: int) -> int:
    return -(-value // align) * align


class Dram:
    """A DRAM image with ``alloc(nbytes, align) -> addr`` and ``free(addr)``."""

    def __init__(self, initial_bytes: int = 1 << 16, max_bytes: int = MAX_DRAM_BYTES):
        if initial_bytes <= 0 or initial_bytes > max_bytes:
            raise RuntimeApiError(f"Dram initial_bytes={initial_bytes} must be in 1..{max_bytes}")
        self.max_bytes = max_bytes
        self._image = np.zeros(initial_bytes, dtype=np.uint8)
        self._free: list[tuple[int, int]] = [(0, initial_bytes)]  # sorted (start, size)
        self._used: dict[int, int] = {}  # start -> size

    # ------------------------------------------------------------------ state
    @property
    def image(self) -> np.ndarray:
        """The whole image (uint8, 1-D). Re-read it after any allocation: growing replaces it."""
        return self._image

    @property
    def size(self) -> int:
        return int(self._image.size)

    @property
    def used_end(self) -> int:
        """One past the highest allocated byte (0 when nothing is allocated)."""
        return max((a + n for a, n in self._used.items()), default=0)

    @property
    def allocated_bytes(self) -> int:
        return sum(self._used.values())

    def is_allocated(self, addr: int) -> bool:
        return addr in self._used

    def block_size(self, addr: int) -> int:
        return self._used[addr]

    # ------------------------------------------------------------- allocation
    def alloc(self, nbytes: int, align: int = 64) -> int:
        """Reserve ``nbytes`` (>= 1) at an address that is a multiple of ``align`` (a power of two)."""
        if nbytes <= 0:
            raise RuntimeApiError(f"cannot allocate {nbytes} bytes: the size must be >= 1")
        if align <= 0 or align & (align - 1):
            raise RuntimeApiError(f"alignment {align} must be a power of two")
        while True:
            addr = self._first_fit(nbytes, align)
            if addr is not None:
                self._take(addr, nbytes)
                return addr
            self._grow(self.size + nbytes + align)

    def free(self, addr: int) -> None:
        """Release the block at ``addr``; its bytes are zeroed (so stale data never leaks into programs)."""
        size = self._used.pop(addr, None)
        if size is None:
            raise RuntimeApiError(f"free of address {addr:#x}, which is not an allocated block")
        self._image[addr:addr + size] = 0
        self._insert_free(addr, size)

    # ---------------------------------------------------------------- helpers
    def _first_fit(self, nbytes: int, align: int) -> int | None:
        for start, size in self._free:
            addr = _align_up(start, align)
            if addr + nbytes <= start + size:
                return addr
        return None

    def _take(self, addr: int, nbytes: int) -> None:
        i = bisect.bisect_right(self._free, (addr, float("inf"))) - 1
        start, size = self._free.pop(i)
        if addr > start:
            self._free.insert(i, (start, addr - start))
            i += 1
        end, block_end = addr + nbytes, start + size
        if block_end > end:
            self._free.insert(i, (end, block_end - end))
        self._used[addr] = nbytes

    def _insert_free(self, addr: int, size: int) -> None:
        i = bisect.bisect_left(self._free, (addr, 0))
        # coalesce with the next block, then with the previous one
        if i < len(self._free) and self._free[i][0] == addr + size:
            size += self._free.pop(i)[1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == addr:
            prev_start, prev_size = self._free.pop(i - 1)
            addr, size, i = prev_start, prev_size + size, i - 1
        self._free.insert(i, (addr, size))

    def _grow(self, at_least: int) -> None:
        new_size = max(2 * self.size, at_least)
        if new_size > self.max_bytes:
            new_size = self.max_bytes
            if new_size < at_least:
                raise OutOfMemoryError(f"DRAM image cannot grow to {at_least} bytes (limit {self.max_bytes})")
        old = self.size
        image = np.zeros(new_size, dtype=np.uint8)
        image[:old] = self._image
        self._image = image
        self._insert_free(old, new_size - old)

    def __repr__(self) -> str:
        return f"Dram(size={self.size}, allocated={self.allocated_bytes} in {len(self._used)} blocks)"
