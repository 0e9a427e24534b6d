"""Whole models on the ``llvm`` target vs onnxruntime, side by side, same thread count.

Models: the zoo's full-size ResNet-18 and MobileNetV2 (1x3x224x224). Per model:

* fp32: ``build(model, target="llvm")`` (operator-library kernels, float32) vs an onnxruntime CPU
  session of the same float model (default graph optimizations); reference = onnxruntime;
  ``max_rel_err`` = max |ours - ort| / max |ort|.
* int8: the model quantized by onnxruntime ``quantize_static`` (QDQ, default arguments after
  ``quant_pre_process``, as ``bench_offload`` does) built for ``llvm`` vs onnxruntime on the same QDQ
  model; reference = our ``ref`` integer executor (the same lowered graph on numpy), checked bit for bit
  (``mismatches``); ``cosine_vs_ort`` is informative (ORT's fused int8 kernels round differently).

Timing: both sides run with ``--threads`` threads (ORT ``intra_op_num_threads``; our parallel loops'
thread pool), alternately ``--repeat`` times after a warm-up, with a 300 ms pause before each run (ORT's
worker threads spin for a while after a run and would slow whatever runs next); per-image latency = min
over runs (the machine is shared: ``load_before``/``load_after`` are the 1-minute load averages). Also the 512^3 fp32
matmul in TE scheduled for the CPU vs numpy (GFLOPS). The last line is one JSON object.

    python benchmarks/bench_cpu_target.py [--models resnet18,mobilenet_v2] [--repeat 7] [--threads 2]

``cpu`` in the JSON says what each side ran on: onnxruntime picks its kernels from this machine's instructions
(CPUID), ours are compiled for ``$VTA_LLVM_CPU`` (default the host). ``VTA_LLVM_CPU=x86-64-v3`` on an AVX-512
machine times our AVX2 code against onnxruntime's AVX-512 code: a pessimistic bound for an AVX2 machine, where
onnxruntime runs its AVX2 kernels too.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
import warnings

import numpy as np

SHAPE = (1, 3, 224, 224)
PAUSE_S = 0.3  # before each timed run: onnxruntime's worker threads keep a core busy after a run and slow the next
# one: our ResNet-18 (2 threads) took 30.6 ms 50 ms after an ORT run, 26.9 ms 300 ms after, 26.3 ms with no ORT run


def _ort_session(model, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _side_by_side(ours, sess, x: np.ndarray, repeat: int) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Warm up, then alternate our module and the ORT session; min latency (ms) of each and the outputs."""
    out = ours(input=x)
    ref = sess.run(None, {"input": x})[0]
    t_ours, t_ort = [], []
    for _ in range(repeat):
        time.sleep(PAUSE_S)
        t0 = time.perf_counter()
        ours(input=x)
        t_ours.append(time.perf_counter() - t0)
        time.sleep(PAUSE_S)
        t0 = time.perf_counter()
        sess.run(None, {"input": x})
        t_ort.append(time.perf_counter() - t0)
    return min(t_ours) * 1e3, min(t_ort) * 1e3, np.asarray(out), np.asarray(ref)


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def bench_model(name: str, repeat: int, threads: int, seed: int = 0) -> dict:
    from compiler.executor import build
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import get_model

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    model = get_model(name)
    res: dict = {}
    t0 = time.perf_counter()
    mod = build(model, target="llvm", progress=False)
    build_s = time.perf_counter() - t0
    ours, ort_ms, out, ref = _side_by_side(mod, _ort_session(model, threads), x, repeat)
    res["fp32"] = {"llvm_ms": ours, "ort_ms": ort_ms, "llvm_over_ort": ours / ort_ms,
                   "max_rel_err": float(np.abs(out - ref).max() / np.abs(ref).max()), "build_s": build_s,
                   "reference": "onnxruntime fp32"}
    calib = [{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
        t0 = time.perf_counter()
        qmod = build(q, target="llvm", progress=False)
        build_s = time.perf_counter() - t0
        refmod = build(q, target="ref", progress=False, fuse_residual=False)
    ours, ort_ms, out, ort_out = _side_by_side(qmod, _ort_session(q, threads), x, repeat)
    exact = np.asarray(refmod(input=x))
    res["int8"] = {"llvm_ms": ours, "ort_ms": ort_ms, "llvm_over_ort": ours / ort_ms,
                   "mismatches": int(np.count_nonzero(out != exact)), "max_abs_diff_vs_ref": float(np.abs(out - exact).max()),
                   "cosine_vs_ort": cosine(out, ort_out), "build_s": build_s, "reference": "ref integer executor"}
    return res


def matmul_figure(threads: int) -> dict:
    """The 512^3 fp32 matmul in TE scheduled for the CPU vs numpy at ``threads`` (``bench_te_matmul.run``)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_te_matmul import run

    res = run(512, (threads,))
    return {**res["by_threads"][str(threads)], "size": 512}


def cpu_figure() -> dict:
    """What each side ran: this machine's CPU (name, the highest x86-64 level it has, its int8 dot-product
    instructions) and the CPU our kernels were compiled for ($VTA_LLVM_CPU / $VTA_LLVM_FEATURES: a lower level
    than the host's times our side as an older CPU would run it, against onnxruntime on this one's instructions)."""
    from compiler.backend.llvm.host import (LEVELS, float_lanes, host_cpu, int8_dot, make_target, target_cpu,
                                            vector_bits)

    name, enabled = host_cpu()
    level = max((lv for lv, fs in LEVELS.items() if fs <= enabled), key=lambda lv: len(LEVELS[lv]), default=None)
    host, ours = make_target("host"), target_cpu()
    return {"host": name, "host_level": level, "host_vector_bits": vector_bits(host), "host_int8_dot": int8_dot(host),
            "llvm_cpu": ours.cpu, "llvm_float_lanes": float_lanes(ours), "llvm_int8_dot": int8_dot(ours)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    os.environ["VTA_NUM_THREADS"] = str(args.threads)
    load_before = os.getloadavg()[0]
    cpu = cpu_figure()
    print(f"bench_cpu_target: {args.threads} threads each side, min of {args.repeat} alternating runs, "
          f"load average {load_before:.2f} on {os.cpu_count()} CPUs; host {cpu['host']} ({cpu['host_level']}), "
          f"our kernels for {cpu['llvm_cpu']} ({32 * cpu['llvm_float_lanes']}-bit vectors, int8 dot "
          f"{cpu['llvm_int8_dot'] or 'none: widening multiplies'})")
    models = {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        r = bench_model(name, args.repeat, args.threads)
        models[name] = r
        for kind in ("fp32", "int8"):
            v = r[kind]
            err = f"max rel err {v['max_rel_err']:.2e}" if kind == "fp32" else f"mismatches vs ref {v['mismatches']}"
            print(f"  {name} {kind}: llvm {v['llvm_ms']:.1f} ms, onnxruntime {v['ort_ms']:.1f} ms, "
                  f"ratio {v['llvm_over_ort']:.2f}, {err}", flush=True)
    mm = matmul_figure(args.threads)
    print(f"  matmul 512^3 ({args.threads} threads): {mm}")
    load_after = os.getloadavg()[0]
    summary = {"threads": args.threads, "repeat": args.repeat, "load_before": load_before, "load_after": load_after,
               "cpu": cpu, "matmul_512": mm, "models": models}
    if "resnet18" in models:
        summary["resnet18_fp32_llvm_over_ort"] = models["resnet18"]["fp32"]["llvm_over_ort"]
    summary["fp32_max_rel_err"] = max(m["fp32"]["max_rel_err"] for m in models.values())
    summary["int8_mismatches"] = sum(m["int8"]["mismatches"] for m in models.values())
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
