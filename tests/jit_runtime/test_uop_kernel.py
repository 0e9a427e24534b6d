import numpy as np
import pytest

from isa import Gemm, Load, MemType, make_config
from jit_runtime import CommandQueue, KernelError, UopLoopError
from jit_runtime.uop_kernel import KernelBuilder, UopCache, make_kernel

CFG = make_config("pynq-z1")


def _kernel(mode="gemm", loops=((4, 1, 1, 0),), uops=((0, 0, 0),)):
    def finit(k):
        for lp in loops:
            k.loop_begin(*lp)
        for u in uops:
            k.push(*u)
        for _ in loops:
            k.loop_end()
    return finit


def test_loop_fields_of_two_levels():
    q = CommandQueue(CFG)
    k = q.kernel("gemm", _kernel(loops=((8, 4, 16, 0), (4, 1, 0, 16)), uops=((0, 0, 0), (0, 1, 1))))
    assert k.loop_fields() == {"iter_out": 8, "iter_in": 4, "dst_factor_out": 4, "dst_factor_in": 1,
                               "src_factor_out": 16, "src_factor_in": 0, "wgt_factor_out": 0, "wgt_factor_in": 16}
    assert k.size == 2


def test_unbalanced_loops_raise():
    q = CommandQueue(CFG)

    def open_loop(k):
        k.loop_begin(4, 1, 1)
        k.push(0, 0)
    with pytest.raises(UopLoopError, match="still open"):
        q.push_gemm(open_loop)

    def extra_end(k):
        k.loop_begin(4, 1, 1)
        k.push(0, 0)
        k.loop_end()
        k.loop_end()
    with pytest.raises(UopLoopError, match="without a matching"):
        q.push_gemm(extra_end)


def test_third_loop_level_raises():
    q = CommandQueue(CFG)
    with pytest.raises(UopLoopError, match="at most 2 loop levels"):
        q.push_gemm(_kernel(loops=((2, 1, 1, 0), (2, 1, 1, 0), (2, 1, 1, 0))))


def test_misplaced_uops_and_empty_kernels_raise():
    q = CommandQueue(CFG)

    def push_then_loop(k):
        k.push(0, 0)
        k.loop_begin(2, 1, 1)
        k.loop_end()
    with pytest.raises(UopLoopError, match="before the first uop_push"):
        q.push_gemm(push_then_loop)
    with pytest.raises(KernelError, match="no micro-ops"):
        q.push_gemm(lambda k: None)
    with pytest.raises(KernelError, match="no weight index"):
        q.push_alu(_kernel(uops=((0, 0, 3),)), op="ADD")
    with pytest.raises(KernelError, match="outside a micro-kernel"):
        q.uop_push(0, 0)
    with pytest.raises(KernelError, match="scratchpad has"):
        q.push_gemm(_kernel(loops=((CFG.acc_depth + 1, 1, 0, 0),)))
    assert q.instructions == []  # nothing was emitted by the failed calls


def test_queue_methods_record_the_current_kernel():
    q = CommandQueue(CFG)

    def finit(_k):
        q.uop_loop_begin(3, 1, 1)
        q.uop_push(5, 6, 0)
        q.uop_loop_end()
    k = q.push_alu(finit, op="MAX", use_imm=True, imm=0)
    assert k.size == 1 and k.loops[0].extent == 3 and k.uops[0].dst == 5


def test_signature_records_once_and_hits_the_cache():
    q = CommandQueue(CFG)
    calls = []

    def finit(k):
        calls.append(1)
        k.loop_begin(4, 1, 1)
        k.push(0, 0)
        k.loop_end()
    for op in ("SHR", "MAX", "MIN"):
        q.push_alu(finit, op=op, use_imm=True, imm=1, signature="epi")
    assert len(calls) == 1
    insns = q.instructions
    assert [type(i).__name__ for i in insns] == ["Load", "Alu", "Alu", "Alu"]
    assert insns[0].mem == MemType.UOP and insns[0].x_size == 1
    assert q._uop_cache.stats.as_dict() == {"hits": 2, "misses": 1, "evictions": 0, "uops_loaded": 1}
    # kernels without a signature are shared by content
    a = q.kernel("alu", _kernel(mode="alu", uops=((1, 1, 0),)))
    b = q.kernel("alu", _kernel(mode="alu", uops=((1, 1, 0),)))
    assert a is b


