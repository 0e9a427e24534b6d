"""Benchmark whole models: ResNet-18 (and MobileNetV2) 1x3x224x224 int8 on pynq-z1.

Per model, in the same run: onnxruntime ``quantize_static`` QDQ int8 model (7-bit weights),
``build`` wall time, a first run (the simulator backend compiles each layer's kernel lazily
on first use) and a second, cached run, onnxruntime running the same int8 model, and the
cosine similarity of the logits. The last output line is one JSON object.

    python benchmarks/bench_models.py [--target sim|ref] [--config pynq-z1] [--models resnet18,mobilenet_v2]
                                      [--dwmac on|off|both]

``compile_wall_s`` = build + lazy kernel compilation (first run minus the cached run);
``sim_wall_s`` = the cached run (simulation only); ``first_run_wall_s`` is reported too.

``conv_utilization`` = the cycles the conv layers would take at their tensor intrinsic's peak (GEMM:
BATCH x BLOCK_IN x BLOCK_OUT MACs per cycle; a depthwise layer on DWMAC: BATCH x BLOCK_OUT) / the cycles
they took, i.e. each layer against its own peak, weighted by time; ``conv_utilization_gemm_peak`` divides
real MACs by the GEMM peak for every layer (a depthwise layer reaches at most 1/BLOCK_IN of it). Before
DWMAC, depthwise layers ran as block-diagonal GEMMs counting their padded MACs, which made the single
old figure this same own-peak one. ``dwmac_utilization`` / ``dwmac_min_layer_utilization``: the depthwise layers against the
DWMAC peak (all together / the worst layer).
"""
from __future__ import annotations

import argparse
import json
import logging
import time

import numpy as np

SHAPE = (1, 3, 224, 224)
CALIBRATION_IMAGES = 4


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def bench_model(name: str, config: str, target: str, seed: int = 0) -> dict:
    """Measure one zoo model; returns the JSON-ready figures."""
    from compiler.executor import build
    from compiler.quant.ort_tools import ort_quantize_static, ort_session
    from compiler.zoo import get_model

    rng = np.random.default_rng(seed)
    calib = [{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(CALIBRATION_IMAGES)]
    x = rng.standard_normal(SHAPE).astype(np.float32)
    t0 = time.perf_counter()
    q = ort_quantize_static(get_model(name), calib, reduce_range=True)
    quantize_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mod = build(q, config, target=target, progress=False)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mod(input=x)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = mod(input=x)
    sim_s = time.perf_counter() - t0
    sess = ort_session(q)
    sess.run(None, {"input": x})  # warm-up
    t0 = time.perf_counter()
    ref = sess.run(None, {"input": x})[0]
    ort_s = time.perf_counter() - t0
    s = mod.profile_summary()
    acc = [r for r in mod.profile() if r["target"] == "accel"]
    conv = [r for r in acc if r["op"] == "AccelConv2D"]
    conv_cycles = sum(r["cycles"] for r in conv)
    peak = _macs_per_cycle(mod.compiled.config)
    cfg = mod.compiled.config
    own = {"gemm": peak, "dwmac": int(cfg.batch * cfg.block_out)}  # each intrinsic's MACs per cycle
    # cycles each layer would need at its intrinsic's peak, summed (= padded MACs / GEMM peak before DWMAC)
    peak_cycles = sum(r["macs"] / own.get(r.get("intrinsic") or "gemm", peak) for r in conv)
    clock = float(getattr(mod.compiled.config, "clock_mhz", 100.0))
    return {
        "model": name, "target": target, "cycles": int(s["accel_cycles"]),
        "latency_ms": s["accel_cycles"] / (clock * 1e3), "clock_mhz": clock,
        "conv_utilization": peak_cycles / conv_cycles if conv_cycles else 0.0,
        "conv_utilization_gemm_peak": sum(r["macs"] for r in conv) / (peak * conv_cycles) if conv_cycles else 0.0,
        "dwmac_layers": sum(r.get("intrinsic") == "dwmac" for r in conv),
        "dwmac_utilization": (sum(r["macs"] for r in conv if r.get("intrinsic") == "dwmac")
                              / sum(own["dwmac"] * r["cycles"] for r in conv if r.get("intrinsic") == "dwmac")
                              if any(r.get("intrinsic") == "dwmac" for r in conv) else None),
        "dwmac_min_layer_utilization": min((r["macs"] / (own["dwmac"] * r["cycles"]) for r in conv
                                            if r.get("intrinsic") == "dwmac"), default=None),
        "accel_layers": s["accel_layers"], "cpu_layers": s["cpu_layers"], "cpu_host_ms": s["cpu_time_ms"],
        "compile_wall_s": build_s + max(0.0, first_s - sim_s), "build_wall_s": build_s,
        "first_run_wall_s": first_s, "sim_wall_s": sim_s, "ort_wall_s": ort_s, "ort_quantize_wall_s": quantize_s,
        "sim_over_ort": sim_s / ort_s if ort_s else None, "cosine_vs_ort": cosine(ours, ref),
    }


def _macs_per_cycle(cfg) -> int:
    derived = getattr(cfg, "macs_per_cycle", None)
    return int(derived) if derived else int(cfg.batch * cfg.block_in * cfg.block_out)


def main(argv: list[str] | None = None) -> int:
    from compiler.executor import available_accel_backends

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help="accelerator backend (default: sim when registered, else ref)")
    ap.add_argument("--config", default="pynq-z1")
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--dwmac", choices=("on", "off", "both"), default="on",
                    help="depthwise convs on the dwmac intrinsic (off: block-diagonal GEMMs; both: side by side)")
    args = ap.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    have = available_accel_backends()
    target = args.target or ("sim" if "sim" in have else "ref")
    note = "" if target == "sim" else f"target {target!r}: no cycle counts; time figures are the numpy reference's"
    print(f"bench_models: target {target} (registered: {have}), config {args.config}" + (f"; {note}" if note else ""))
    from compiler.backend.accel.backend import SimAccelBackend

    results = {}
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.dwmac]
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        for use in modes:
            SimAccelBackend.use_dwmac = use
            r = bench_model(name, args.config, target)
            r["dwmac"] = use
            if len(modes) > 1 and not use:
                results[f"{name}_block_diagonal"] = r
            else:
                results[name] = r
            print(f"  {name}{'' if use else ' (depthwise as block-diagonal GEMM)'}: {r['cycles']:,} cycles = "
                  f"{r['latency_ms']:.2f} ms @ {r['clock_mhz']:g} MHz, conv util {r['conv_utilization']:.3f} "
                  f"(GEMM peak {r['conv_utilization_gemm_peak']:.3f}), compile {r['compile_wall_s']:.1f} s, "
                  f"sim {r['sim_wall_s']:.1f} s, ort {r['ort_wall_s'] * 1e3:.1f} ms, cosine {r['cosine_vs_ort']:.6f}",
                  flush=True)
    SimAccelBackend.use_dwmac = True
    first = results.get("resnet18") or next(iter(results.values()))
    out = dict(first)  # ResNet-18's figures at the top level
    out.update(config=args.config, note=note, models={k: v for k, v in results.items() if v is not first})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
