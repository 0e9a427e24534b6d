"""A device copy of a host buffer kept in step lazily: the executor's arena stays on the GPU between kernels.

A :class:`DeviceMirror` shadows one host buffer (the memory plan's arena) with one device allocation of its size,
at the same offsets. Each byte range is ``host`` (the host copy is newer: upload before a kernel reads it), ``device``
(a kernel wrote it: download before the host reads it) or ``same``. Kernels read and write the device copy
(:meth:`for_read`, :meth:`for_write`); whoever touches the host copy says so first (:meth:`to_host`) or after
(:meth:`host_wrote`). So a chain of kernels moves nothing between host and device except what a host-side node
needs, the graph's inputs (uploaded where a kernel reads them) and its outputs (downloaded once, at the end).

Mirrors are found by address (:func:`find_mirror`): a kernel's argument that lies inside a mirrored buffer is used
in place on the device.
"""
from __future__ import annotations

import bisect
import threading
import weakref

import numpy as np

HOST, DEVICE, SAME = "host", "device", "same"

_MIRRORS: dict[int, "DeviceMirror"] = {}  # id(mirror) -> mirror, while its host buffer lives
_LOCK = threading.Lock()


def _span(a: np.ndarray) -> tuple[int, int]:
    lo = a.__array_interface__["data"][0]
    return lo, lo + a.nbytes


class DeviceMirror:
    """The device copy of host buffer ``host`` (C-contiguous), allocated on ``device`` at first use."""

    def __init__(self, host: np.ndarray) -> None:
        if not host.flags.c_contiguous:
            raise ValueError("DeviceMirror: the host buffer must be C-contiguous")
        self.lo, self.hi = _span(host)
        self._device = None  # the device of the copy, from the first kernel that uses it
        self._dbase: int | None = None
        # state boundaries: _starts[i] begins a run of _states[i] that lasts to _starts[i + 1] (or hi)
        self._starts: list[int] = [self.lo]
        self._states: list[str] = [HOST]

    # -- the device copy ----------------------------------------------------------------
    def _base(self, dev) -> int:
        if self._device is not dev:  # first use, or the process switched devices: the host copy becomes the truth
            if self._dbase is not None:
                self.to_host(self.lo, self.hi)
                self.release()
            self._starts, self._states = [self.lo], [HOST]
            self._device = dev
        if self._dbase is None:
            self._dbase = dev.alloc(self.hi - self.lo)
        return self._dbase

    def release(self) -> None:
        """Free the device copy (its host buffer is gone)."""
        if self._dbase is not None:
            self._device.free(self._dbase)
            self._dbase = None

    def snapshot(self) -> tuple:
        """The device copy and the byte-range states, comparable with ``==``: two equal snapshots mean the same
        copies would cross the bus for the same kernel reads and host reads."""
        return self._device, self._dbase, tuple(self._starts), tuple(self._states)

    def covers(self, lo: int, hi: int) -> bool:
        return self.lo <= lo and hi <= self.hi and lo < hi

    # -- states over byte ranges --------------------------------------------------------
    def _split(self, x: int) -> int:
        """Index of the run that starts at ``x`` (splitting the run that contains it)."""
        i = bisect.bisect_right(self._starts, x) - 1
        if self._starts[i] != x:
            self._starts.insert(i + 1, x)
            self._states.insert(i + 1, self._states[i])
            i += 1
        return i

    def _runs(self, lo: int, hi: int):
        """(start, end, state) of each run overlapping [lo, hi), clipped to it."""
        i = bisect.bisect_right(self._starts, lo) - 1
        while i < len(self._starts) and self._starts[i] < hi:
            end = self._starts[i + 1] if i + 1 < len(self._starts) else self.hi
            yield max(lo, self._starts[i]), min(hi, end), self._states[i]
            i += 1

    def _set(self, lo: int, hi: int, state: str) -> None:
        i = self._split(lo)
        j = self._split(hi) if hi < self.hi else len(self._starts)
        self._starts[i:j] = [lo]
        self._states[i:j] = [state]
        # merge equal neighbours so the lists stay as short as the number of distinct runs
        for k in (i + 1, i):
            if 0 < k < len(self._starts) and self._states[k] == self._states[k - 1]:
                del self._starts[k], self._states[k]

    def state(self, lo: int, hi: int) -> list[tuple[int, int, str]]:
        """The runs of states over [lo, hi) as (start, end, state) offsets from the buffer's start."""
        return [(a - self.lo, b - self.lo, s) for a, b, s in self._runs(lo, hi)]

    # -- kernels ---------------------------------------------------------------------------
    def for_read(self, dev, lo: int, hi: int) -> int:
        """The address on ``dev`` of host range [lo, hi) for a kernel to read: host-newer parts are uploaded
        first."""
        base = self._base(dev)
        stale = [(a, b) for a, b, s in self._runs(lo, hi) if s == HOST]
        for a, b in stale:
            self._device.upload(base + a - self.lo, a, b - a)
            self._set(a, b, SAME)
        return base + lo - self.lo

    def for_write(self, dev, lo: int, hi: int) -> int:
        """The address on ``dev`` of host range [lo, hi) for a kernel to overwrite entirely; the range becomes
        device-newer."""
        base = self._base(dev)
        self._set(lo, hi, DEVICE)
        return base + lo - self.lo

    def copy_within(self, dev, dst: int, src: int, nbytes: int) -> None:
        """Copy host range [src, src + nbytes) to [dst, dst + nbytes) (not overlapping) on the device only."""
        s = self.for_read(dev, src, src + nbytes)
        d = self.for_write(dev, dst, dst + nbytes)
        dev.copy(d, s, nbytes)

    # -- the host side ---------------------------------------------------------------------
    def to_host(self, lo: int, hi: int) -> None:
        """Make the host copy of [lo, hi) current (download its device-newer parts)."""
        for a, b, s in list(self._runs(lo, hi)):
            if s == DEVICE and self._dbase is not None:
                self._device.download(a, self._dbase + a - self.lo, b - a)
                self._set(a, b, SAME)

    def host_wrote(self, lo: int, hi: int) -> None:
        """The host copy of [lo, hi) was written: the device copy is stale there."""
        self._set(lo, hi, HOST)


