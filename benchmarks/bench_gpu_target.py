"""Whole models on the ``cuda`` target: correctness against the references and per-image latency.

Models: the zoo's full-size ResNet-18 (and optionally MobileNetV2), 1x3x224x224. Per model:

* fp32: ``build(model, target="cuda")`` (operator-library kernels, PTX from llvmlite's NVPTX backend; with
  ``--tuning-log``, the schedules a ``vta tune --target cuda`` log keeps: ``tuned_tasks``) vs onnxruntime's CPU
  session of the same float model; ``max_rel_err`` = max |ours - ort| / max |ort|.
* int8: the model quantized by onnxruntime ``quantize_static`` (QDQ, default arguments) built for
  ``cuda``, checked bit for bit against our ``ref`` integer executor (``mismatches``).

Latency: min over ``--repeat`` runs after a warm-up, next to onnxruntime's CUDA provider when the
installed onnxruntime has it (``ort_cuda_ms``; else null) and its CPU provider (``ort_cpu_ms``, all cores).
``device_profile`` (fp32 and int8): the device's own time per node (CUDA events around each node's operations in
a replayed run, ``Module.device_timing``): ``device_ms`` (their sum) and the slowest nodes; ``timed_on_device``
false: no run was replayed and the times are the host's clock per node (``not_replayed`` says why: the nodes
that did host work, or what changed between runs).
Needs an NVIDIA GPU and cuda-python; without a GPU it prints ``{"gpu": false}`` and exits 0, unless
``VTA_CUDA_DEVICE=emulate`` is set: then the same runs go through the emulated device (this CPU plays the GPU,
serially: the errors and mismatches mean what they mean on a GPU, the times are the CPU's; use --repeat 1).
``device`` names the device (``{"name": "NVIDIA H200", "arch": "sm_90"}``). The last line is one JSON object.

    python benchmarks/bench_gpu_target.py [--models resnet18,mobilenet_v2] [--repeat 10] [--fp32-only]
        [--tuning-log cuda.log]
"""
from __future__ import annotations

import argparse
import json
import logging
import time
import warnings

import numpy as np

SHAPE = (1, 3, 224, 224)


def _min_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def _ort(model, provider: str):
    import onnxruntime as ort

    if provider not in ort.get_available_providers():
        return None
    return ort.InferenceSession(model.SerializeToString(), providers=[provider])


def device_profile(mod, x: np.ndarray, top: int = 8) -> dict:
    """Where the device's time goes: a replayed run with ``device_timing`` (each node's operations timed by the
    device between events), its sum and its ``top`` slowest nodes; where no run could be replayed (a node with
    host work), ``timed_on_device`` is false and the times are the host's wall clock per node. An error is
    reported, not raised (the latency figures stand without it)."""
    try:
        mod.set_input("input", x)
        mod.time_on_device(4)  # a fresh module replays from its 4th run
        rows = mod.profile()
        slow = sorted(rows, key=lambda r: -r["time_ms"])[:top]
        out = {"timed_on_device": bool(mod.timed_on_device), "device_ms": sum(r["time_ms"] for r in rows),
               "top": [[r["name"], r["op"], round(r["time_ms"], 4)] for r in slow]}
        if not mod.timed_on_device:
            out["not_replayed"] = mod.replay_refusal
        return out
    except Exception as exc:  # noqa: BLE001 - a diagnostic: the measured latency above is kept
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        mod.device_timing = False


