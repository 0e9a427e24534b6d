"""Cycle counts of small programs, worked out by hand from docs/timing.md (derivations in the comments).

tiny:    L = dram_latency = 8,  B = 4 bytes/beat, F = fetch_burst = 4, Q = cmd_queue_depth = 4, pipelines 4
pynq-z1: L = 32, B = 8, F = 8, Q = 8, gemm_pipeline 12, alu_pipeline 16
Fetch of n instructions: D = L + ceil(16 n / B).
"""
from __future__ import annotations

import isa
from isa import Alu, Finish, Gemm, Load, MemType, Store, Uop
from tests.simulator.helpers import Prog, deps

TINY = isa.HwConfig.from_preset("tiny")
PYNQ = isa.HwConfig.from_preset("pynq-z1")


def stamps(res, i):
    e = res.events[i]
    return e.dispatch, e.take, e.start, e.grant, e.end


def test_worked_example_pynq():
    """The worked example of docs/timing.md.

    fetch burst of 4: D = 32 + ceil(64/8) = 40, port [0, 40); dispatch i0..i3 at 40, 41, 42, 43.
    i0 LOAD.INP 1x4 (16-byte elements): take 41 = start, port free -> grant 41, D = 32 + ceil(64/8) = 40 -> e 81.
    i1 GEMM 4 uops: take 42, pops load->compute: token visible at 81 -> start 81, e = 81 + 4 + 12 = 97.
    i2 STORE 1x4: take 43, pops compute->store (visible 97) -> start 97, grant 97, D = 40 -> e 137.
    i3 FINISH: take = max(43 + 1, 97) = 97, e = 98.  T = max(e) = 137.
    """
    p = Prog(PYNQ)
    a, o = p.alloc("inp", 4), p.alloc("out", 4)
    p.add(Load(MemType.INP, 0, a, 1, 4, 4, deps=deps("push_next")),
          Gemm(False, 0, 4, 1, 1, deps=deps("pop_prev", "push_next")),
          Store(MemType.OUT, 0, o, 1, 4, 4, deps=deps("pop_prev")), Finish())
    res = p.run()
    assert res.cycles == 137
    assert stamps(res, 0) == (40, 41, 41, 41, 81)
    assert stamps(res, 1) == (41, 42, 81, -1, 97)
    assert stamps(res, 2) == (42, 43, 97, 97, 137)
    assert stamps(res, 3) == (43, 97, 97, -1, 98)
    units = res.profile["units"]
    assert units["compute"]["stall_token"] == 81 - 42
    assert units["store"]["stall_token"] == 97 - 43
    assert res.profile["macs"] == 4 * 256 and res.profile["cycles"] == 137


def test_tiny_pipeline_with_fetch_and_port_priority():
    """Two fetch bursts competing with DMA for the port.

    burst 1 (4 insns): D = 8 + 64/4 = 24 -> [0, 24); dispatch i0 24 (load), i1 25 (load), i2 26, i3 27 (compute);
      next burst requested at 28.
    i0 LOAD.INP 1x4 (4-byte elements): take 25, grant 25, D = 8 + ceil(16/4) = 12 -> e 37.
    port busy until 37; at 37 load (i1, take 37 = e0) beats fetch (pending since 28).
    i1 LOAD.WGT 1x2 (16-byte elements): grant 37, D = 8 + 2*16/4 = 16 -> e 53, pushes load->compute.
    i2 LOAD.UOP 1x8 (compute): take 27, pops the token at 53, compute beats fetch: grant 53, D = 8 + 32/4 = 16 -> e 69.
    fetch granted 69: burst 2 (3 insns) D = 8 + 48/4 = 20 -> e 89.
    i3 GEMM reset 8 uops: take 69, e = 69 + 8 + 4 = 81.
    dispatch i4 89, i5 90 (store), i6 91.  i4 GEMM: take 90, e = 90 + 12 = 102, pushes compute->store.
    i5 STORE 1x8 (4-byte elements): take 91, token at 102, grant 102, D = 8 + 32/4 = 16 -> e 118.
    i6 FINISH: take = max(92, 102) = 102, e 103.  T = 118.
    """
    p = Prog(TINY)
    ia, iw, io = p.alloc("inp", 4), p.alloc("wgt", 2), p.alloc("out", 8)
    iu = p.place_uops([Uop(dst=i * 2 + j, src=i, wgt=j) for i in range(4) for j in range(2)])
    p.add(Load(MemType.INP, 0, ia, 1, 4, 4), Load(MemType.WGT, 0, iw, 1, 2, 2, deps=deps("push_next")),
          Load(MemType.UOP, 0, iu, 1, 8, 8, deps=deps("pop_prev")),
          Gemm(True, 0, 8, 1, 1), Gemm(False, 0, 8, 1, 1, deps=deps("push_next")),
          Store(MemType.OUT, 0, io, 1, 8, 8, deps=deps("pop_prev")), Finish())
    res = p.run()
    assert res.cycles == 118
    assert [stamps(res, i) for i in range(7)] == [
        (24, 25, 25, 25, 37), (25, 37, 37, 37, 53), (26, 27, 53, 53, 69), (27, 69, 69, -1, 81),
        (89, 90, 90, -1, 102), (90, 91, 102, 102, 118), (91, 102, 102, -1, 103)]
    fetch = res.profile["units"]["fetch"]
    assert fetch["busy"] == 24 + 20 and fetch["stall_port"] == 69 - 28


