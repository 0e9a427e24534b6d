"""Functional mode equals timing mode; profile, Perfetto trace and timeline PNG."""
from __future__ import annotations

import json

import numpy as np
import pytest

import isa
from benchmarks.bench_simulator import matmul_stream, mixed_stream
from simulator import Simulator

PYNQ = isa.HwConfig.from_preset("pynq-z1")
TINY = isa.HwConfig.from_preset("tiny")


@pytest.mark.parametrize("cfg, kt", [(PYNQ, 2), (PYNQ, 4), (TINY, 2)])
def test_functional_equals_timing_on_tiled_matmul(cfg, kt):
    rng = np.random.default_rng(0)
    M, K, N = 32, 4 * cfg.block_in, 4 * cfg.block_out
    img, addr, n, A, B, c0 = matmul_stream(cfg, M, K, N, rng, kt=kt)
    drams = []
    for timing in (True, False):
        dram = img.dram.copy()
        res = Simulator(cfg, timing=timing).run(dram, addr, n)
        assert (res.cycles > 0) == timing
        drams.append(dram)
    assert np.array_equal(drams[0], drams[1])
    eb = cfg.out_elem_bytes
    got = drams[0][c0 * eb:c0 * eb + M * N].view(np.int8).reshape(M, N)
    ref = A.astype(np.int64) @ B.astype(np.int64)
    assert np.array_equal(got, ref.astype(np.int8))


def test_functional_equals_timing_on_mixed_stream():
    img, addr, n = mixed_stream(PYNQ, 20, np.random.default_rng(1))
    a, b = img.dram.copy(), img.dram.copy()
    Simulator(PYNQ).run(a, addr, n)
    Simulator(PYNQ, timing=False).run(b, addr, n)
    assert np.array_equal(a, b) and not np.array_equal(a, img.dram)


def test_profile_trace_and_plot(tmp_path):
    rng = np.random.default_rng(2)
    img, addr, n, *_ = matmul_stream(PYNQ, 32, 64, 64, rng, kt=2)
    res = Simulator(PYNQ, trace=True).run(img.dram, addr, n)
    prof = json.loads(json.dumps(res.profile))  # JSON-serializable
    assert prof["cycles"] == res.cycles == max(e.end for e in res.events)
    assert set(prof["units"]) == {"fetch", "load", "compute", "store"}
    for name, u in prof["units"].items():
        assert set(u) >= {"busy", "stall_token", "stall_port", "stall_queue", "insns"}
        assert u["busy"] + u["stall_token"] + u["stall_port"] + u["stall_queue"] <= res.cycles, name
    assert prof["units"]["fetch"]["insns"] == n
    assert sum(prof["units"][u]["insns"] for u in ("load", "compute", "store")) == n
    # one 32-row m-tile and one n-tile (4 blocks fit): A (32 x 64) and B (64 x 64) are each loaded once
    assert prof["bytes"]["inp"] == 32 * 64 and prof["bytes"]["wgt"] == 64 * 64
    assert prof["bytes"]["out"] == 32 * 64 and prof["bytes"]["insn"] == 16 * n
    assert prof["macs"] == 32 * 64 * 64
    assert prof["gemm_uops"] == prof["macs"] // PYNQ.macs_per_cycle + 32 * 4  # + the reset iterations
    assert prof["macs_per_cycle"] == pytest.approx(prof["macs"] / res.cycles)
    assert prof["utilization"] == pytest.approx(prof["macs"] / (256 * res.cycles))
    # the port is exclusive: its transactions never overlap
    spans = sorted((e.grant, e.end) for e in res.events if e.grant >= 0)
    spans += [(g, e) for _f, _c, _r, g, e in res.timeline.bursts]
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert prof["dram_port"]["busy"] == sum(e - g for g, e in spans)

    path = res.write_trace(tmp_path / "trace.json")
    data = json.loads(path.read_text())
    lanes = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"}
    assert lanes == {"fetch", "load", "compute", "store", "dram port"}
    insn_events = [e for e in data["traceEvents"] if e["ph"] == "X" and "asm" in e["args"] and "dispatch" in e["args"]]
    assert sorted(e["args"]["index"] for e in insn_events) == list(range(n))
    gemm = next(e for e in insn_events if e["name"] == "GEMM")
    assert gemm["args"]["asm"].startswith("GEMM ") and gemm["dur"] == gemm["args"]["end"] - gemm["args"]["start"]

    png = res.plot_timeline(tmp_path / "timeline.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_functional_profile_counts_without_cycles():
    img, addr, n = mixed_stream(PYNQ, 5, np.random.default_rng(3))
    res = Simulator(PYNQ, timing=False).run(img.dram, addr, n)
    assert res.cycles == 0 and res.events == []
    assert res.profile["alu_uops"] == 5 * 2 * 16 and res.profile["utilization"] == 0.0


def test_scratchpads_persist_until_reset():
    img, addr, n = mixed_stream(PYNQ, 2, np.random.default_rng(4))
    sim = Simulator(PYNQ)
    sim.run(img.dram.copy(), addr, n)
    assert sim.scratchpads["inp"].any()
    sim.reset()
    assert not sim.scratchpads["inp"].any()
