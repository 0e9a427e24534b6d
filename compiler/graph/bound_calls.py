"""``LastCalls``: per key (a graph node), what its last call was given and what it produced, to answer "is this call
the same as the last one?" on a hot per-node path.

A model's executor hands each node the same array objects every run (its arena's views and the graph's constants),
so a backend that keeps, for each node, the input arrays of its last call (held, so no id is reused), the output
array it wrote and the result it prepared from them can skip its per-call work when they come back: compared by
identity (``is``), nothing is hashed or read. Used by the llvm CPU backend's bound kernel calls and view nodes
(:mod:`compiler.backend.plans.backend`) and by the Module's bound accelerator calls
(:mod:`compiler.executor.module`); it lives here, beside the backend interfaces, so that both import it downwards.
"""
from __future__ import annotations

import operator
import threading
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, Callable, NamedTuple

import numpy as np


class LastCall(NamedTuple):
    """One recorded call: the thread that made it, its inputs and output array (kept alive, compared by identity)
    and what the caller made of them."""

    thread: int
    inputs: tuple
    out: Any
    result: Any


def same_view(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are views of one base array with the same memory, shape, strides and dtype (a view op such as
    ``PackedSqueezeHW`` returns a new view object of the same arena bytes every run)."""
    return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.base is not None and a.base is b.base
            and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


class LastCalls(Mapping):
    """Each key's last call (:class:`LastCall`), read as a mapping; :meth:`repeat` says whether a call repeats it.

    ``per_thread``: a call only repeats one made by the same thread (where the result holds that thread's state, e.g.
    a kernel's per-thread scratch buffers). ``views``: an input also matches a different view object of the same
    memory (:func:`same_view`), not only the very same object."""

    __slots__ = ("_calls", "repeat", "version")

    def __init__(self, *, per_thread: bool = False, views: bool = False) -> None:
        self._calls: dict[Hashable, LastCall] = {}
        self.version = 0  # bumped by every record and forget: a caller that kept records can tell they still hold
        # repeat(key, inputs, out=None) -> the recorded result where this call repeats the recorded one (the same
        # ``inputs`` one by one and the same ``out``, by identity; per thread and views as configured), else None.
        # A closure over the records, made for the configuration: it runs for every node of every run.
        self.repeat: Callable[..., Any] = _repeat_function(self._calls, per_thread, views)

    def record(self, key: Hashable, inputs: Sequence, result: Any, out: Any = None) -> None:
        """Keep ``result`` (not None) as what a call of ``key`` on ``inputs`` writing ``out`` gave, from this thread
        (the arrays are held until the key is recorded again or forgotten)."""
        if result is None:
            raise ValueError("LastCalls.record: result must not be None (None means no repeat)")
        self._calls[key] = LastCall(threading.get_ident(), tuple(inputs), out, result)
        self.version += 1

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s record, if any (its next call is not a repeat)."""
        self._calls.pop(key, None)
        self.version += 1

    def __getitem__(self, key: Hashable) -> LastCall:
        return self._calls[key]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._calls)

    def __len__(self) -> int:
        return len(self._calls)


def _repeat_function(calls: dict, per_thread: bool, views: bool) -> Callable[..., Any]:
    """:attr:`LastCalls.repeat` over ``calls`` for the configuration."""
    get, is_, ident = calls.get, operator.is_, threading.get_ident

    if views:
        def repeat(key: Hashable, inputs: Sequence, out: Any = None) -> Any:
            last = get(key)
            if (last is None or last[2] is not out or len(inputs) != len(last[1])
                    or per_thread and last[0] != ident()):
                return None
            for a, b in zip(inputs, last[1]):
                if a is not b and not same_view(a, b):
                    return None
            return last[3]
    elif per_thread:
        def repeat(key: Hashable, inputs: Sequence, out: Any = None) -> Any:
            last = get(key)
            if (last is None or last[2] is not out or len(inputs) != len(last[1]) or last[0] != ident()
                    or not all(map(is_, inputs, last[1]))):
                return None
            return last[3]
    else:
        def repeat(key: Hashable, inputs: Sequence, out: Any = None) -> Any:
            last = get(key)
            if last is None or last[2] is not out or len(inputs) != len(last[1]) or not all(map(is_, inputs, last[1])):
                return None
            return last[3]
    return repeat