def test_tiny_full_command_queue_stalls_fetch():
    """Six 20-iteration ALUs (e = s + 24) fill the compute queue (Q = 4).

    burst 1: [0, 24), dispatch i0..i3 at 24..27; burst 2 requested 28, granted 28, D = 8 + 48/4 = 20 -> 48.
    compute: i0 take 25 -> e 49; i1 49 -> 73; i2 73 -> 97; i3 97 -> 121.
    i4 (j = 4) needs take_0 + 1 = 26: d = 48.  i5 (j = 5): max(49, take_1 + 1 = 50) = 50.
    i6 FINISH (j = 6): max(51, take_2 + 1 = 74) = 74.  fetch queue stall = (50 - 49) + (74 - 51) = 24.
    i4 take 121 -> 145; i5 145 -> 169; i6 take max(75, 169) = 169 -> 170.  T = 170.
    """
    p = Prog(TINY)
    alu = Alu("ADD", False, 0, 1, 20, 1, dst_factor_out=1, use_imm=True, imm=1)
    p.add(*[alu] * 6, Finish())
    res = p.run()
    assert res.cycles == 170
    assert [e.dispatch for e in res.events] == [24, 25, 26, 27, 48, 50, 74]
    assert [e.take for e in res.events] == [25, 49, 73, 97, 121, 145, 169]
    assert res.profile["units"]["fetch"]["stall_queue"] == 24


def test_tiny_store_beats_load_for_the_port():
    """Store and load both wait for the port; the store (higher priority) gets it first.

    burst [0, 24); dispatch i0 24 (load), i1 25 (store), i2 26 (load), i3 27 (compute).
    i0 LOAD.INP 1x1: take 25, grant 25, D = 8 + 1 = 9 -> e 34.  i1 STORE 1x1: take 26, requests 26.
    i2 LOAD.INP: take 34 (= e0), requests 34.  At 34 both wait: store granted 34 -> 43, then load 43 -> 52.
    i3 FINISH: take 28, e 29.  T = 52.  Port stalls: store 34 - 26 = 8, load 43 - 34 = 9.
    """
    p = Prog(TINY)
    a, o = p.alloc("inp", 1), p.alloc("out", 1)
    p.add(Load(MemType.INP, 0, a, 1, 1, 1), Store(MemType.OUT, 0, o, 1, 1, 1), Load(MemType.INP, 1, a, 1, 1, 1),
          Finish())
    res = p.run()
    assert res.cycles == 52
    assert (res.events[1].grant, res.events[1].end) == (34, 43)
    assert (res.events[2].grant, res.events[2].end) == (43, 52)
    assert res.profile["units"]["store"]["stall_port"] == 8
    assert res.profile["units"]["load"]["stall_port"] == 9


def test_nops_and_padding_cost():
    """A NOP LOAD (x_size 0) never takes the port: e = s + 1; padded loads pay one cycle per pad element.

    fetch of 3 insns: D = 8 + 48/4 = 20 -> [0, 20); dispatch i0 20, i1 21, i2 22.
    i0 NOP LOAD.INP: take 21, e 22.  i1 LOAD.INP 2x2 padded by 1 on every side: take 22, grant 22,
    D = 8 + 2 * ceil(2*4/4) + (4*4 - 2*2) = 8 + 4 + 12 = 24 -> e 46.  i2 FINISH take 23, e 24.  T = 46.
    """
    p = Prog(TINY)
    a = p.alloc("inp", 8)
    p.add(Load(MemType.INP, 0, a, 1, 0, 0),
          Load(MemType.INP, 0, a, 2, 2, 4, y_pad0=1, y_pad1=1, x_pad0=1, x_pad1=1), Finish())
    res = p.run()
    assert [stamps(res, i) for i in range(3)] == [(20, 21, 21, -1, 22), (21, 22, 22, 22, 46), (22, 23, 23, -1, 24)]
    assert res.cycles == 46
    assert res.profile["pad_elements"] == 12