def bench_model(name: str, repeat: int, seed: int = 0, int8: bool = True, tuning_log: str | None = None) -> dict:
    """fp32 (built with ``tuning_log`` where given) and, with ``int8``, the QDQ model (see the module docstring)."""
    from compiler.executor import build
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import get_model

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    model = get_model(name)
    t0 = time.perf_counter()
    mod = build(model, target="cuda", progress=False, tuning_log=tuning_log)
    build_s = time.perf_counter() - t0
    cpu = _ort(model, "CPUExecutionProvider")
    ref = cpu.run(None, {"input": x})[0]
    out = np.asarray(mod(input=x))
    gpu_ort = _ort(model, "CUDAExecutionProvider")
    res = {"fp32": {
        "cuda_ms": _min_ms(lambda: mod(input=x), repeat),
        "ort_cpu_ms": _min_ms(lambda: cpu.run(None, {"input": x}), repeat),
        "ort_cuda_ms": None if gpu_ort is None else _min_ms(lambda: gpu_ort.run(None, {"input": x}), repeat),
        "max_rel_err": float(np.abs(out - ref).max() / np.abs(ref).max()), "build_s": build_s,
        "reference": "onnxruntime fp32 (CPU provider)", "device_profile": device_profile(mod, x),
        "tuning_log": tuning_log, "tuned_tasks": mod.compiled.stats.get("tuned_tasks", 0)}}
    if not int8:
        return res
    calib = [{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(model, calib, per_channel=False, defaults=True)
        t0 = time.perf_counter()
        qmod = build(q, target="cuda", progress=False)
        build_s = time.perf_counter() - t0
        refmod = build(q, target="ref", progress=False, fuse_residual=False)
    got, exact = np.asarray(qmod(input=x)), np.asarray(refmod(input=x))
    qcpu = _ort(q, "CPUExecutionProvider")
    res["int8"] = {"cuda_ms": _min_ms(lambda: qmod(input=x), repeat),
                   "ort_cpu_ms": _min_ms(lambda: qcpu.run(None, {"input": x}), repeat),
                   "mismatches": int(np.count_nonzero(got != exact)), "build_s": build_s,
                   "reference": "ref integer executor", "device_profile": device_profile(qmod, x)}
    return res


def _print_profile(what: str, prof: dict) -> None:
    if "top" in prof:
        where = ("on the device" if prof["timed_on_device"]
                 else f"on the host's clock (not replayed: {prof.get('not_replayed')})")
        print(f"  {what} {where}: {prof['device_ms']:.2f} ms over the nodes; slowest "
              + ", ".join(f"{n} ({op}) {ms:.3f}" for n, op, ms in prof["top"][:4]), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--fp32-only", action="store_true", help="skip the int8 (QDQ) builds")
    ap.add_argument("--tuning-log", help="build the fp32 models with this log of `vta tune --target cuda`")
    args = ap.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    from compiler.backend.cuda.device import device_kind, get_device, gpu_present

    if device_kind() == "gpu" and not gpu_present():
        print("bench_gpu_target: no GPU on this machine (no /dev/nvidia*); nothing measured "
              "(VTA_CUDA_DEVICE=emulate checks the values on this CPU)")
        print(json.dumps({"gpu": False}))
        return 0
    dev = get_device()
    device = {"name": dev.name, "arch": dev.arch}
    print(f"  device: {device['name']} ({device['arch']})", flush=True)
    models = {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        r = models[name] = bench_model(name, args.repeat, int8=not args.fp32_only, tuning_log=args.tuning_log)
        f = r["fp32"]
        print(f"  {name} fp32: cuda {f['cuda_ms']:.2f} ms, ORT CPU {f['ort_cpu_ms']:.2f} ms, ORT CUDA "
              f"{f['ort_cuda_ms']}, max rel err {f['max_rel_err']:.2e}", flush=True)
        _print_profile(f"{name} fp32", f["device_profile"])
        if "int8" in r:
            i = r["int8"]
            print(f"  {name} int8: cuda {i['cuda_ms']:.2f} ms, ORT CPU {i['ort_cpu_ms']:.2f} ms, "
                  f"mismatches vs ref {i['mismatches']}", flush=True)
            _print_profile(f"{name} int8", i["device_profile"])
    summary = {"gpu": device_kind() == "gpu", "device": device, "repeat": args.repeat, "models": models,
               "fp32_max_rel_err": max(m["fp32"]["max_rel_err"] for m in models.values()),
               "int8_mismatches": (None if args.fp32_only else
                                   sum(m["int8"]["mismatches"] for m in models.values()))}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
