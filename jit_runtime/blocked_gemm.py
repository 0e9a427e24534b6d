"""A blocked GEMM ``C = clip((A @ W^T) >> shift)`` built through the runtime, with 1 or 2 virtual threads.

Output tiles of ``tile_n`` batch rows x ``tile_m`` output blocks; the reduction is done in
chunks of ``tile_k`` input blocks. With ``virtual_threads=2`` consecutive load steps use
alternate halves of the INP/WGT scratchpads and consecutive tiles alternate ACC halves,
so the load of step s+1 overlaps the GEMM of step s (decoupled access-execute). Tokens:

* load -> compute after each load step; compute -> load after each GEMM (a load step
  reuses a half only after the GEMM of the step ``virtual_threads`` earlier);
* compute -> store after each tile's epilogue; store -> compute after each store (a tile
  resets its ACC half only after the store of the tile ``virtual_threads`` earlier).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from isa import alu_evaluate
from isa.encoding import int_dtype
from jit_runtime.command_queue import CommandQueue
from jit_runtime.layout import pack, unpack
from jit_runtime.program import Program

if TYPE_CHECKING:
    from isa import HwConfig


@dataclass(frozen=True)
class GemmPlan:
    """Problem size (elements) and tiling (scratchpad elements) of a blocked GEMM."""

    n: int
    k: int
    m: int
    tile_n: int  # rows of batch groups per tile
    tile_m: int = 4  # output blocks per tile
    tile_k: int | None = None  # input blocks per reduction step (None: all of K)
    shift: int = 8
    relu: bool = False


def default_plan(cfg: "HwConfig", small: bool = False) -> GemmPlan:
    """256x256x256 with tiles of 64 rows x 4 blocks on pynq-sized configs; 32^3 on small ones (e.g. ``tiny``)."""
    if small or cfg.inp_depth < 1024:
        size = 8 * cfg.block_in
        return GemmPlan(size, size, size, tile_n=max(1, 8 // cfg.batch), tile_m=4, tile_k=4)
    return GemmPlan(256, 256, 256, tile_n=max(1, 64 // cfg.batch), tile_m=4, tile_k=None)


def reference(a: np.ndarray, w: np.ndarray, cfg: "HwConfig", shift: int, relu: bool) -> np.ndarray:
    """numpy reference: int32 accumulation (wrapping), arithmetic shift, clip, int8."""
    acc = alu_evaluate("ADD", a.astype(np.int64) @ w.astype(np.int64).T, 0, cfg.acc_width)
    lo = 0 if relu else -(1 << (cfg.out_width - 1))
    hi = (1 << (cfg.out_width - 1)) - 1
    x = alu_evaluate("SHR", acc, shift, cfg.acc_width)
    x = alu_evaluate("MIN", alu_evaluate("MAX", x, lo, cfg.acc_width), hi, cfg.acc_width)
    return x.astype(int_dtype(cfg.out_width))


def _check_plan(cfg: "HwConfig", p: GemmPlan, vt: int) -> tuple[int, int, int, int]:
    if vt not in (1, 2):
        raise ValueError(f"virtual_threads={vt} must be 1 or 2")
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    if p.n % b or p.k % bi or p.m % bo:
        raise ValueError(f"GEMM {p.n}x{p.k}x{p.m} must be multiples of batch {b}, block_in {bi}, block_out {bo}")
    nb, kb, mb = p.n // b, p.k // bi, p.m // bo
    tk = kb if p.tile_k is None else p.tile_k
    if nb % p.tile_n or mb % p.tile_m or kb % tk:
        raise ValueError(f"tiles {p.tile_n}x{p.tile_m}x{tk} must divide the blocked sizes {nb}x{mb}x{kb}")
    need = {"inp": p.tile_n * tk, "wgt": p.tile_m * tk, "acc": p.tile_n * p.tile_m}
    for mem, n in need.items():
        if vt * n > cfg.depth(mem):
            raise ValueError(f"a tile needs {n} {mem} elements; {vt} virtual thread(s) need {vt * n} "
                             f"but the {mem} scratchpad holds {cfg.depth(mem)}: use smaller tiles")
    return nb, kb, mb, tk


def build_blocked_gemm(cfg: "HwConfig", a: np.ndarray, w: np.ndarray, plan: GemmPlan, *,
                       virtual_threads: int = 1, name: str | None = None) -> tuple[Program, dict[str, np.ndarray]]:
    """The program for ``a`` (N, K) int8 times ``w`` (M, K) int8, and its expected packed output ``c``."""
    vt = virtual_threads
    nb, kb, mb, tk = _check_plan(cfg, plan, vt)
    tn, tm = plan.tile_n, plan.tile_m
    q = CommandQueue(cfg)
    a_buf = q.alloc((nb, kb, cfg.batch, cfg.block_in), np.int8, name="a")
    w_buf = q.alloc((mb, kb, cfg.block_out, cfg.block_in), np.int8, name="w")
    c_buf = q.alloc((nb, mb, cfg.batch, cfg.block_out), np.int8, name="c")
    a_buf.copy_from(pack(a.astype(np.int8), cfg.batch, cfg.block_in))
    w_buf.copy_from(pack(w.astype(np.int8), cfg.block_out, cfg.block_in))
    sizes = {"inp": tn * tk, "wgt": tm * tk, "acc": tn * tm}
    lo = 0 if plan.relu else -(1 << (cfg.out_width - 1))
    hi = (1 << (cfg.out_width - 1)) - 1

    step = 0
    tiles = [(i, j) for i in range(nb // tn) for j in range(mb // tm)]
    for t, (ti, tj) in enumerate(tiles):
        acc0 = (t % vt) * sizes["acc"]
        for kc in range(kb // tk):
            inp0, wgt0 = (step % vt) * sizes["inp"], (step % vt) * sizes["wgt"]
            if step >= vt:
                q.dep_pop("compute", "load")
            q.load_2d("inp", inp0, a_buf, ti * tn * kb + kc * tk, x_size=tk, y_size=tn, x_stride=kb)
            q.load_2d("wgt", wgt0, w_buf, tj * tm * kb + kc * tk, x_size=tk, y_size=tm, x_stride=kb)
            q.dep_push("load", "compute")
            if kc == 0:
                if t >= vt:
                    q.dep_pop("store", "compute")
                q.push_gemm(_reset_kernel(acc0, tn * tm), signature=("reset", acc0, tn * tm), reset=True)
            q.dep_pop("load", "compute")
            q.push_gemm(_gemm_kernel(acc0, inp0, wgt0, tn, tm, tk), signature=("gemm", acc0, inp0, wgt0, tn, tm, tk))
            q.dep_push("compute", "load")
            step += 1
        epi = _alu_kernel(acc0, tn * tm)
        for op, imm in (("SHR", plan.shift), ("MAX", lo), ("MIN", hi)):
            q.push_alu(epi, op=op, use_imm=True, imm=imm, signature=("epilogue", acc0, tn * tm))
        q.dep_push("compute", "store")
        q.dep_pop("compute", "store")
        q.store_2d(acc0, c_buf, ti * tn * mb + tj * tm, x_size=tm, y_size=tn, x_stride=mb)
        q.dep_push("store", "compute")

    expected = {"c": pack(reference(a, w, cfg, plan.shift, plan.relu), cfg.batch, cfg.block_out)}
    prog = q.finalize(name=name or f"blocked_gemm_{plan.n}x{plan.k}x{plan.m}_vt{vt}", expected=expected)
    return prog, expected


def _reset_kernel(acc0: int, n: int):
    def finit(k):
        k.loop_begin(n, dst_factor=1)
        k.push(acc0, 0, 0)
        k.loop_end()
    return finit


def _gemm_kernel(acc0: int, inp0: int, wgt0: int, tn: int, tm: int, tk: int):
    """acc[r, j] += sum_k inp[r, k] x wgt[j, k]^T: rows outer, output blocks inner, one uop per k."""
    def finit(k):
        k.loop_begin(tn, dst_factor=tm, src_factor=tk)
        k.loop_begin(tm, dst_factor=1, wgt_factor=tk)
        for kk in range(tk):
            k.push(acc0, inp0 + kk, wgt0 + kk)
        k.loop_end()
        k.loop_end()
    return finit


def _alu_kernel(acc0: int, n: int):
    def finit(k):
        k.loop_begin(n, dst_factor=1, src_factor=1)
        k.push(acc0, acc0)
        k.loop_end()
    return finit


def random_operands(plan: GemmPlan, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, size=(plan.n, plan.k), dtype=np.int8)
    w = rng.integers(-128, 128, size=(plan.m, plan.k), dtype=np.int8)
    return a, w


def blocked_gemm(cfg: "HwConfig", plan: GemmPlan | None = None, *, virtual_threads: int = 1,
                 seed: int = 0) -> tuple[Program, dict[str, np.ndarray]]:
    """The blocked GEMM on random int8 operands (``default_plan(cfg)`` unless given)."""
    plan = plan or default_plan(cfg)
    a, w = random_operands(plan, seed)
    return build_blocked_gemm(cfg, a, w, plan, virtual_threads=virtual_threads)


def unpack_output(c: np.ndarray) -> np.ndarray:
    """The (N, M) matrix from the packed output buffer."""
    return unpack(c)