def mirror_host_buffer(host: np.ndarray) -> DeviceMirror:
    """Mirror ``host`` on the device of the first kernel that uses it; the mirror is dropped and its device memory
    freed when ``host`` is garbage-collected."""
    m = DeviceMirror(host)
    with _LOCK:
        _MIRRORS[id(m)] = m
    weakref.finalize(host, _forget, id(m))
    return m


def _forget(key: int) -> None:
    with _LOCK:
        m = _MIRRORS.pop(key, None)
    if m is not None:
        m.release()


def find_mirror(a: np.ndarray) -> "tuple[DeviceMirror, int, int] | None":
    """``(mirror, lo, hi)`` where C-contiguous ``a`` lies inside a mirrored host buffer, else None."""
    if not _MIRRORS or not a.flags.c_contiguous or a.nbytes == 0:
        return None
    lo, hi = _span(a)
    for m in list(_MIRRORS.values()):
        if m.covers(lo, hi):
            return m, lo, hi
    return None


def arrays_to_host(arrays) -> None:
    """Make the host copies of ``arrays`` (any that lie in a mirrored buffer) current."""
    for a in arrays:
        if isinstance(a, np.ndarray):
            hit = find_mirror(a)
            if hit is not None:
                hit[0].to_host(hit[1], hit[2])


def arrays_host_wrote(arrays) -> None:
    """Record that the host wrote ``arrays`` (any that lie in a mirrored buffer)."""
    for a in arrays:
        if isinstance(a, np.ndarray):
            hit = find_mirror(a)
            if hit is not None:
                hit[0].host_wrote(hit[1], hit[2])