def test_lru_eviction_in_the_uop_cache():
    cache = UopCache(capacity=8, align=2)

    def kern(name, n):
        b = KernelBuilder("gemm")
        for i in range(n):
            b.push(i, i, 0)
        return make_kernel(CFG, b, name)
    a, b, c = kern("a", 3), kern("b", 4), kern("c", 2)
    assert cache.lookup(a) == (0, False)  # takes [0, 4): sizes round up to the beat
    assert cache.lookup(b) == (4, False)
    assert cache.lookup(a) == (0, True)  # a is now most recently used
    assert cache.lookup(c) == (4, False)  # evicts b, the least recently used
    assert cache.stats.as_dict() == {"hits": 1, "misses": 3, "evictions": 1, "uops_loaded": 9}
    assert set(cache.resident()) == {a.key, c.key}
    assert cache.lookup(b)[1] is False  # b was evicted: a miss again
    with pytest.raises(KernelError, match="exceeds"):
        cache.lookup(kern("big", 9))


def test_eviction_reloads_through_the_queue():
    cfg = make_config("tiny")  # 256 uop entries
    q = CommandQueue(cfg)
    kernels = [_kernel(uops=[(0, i % 8, 0)] * 100) for i in range(4)]
    for i in (0, 1, 0, 2, 3, 1):
        q.push_gemm(kernels[i], signature=i)
    uop_loads = [i for i in q.instructions if isinstance(i, Load)]
    gemms = [i for i in q.instructions if isinstance(i, Gemm)]
    assert len(gemms) == 6
    stats = q._uop_cache.stats
    assert (stats.hits, stats.misses) == (1, 5) and stats.evictions >= 2
    assert len(uop_loads) == 5
    for g in gemms:
        assert g.uop_end - g.uop_bgn == 100 and g.uop_end <= cfg.uop_depth


def test_preload_brings_many_kernels_in_one_load():
    """preload_kernels: the missing kernels in one LOAD.UOP over one contiguous range (each at the base the cache
    gave it, its words at that offset in DRAM); later pushes hit; duplicates and resident kernels are skipped."""
    q = CommandQueue(CFG)
    fa, fb, fc = (_kernel(uops=[(i, i, 0)] * n) for i, n in ((1, 3), (2, 4), (3, 2)))
    q.push_gemm(fa, signature="a")  # a is resident (its own load)
    ka, kb, kc = (q.kernel("gemm", f, sig) for f, sig in ((fa, "a"), (fb, "b"), (fc, "c")))
    q.preload_kernels([kb, ka, kc, kb])
    loads = [i for i in q.instructions if isinstance(i, Load)]
    assert len(loads) == 2 and loads[1].mem == MemType.UOP
    bases = {k.key: q._uop_cache.resident()[k.key][0] for k in (kb, kc)}
    lo, n = loads[1].sram_base, loads[1].x_size
    assert lo == min(bases.values()) and n == max(bases[kc.key] + kc.size, bases[kb.key] + kb.size) - lo
    eb = CFG.elem_bytes("uop")
    image = q.dram.image[loads[1].dram_base * eb:(loads[1].dram_base + n) * eb].view(np.uint32)
    for k in (kb, kc):
        assert np.array_equal(image[bases[k.key] - lo:bases[k.key] - lo + k.size], k.words)
    q.push_gemm(fb, signature="b")
    q.push_gemm(fc, signature="c")
    assert [type(i).__name__ for i in q.instructions] == ["Load", "Gemm", "Load", "Gemm", "Gemm"]


def test_preload_stops_at_the_scratchpad_capacity():
    cfg = make_config("tiny")  # 256 uop entries: two 100-uop kernels fit, the third loads on first use
    q = CommandQueue(cfg)
    fs = [_kernel(uops=[(0, i, 0)] * 100) for i in range(3)]
    ks = [q.kernel("gemm", f, i) for i, f in enumerate(fs)]
    q.preload_kernels(ks)
    assert [(type(i).__name__, i.x_size) for i in q.instructions] == [("Load", 200)]
    for i, f in enumerate(fs):
        q.push_gemm(f, signature=i)
    assert [type(i).__name__ for i in q.instructions] == ["Load", "Gemm", "Gemm", "Load", "Gemm"]
