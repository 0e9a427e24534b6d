"""A float32 matmul written in TE and compiled for this CPU vs numpy (OpenBLAS), side by side.

``compiler.backend.llvm.matmul.matmul_schedule`` packs A and B into panels, accumulates 6 x 16 tiles in
registers (AVX2: 12 ymm accumulators, FMA), and runs the tiles on the runtime thread pool. Both sides
use the same thread count (numpy's BLAS limited through threadpoolctl); blocks of ``--repeat`` runs
alternate between the two, ``--rounds`` times, with a pause between blocks (OpenBLAS's threads spin after
a call and would steal a core from the next block), and the best run of each side is reported (the build
machine is shared: the minimum filters other load). Reported: GFLOPS of each and ``te_over_numpy`` (>= 1: TE as fast as numpy) per thread count.
Last line: one JSON object. ``run()`` is the entry point other benchmarks call.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import time

import numpy as np


def _have_threadpoolctl() -> bool:
    return importlib.util.find_spec("threadpoolctl") is not None


def _blas_threads(n: int):
    """A context limiting numpy's BLAS to ``n`` threads (a no-op without threadpoolctl; reported in the result)."""
    if not _have_threadpoolctl():
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")


PAUSE_S = 0.25


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run(size: int = 512, threads: tuple[int, ...] = (1, 2), repeat: int = 20, rounds: int = 8, seed: int = 0) -> dict:
    """Measure the TE matmul and numpy at each thread count; returns a JSON-able dict."""
    import compiler
    from compiler.backend import set_num_threads
    from compiler.backend.llvm.host import host_cpu
    from compiler.backend.llvm.matmul import matmul_schedule

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    s, args = matmul_schedule(size, size, size)
    t0 = time.perf_counter()
    op = compiler.build_op(s, target="llvm", args=args, name="matmul")
    build_s = time.perf_counter() - t0
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = op(a, b)
    rel_err = float(np.abs(out - ref).max() / np.abs(ref).max())
    flop = 2.0 * size ** 3
    res: dict = {"size": size, "cpu": host_cpu()[0], "build_s": round(build_s, 3), "max_rel_err": rel_err,
                 "threadpoolctl": _have_threadpoolctl(), "by_threads": {}}
    for n in threads:
        set_num_threads(n)
        with _blas_threads(n):
            best_te = best_np = float("inf")
            for _ in range(rounds):
                # blocks, not single calls, alternate: OpenBLAS's idle threads busy-wait ~0.1 s after each call and
                # would take a core from the next TE call; the pause lets them (and the TE pool) go idle first
                time.sleep(PAUSE_S)
                best_te = min(best_te, _best(lambda: op(a, b, out=out), repeat))
                time.sleep(PAUSE_S)
                best_np = min(best_np, _best(lambda: np.matmul(a, b), repeat))
        set_num_threads(None)
        res["by_threads"][str(n)] = {"te_gflops": round(flop / best_te / 1e9, 1),
                                     "numpy_gflops": round(flop / best_np / 1e9, 1),
                                     "te_over_numpy": round(best_np / best_te, 3)}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    res = run(args.size, tuple(args.threads), args.repeat, args.rounds)
    for n, r in res["by_threads"].items():
        print(f"{args.size}^3 fp32, {n} thread(s): TE {r['te_gflops']} GFLOPS, numpy {r['numpy_gflops']} GFLOPS, "
              f"ratio {r['te_over_numpy']}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
