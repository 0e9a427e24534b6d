"""Benchmark offload of ORT-quantized models: how much runs on the accelerator, how fast, how exact.

Models: the zoo's ResNet-18 and MobileNetV2 and the MobileNetV3-style model (HardSwish,
squeeze-excite, residual Add), 1x3x224x224, each quantized by onnxruntime ``quantize_static``
with its DEFAULT arguments (QDQ, per-tensor int8 weights, asymmetric activations) and again with
``per_channel=True``. BatchNorm is folded first with ORT's ``quant_pre_process`` (as exporters
do for inference graphs). Per model and quantization: ``accel_mac_fraction`` (real MACs),
``host_ops`` (count by type), ``float_host_ops_between_accel``, ``cycles`` and ``latency_ms``
(accelerator at the config's clock), ``host_ms`` (measured numpy host time), ``end_to_end_ms``,
``cosine_vs_ort`` (onnxruntime at ORT_ENABLE_BASIC on the same QDQ model: DQ -> float op -> Q).
The last line is one JSON object.

    python benchmarks/bench_offload.py [--models resnet18,mobilenet_v2,mobilenet_v3] [--config pynq-z1]
"""
from __future__ import annotations

import argparse
import json
import logging
import time
import warnings

import numpy as np

SHAPE = (1, 3, 224, 224)
CALIBRATION_IMAGES = 4


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def ort_default_quantize(model, calibration: list[dict], per_channel: bool):
    """``quantize_static`` with default arguments (``per_channel`` aside) after ``quant_pre_process``."""
    from compiler.quant.ort_tools import ort_quantize_static

    return ort_quantize_static(model, calibration, per_channel=per_channel, defaults=True)


def bench_one(name: str, per_channel: bool, config: str, target: str, seed: int = 0) -> dict:
    import onnxruntime as ort

    from compiler.executor import build
    from compiler.graph.offload import HostFallbackWarning, float_host_ops_between_accel
    from compiler.zoo import get_model

    rng = np.random.default_rng(seed)
    calib = [{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(CALIBRATION_IMAGES)]
    x = rng.standard_normal(SHAPE).astype(np.float32)
    q = ort_default_quantize(get_model(name), calib, per_channel)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HostFallbackWarning)
        mod = build(q, config, target=target, progress=False)
    build_s = time.perf_counter() - t0
    mod(input=x)  # first run compiles each layer's kernel
    ours = mod(input=x)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    ref = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    s = mod.profile_summary()
    clock = float(getattr(mod.compiled.config, "clock_mhz", 100.0))
    return {"accel_mac_fraction": s["accel_mac_fraction"], "host_ops": s["host_ops"],
            "float_host_ops_between_accel": float_host_ops_between_accel(mod.graph),
            "accel_layers": s["accel_layers"], "cycles": int(s["accel_cycles"]),
            "latency_ms": s["accel_cycles"] / (clock * 1e3), "host_ms": s["cpu_time_ms"],
            "end_to_end_ms": s["end_to_end_ms"], "cosine_vs_ort": cosine(ours, ref), "build_wall_s": build_s,
            "fallback_warnings": [str(w.message) for w in caught if issubclass(w.category, HostFallbackWarning)]}


def main(argv: list[str] | None = None) -> int:
    from compiler.executor import available_accel_backends

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,mobilenet_v3")
    ap.add_argument("--config", default="pynq-z1")
    ap.add_argument("--target", default=None, help="accelerator backend (default: sim when registered, else ref)")
    args = ap.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    target = args.target or ("sim" if "sim" in available_accel_backends() else "ref")
    print(f"bench_offload: target {target}, config {args.config}, ORT quantize_static defaults (+ per-channel)")
    results: dict = {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        for quant, pc in (("per_tensor", False), ("per_channel", True)):
            r = bench_one(name, pc, args.config, target)
            results[f"{name}/{quant}"] = r
            print(f"  {name} {quant}: MAC fraction {r['accel_mac_fraction']:.4f}, {r['cycles']:,} cycles = "
                  f"{r['latency_ms']:.2f} ms, host {r['host_ms']:.1f} ms, cosine {r['cosine_vs_ort']:.6f}, "
                  f"host ops {r['host_ops']}", flush=True)
    worst = {"min_accel_mac_fraction": min(r["accel_mac_fraction"] for r in results.values()),
             "min_cosine_vs_ort": min(r["cosine_vs_ort"] for r in results.values())}
    r18 = [r for k, r in results.items() if k.startswith("resnet18/")]
    if r18:
        worst["resnet18_max_latency_ms"] = max(r["latency_ms"] for r in r18)
        worst["resnet18_float_host_ops_between_accel"] = sum(len(r["float_host_ops_between_accel"]) for r in r18)
    print(json.dumps({"config": args.config, "target": target, **worst, "models": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
