import numpy as np
import pytest

from jit_runtime import Dram, OutOfMemoryError, RuntimeApiError


def test_alloc_is_aligned_and_disjoint():
    d = Dram(1024)
    blocks = [(d.alloc(n, align), n, align) for n, align in [(10, 16), (100, 64), (3, 256), (1, 8)]]
    for addr, n, align in blocks:
        assert addr % align == 0
    spans = sorted((a, a + n) for a, n, _ in blocks)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))


def test_first_fit_reuses_and_coalesces():
    d = Dram(1024)
    a, b, c = d.alloc(256, 64), d.alloc(256, 64), d.alloc(256, 64)
    d.free(a)
    d.free(b)  # a and b coalesce: a 512-byte block fits at a
    assert d.alloc(512, 64) == a
    d.free(c)
    assert d.allocated_bytes == 512


def test_grows_and_keeps_contents():
    d = Dram(64)
    a = d.alloc(32, 16)
    d.image[a:a + 32] = 7
    b = d.alloc(1000, 64)
    assert d.size >= b + 1000
    assert (d.image[a:a + 32] == 7).all()


def test_free_zeroes_and_rejects_bad_addresses():
    d = Dram(256)
    a = d.alloc(16, 16)
    d.image[a:a + 16] = 5
    d.free(a)
    assert not d.image[a:a + 16].any()
    with pytest.raises(RuntimeApiError, match="not an allocated block"):
        d.free(a)


def test_limits():
    d = Dram(64, max_bytes=128)
    with pytest.raises(OutOfMemoryError):
        d.alloc(1000)
    with pytest.raises(RuntimeApiError):
        d.alloc(0)
    with pytest.raises(RuntimeApiError):
        d.alloc(8, align=3)


def test_random_alloc_free_never_overlaps():
    rng = np.random.default_rng(1)
    d = Dram(256)
    live: dict[int, int] = {}
    for _ in range(300):
        if live and rng.random() < 0.4:
            addr = list(live)[rng.integers(len(live))]
            d.free(addr)
            del live[addr]
        else:
            n = int(rng.integers(1, 300))
            addr = d.alloc(n, int(2 ** rng.integers(0, 8)))
            live[addr] = n
        spans = sorted((a, a + n) for a, n in live.items())
        assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))
        assert d.allocated_bytes == sum(live.values())
