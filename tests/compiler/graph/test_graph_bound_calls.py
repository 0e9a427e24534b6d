"""``compiler.graph.bound_calls.LastCalls``: a call repeats the recorded one only for the very same input and output
objects (or, with ``views=True``, a view of the same memory), on the recording thread where ``per_thread``."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from compiler.graph.bound_calls import LastCalls, same_view


def test_repeat_needs_the_same_objects():
    calls = LastCalls()
    x, w, out = np.zeros(4), np.ones(4), np.empty(4)
    assert calls.repeat("n", [x, w], out) is None  # nothing recorded
    calls.record("n", [x, w], "result", out)
    assert calls.repeat("n", [x, w], out) == "result"
    assert calls.repeat("n", (x, w), out) == "result"  # any sequence of the same objects
    assert calls.repeat("n", [x.copy(), w], out) is None  # equal values, another object
    assert calls.repeat("n", [x, w], np.empty(4)) is None  # another output array
    assert calls.repeat("n", [x, w]) is None  # no output array given, one recorded
    assert calls.repeat("n", [x], out) is None and calls.repeat("n", [x, w, None], out) is None  # other arity
    assert calls.repeat("other", [x, w], out) is None
    x[...] = 5  # changed in place: still the same object, still a repeat
    assert calls.repeat("n", [x, w], out) == "result"
    assert calls.repeat("n", [x[:], w], out) is None  # a view of the same memory only counts with views=True


def test_record_forget_and_mapping_view():
    calls = LastCalls()
    x = np.zeros(3)
    calls.record(1, [x, None], ("a", 1))
    assert calls.repeat(1, [x, None]) == ("a", 1)  # None inputs (absent optional inputs) compare by identity too
    assert len(calls) == 1 and list(calls) == [1] and 1 in calls
    rec = calls[1]
    assert rec.inputs == (x, None) and rec.inputs[0] is x and rec.out is None and rec.result == ("a", 1)
    assert rec.thread == threading.get_ident()
    y = np.zeros(3)
    calls.record(1, [y, None], "b")  # a new record replaces the old one
    assert calls.repeat(1, [x, None]) is None and calls.repeat(1, [y, None]) == "b"
    calls.forget(1)
    calls.forget(1)  # forgetting twice is fine
    assert len(calls) == 0 and calls.repeat(1, [y, None]) is None
    with pytest.raises(ValueError, match="must not be None"):
        calls.record(2, [x], None)


def test_per_thread():
    x = np.zeros(2)
    shared, own = LastCalls(), LastCalls(per_thread=True)
    shared.record("k", [x], "r")
    own.record("k", [x], "r")
    seen = []
    t = threading.Thread(target=lambda: seen.extend([shared.repeat("k", [x]), own.repeat("k", [x])]))
    t.start()
    t.join()
    assert seen == ["r", None]  # another thread: only the per-thread record refuses it
    assert own.repeat("k", [x]) == "r"  # the recording thread still gets it


def test_views_match_the_same_memory():
    base = np.arange(24, dtype=np.int8)
    a = base[:12].reshape(3, 4)
    calls = LastCalls(views=True)
    calls.record("k", [a, None], "r")
    assert calls.repeat("k", [a, None]) == "r"
    assert calls.repeat("k", [base[:12].reshape(3, 4), None]) == "r"  # a new view object, same base and memory
    assert calls.repeat("k", [base[12:].reshape(3, 4), None]) is None  # other bytes of the base
    assert calls.repeat("k", [base[:12].reshape(4, 3), None]) is None  # another shape
    assert calls.repeat("k", [base[:24:2].reshape(3, 4), None]) is None  # other strides
    assert calls.repeat("k", [base[:12].view(np.uint8).reshape(3, 4), None]) is None  # another dtype
    assert calls.repeat("k", [base[:12].copy().reshape(3, 4), None]) is None  # a copy: another base


def test_same_view():
    base = np.zeros((2, 8), np.float32)
    assert same_view(base[0], base[0]) and same_view(base[1, 2:6], base[1][2:6])
    assert not same_view(base, base)  # not views (no base): only identity counts for them
    assert not same_view(base[0], base[1]) and not same_view(base[0], base[0].copy())
    assert not same_view(base[0], [0.0] * 8)
