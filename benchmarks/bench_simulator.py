"""Simulator speed: instructions per second on a mixed stream, and a 1024^3 int8 GEMM vs plain numpy.

Prints progress lines, then one JSON object as the last line:
``instructions_per_s`` (timing mode, mixed LOAD/GEMM/ALU/STORE stream, the timing engine on every run),
``replay_instructions_per_s`` (the same program run again on one simulator: its timeline replayed) and
``gemm_ratio_vs_numpy`` (simulator wall time, timing mode, for a 1024x1024x1024 int8 matmul
tiled by hand for pynq-z1, divided by one numpy float64 matmul of the same sizes, same run).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import isa  # noqa: E402
from isa import Alu, Deps, Finish, Gemm, Load, MemType, Store, Uop  # noqa: E402
from simulator import Simulator  # noqa: E402


def _d(**flags: bool) -> Deps:
    return Deps(**flags)


class Image:
    """A DRAM image with a bump allocator (element indices per memory type)."""

    def __init__(self, cfg: isa.HwConfig, nbytes: int):
        self.cfg, self.dram, self.top = cfg, np.zeros(nbytes, np.uint8), 64

    def alloc(self, mem: str, n: int) -> int:
        eb = self.cfg.elem_bytes(mem)
        align = max(eb, 64)
        self.top = -(-self.top // align) * align
        base, self.top = self.top // eb, self.top + n * eb
        assert self.top <= self.dram.size
        return base

    def write(self, mem: str, base: int, raw: np.ndarray) -> None:
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
        start = base * self.cfg.elem_bytes(mem)
        self.dram[start:start + raw.size] = raw

    def program(self, insns: list) -> tuple[int, int]:
        words = isa.encode_stream(insns, self.cfg).reshape(-1)
        addr = self.alloc("inp", 0) * self.cfg.inp_elem_bytes
        addr = -(-addr // 16) * 16
        self.dram[addr:addr + words.size] = words
        self.top = addr + words.size
        return addr, len(insns)


def matmul_stream(cfg: isa.HwConfig, M: int, K: int, N: int, rng: np.random.Generator, kt: int | None = None):
    """C = A @ B (int8, M x K x N), batch-1 config, tiles of mt rows x kt k-blocks x nt n-blocks.

    Returns (image, insn_addr, n_insns, A, B, C element base).
    """
    BI, BO = cfg.block_in, cfg.block_out
    kb, nb = K // BI, N // BO
    kt = kt or kb
    nt = max(1, min(nb, cfg.wgt_depth // kt))
    mt = max(1, min(cfg.inp_depth // kt, cfg.acc_depth // nt, M))
    assert M % mt == 0 and nb % nt == 0
    img = Image(cfg, M * K + K * N + M * N + (1 << 22))
    A = rng.integers(-128, 128, (M, K), dtype=np.int8)
    B = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a0 = img.alloc("inp", M * kb)
    img.write("inp", a0, A)  # element (m, k) at a0 + m*kb + k
    wt = B.reshape(kb, BI, nb, BO).transpose(2, 0, 3, 1)  # (nb, kb, BO, BI): element (n, k) at w0 + n*kb + k
    w0 = img.alloc("wgt", nb * kb)
    img.write("wgt", w0, np.ascontiguousarray(wt))
    c0 = img.alloc("out", M * nb)
    uops = [Uop(0, 0, 0)] + [Uop(dst=n, src=k, wgt=n * kt + k) for n in range(nt) for k in range(kt)]
    u0 = img.alloc("uop", len(uops))
    img.write("uop", u0, isa.encode_uops(uops, cfg))
    insns: list = [Load(MemType.UOP, 0, u0, 1, len(uops), len(uops))]
    steps = [(n, m, k) for n in range(0, nb, nt) for m in range(0, M, mt) for k in range(0, kb, kt)]
    wgt_tile = None
    for s, (n, m, k) in enumerate(steps):
        last_k = k + kt == kb
        loads = []
        if wgt_tile != (n, k):
            loads.append(Load(MemType.WGT, 0, w0 + n * kb + k, nt, kt, kb))
            wgt_tile = (n, k)
        loads.append(Load(MemType.INP, 0, a0 + m * kb + k, mt, kt, kb))
        loads[0] = isa.with_deps(loads[0], pop_next=s > 0)
        loads[-1] = isa.with_deps(loads[-1], push_next=True)
        insns += loads
        if k == 0:
            insns.append(Gemm(True, 0, 1, mt, nt, dst_factor_out=nt, dst_factor_in=1, deps=_d(pop_next=s > 0)))
        insns.append(Gemm(False, 1, len(uops), mt, 1, dst_factor_out=nt, src_factor_out=kt,
                          deps=_d(pop_prev=True, push_prev=s < len(steps) - 1, push_next=last_k)))
        if last_k:
            insns.append(Store(MemType.OUT, 0, c0 + m * nb + n, mt, nt, nb, deps=_d(pop_prev=True, push_prev=True)))
    insns.append(Finish(deps=_d(pop_next=True)))
    addr, count = img.program(insns)
    return img, addr, count, A, B, c0


def mixed_stream(cfg: isa.HwConfig, steps: int, rng: np.random.Generator):
    """Small tiles: per step a LOAD.INP, LOAD.WGT, GEMM reset + GEMM, two ALU ops, a STORE."""
    img = Image(cfg, 1 << 22)
    inp = img.alloc("inp", 64)
    img.write("inp", inp, rng.integers(-128, 128, 64 * cfg.inp_elem_bytes, dtype=np.int8))
    wgt = img.alloc("wgt", 16)
    img.write("wgt", wgt, rng.integers(-128, 128, 16 * cfg.wgt_elem_bytes, dtype=np.int8))
    out = img.alloc("out", 64 * steps)
    uops = [Uop(dst=i, src=i, wgt=i % 4) for i in range(16)]
    u0 = img.alloc("uop", 16)
    img.write("uop", u0, isa.encode_uops(uops, cfg))
    insns: list = [Load(MemType.UOP, 0, u0, 1, 16, 16)]
    for s in range(steps):
        first = s > 0
        insns.append(Load(MemType.INP, 0, inp, 4, 16, 16, deps=_d(pop_next=first)))
        insns.append(Load(MemType.WGT, 0, wgt, 1, 16, 16, deps=_d(push_next=True)))
        insns.append(Gemm(True, 0, 16, 1, 1, deps=_d(pop_next=first)))
        insns.append(Gemm(False, 0, 16, 4, 1, src_factor_out=16, wgt_factor_out=4,
                          deps=_d(pop_prev=True, push_prev=s < steps - 1)))
        insns.append(Alu("SHR", False, 0, 16, 1, 1, use_imm=True, imm=3))
        insns.append(Alu("MAX", False, 0, 16, 1, 1, use_imm=True, imm=0, deps=_d(push_next=True)))
        insns.append(Store(MemType.OUT, 0, out + 16 * s, 1, 16, 16, deps=_d(pop_prev=True, push_prev=True)))
    insns.append(Finish(deps=_d(pop_next=True)))
    addr, count = img.program(insns)
    return img, addr, count


def main() -> None:
    rng = np.random.default_rng(0)
    cfg = isa.HwConfig.from_preset("pynq-z1")

    img, addr, n = mixed_stream(cfg, 3000, rng)
    sim = Simulator(cfg, replay=False)  # the timing engine on every run
    sim.run(img.dram.copy(), addr, n)  # warm the decode/plan caches
    dram = img.dram.copy()
    t0 = time.perf_counter()
    res = sim.run(dram, addr, n)
    mixed_s = time.perf_counter() - t0
    ips, mixed_n = n / mixed_s, n
    sim = Simulator(cfg)  # a program run again replays its recorded timeline (simulator/replay.py)
    sim.run(img.dram.copy(), addr, n)
    dram = img.dram.copy()
    t0 = time.perf_counter()
    again = sim.run(dram, addr, n)
    replay_ips = n / (time.perf_counter() - t0)
    assert again.cycles == res.cycles
    print(f"mixed stream: {n} instructions, {res.cycles} cycles, {mixed_s:.3f} s -> {ips:,.0f} instructions/s "
          f"(timing engine); {replay_ips:,.0f} instructions/s run again (replayed timeline)")

    M = K = N = 1024
    # full-K tiles (32 rows x 64 k-blocks x 16 n-blocks): each weight tile loads once and serves 32 row tiles
    img, addr, n, A, B, c0 = matmul_stream(cfg, M, K, N, rng)
    af, bf = A.astype(np.float64), B.astype(np.float64)
    np.matmul(af, bf)  # warm BLAS
    best_np, best_sim = float("inf"), float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        ref = np.matmul(af, bf)
        best_np = min(best_np, time.perf_counter() - t0)
        dram = img.dram.copy()
        sim = Simulator(cfg)
        t0 = time.perf_counter()
        res = sim.run(dram, addr, n)
        best_sim = min(best_sim, time.perf_counter() - t0)
    got = dram[c0 * cfg.out_elem_bytes:(c0 + M * N // cfg.block_out) * cfg.out_elem_bytes].view(np.int8)
    ok = bool(np.array_equal(got.reshape(M, N), ref.astype(np.int64).astype(np.int8)))
    ratio = best_sim / best_np
    prof = res.profile
    print(f"gemm {M}x{K}x{N}: {n} instructions, {res.cycles} cycles, utilization {prof['utilization']:.3f}; "
          f"simulator {best_sim * 1e3:.1f} ms, numpy float64 matmul {best_np * 1e3:.1f} ms, ratio {ratio:.2f}, "
          f"result {'matches' if ok else 'MISMATCH'}")
    print(json.dumps({"instructions_per_s": round(ips, 1), "replay_instructions_per_s": round(replay_ips, 1),
                      "gemm_ratio_vs_numpy": round(ratio, 3),
                      "gemm_sim_s": round(best_sim, 4), "gemm_numpy_s": round(best_np, 4),
                      "gemm_cycles": res.cycles, "gemm_correct": ok, "mixed_instructions": mixed_n}))


if __name__ == "__main__":
    main()
