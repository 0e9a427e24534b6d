"""Today's models on the accelerator: BERT- and ViT-style encoders, a YOLOv8-style detector, a DBNet-style
text detector and a CRNN/SVTR-style recognizer (``compiler.zoo.modern``: onnx.helper graphs of the public
definitions with seeded weights; nothing downloaded), on the cycle-accurate simulator.

Per model: the float export quantized by the built-in PTQ (4 seeded calibration feeds) -> ``accel_mac_fraction``,
``cosine_ptq_vs_fp32`` (vs onnxruntime fp32 on a fifth feed), ``latency_ms`` (``profile_summary()["end_to_end_ms"]``:
accelerator cycles at the config clock + measured host time), ``sim_wall_s`` (wall time of one ``run()``),
``host_ops``, ``host_layers`` (the HostFallbackWarning's layers); onnxruntime ``quantize_static`` with its
defaults (uint8 asymmetric activations, per-channel weights) built by us -> ``cosine_vs_ort_int8`` (ours vs
onnxruntime running the same QDQ model), ``ort_qdq_accel_mac_fraction``, ``ort_int8_cosine_vs_fp32``
(onnxruntime's own int8 against fp32); for the encoders ``quantize_dynamic`` (MatMulInteger/ConvInteger on the
accelerator) -> ``dynamic_cosine_vs_ort``, ``ort_dynamic_accel_mac_fraction``. ``quantizations`` holds one row per
quantization (``ptq``: cosine vs fp32; ``ort_static``/``ort_dynamic``: cosine vs onnxruntime on the same model;
``ort_dynamic.equals_host_integer_path``: bit-equal to the integer layers run by the host kernels, the ONNX
definition; ``ort_matmulinteger_off_definition``: onnxruntime's own MatMulInteger outputs that differ from that
definition); ``min_accel_mac_fraction`` the lowest of them.

    python benchmarks/bench_modern.py [--models bert,vit,...] [--config pynq-z1] [--target sim]
        [--export torch] [--calibration max|percentile|entropy] [--keep-float Softmax,...]

``--export torch``: bert, vit and recognizer are REAL exports instead (``compiler.zoo.modern_torch``: the
``transformers`` package's BertModel / ViTModel with small configs and a torch CRNN/SVTR-style recognizer,
``torch.onnx`` at opset 17, seeded weights; needs ``pip install 'vta-stack[modern]'``); the other models stay
onnx.helper graphs (``source`` in the JSON says which). ``--calibration`` / ``--keep-float``: the built-in PTQ's
options (``compiler.quant.calibrate.Calibration``); ``precision`` in the JSON is the build's mixed-precision
summary (int8 accelerator layers, integer host ops such as QSoftmax/QLayerNorm/QGelu, float host ops).

The last line is one JSON object: ``{"config", "target", "models": {NAME: {...}}}``. Wall times are noisy on a
loaded machine; cosines, fractions and cycle-based latencies are deterministic.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compiler import build  # noqa: E402
from compiler.graph.offload import HostFallbackWarning  # noqa: E402
from compiler.quant.calibrate import Calibration  # noqa: E402
from compiler.quant.ort_tools import ort_quantize_static, ort_run  # noqa: E402
from compiler.zoo.modern import MODELS, sample_inputs  # noqa: E402

ENCODERS = ("bert", "vit")


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _build(model, config, target, **kw):
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        mod = build(model, config, target=target, progress=False, **kw)
    host = [str(w.message) for w in ws if issubclass(w.category, HostFallbackWarning)]
    return mod, host


def _timed_run(mod, feed):
    t0 = time.perf_counter()
    out = mod.run(feed)[0]
    return out, time.perf_counter() - t0


def quantize_dynamic_model(model):
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "f.onnx", Path(d) / "q.onnx"
        onnx.save(model, str(src))
        quantize_dynamic(str(src), str(dst))
        return onnx.load(str(dst))


def _row(mod, y, want, host: list[str], wall: float) -> dict:
    """One quantization's figures: MAC fraction, cosine vs ``want``, latency, sim wall time, host ops and layers."""
    s = mod.profile_summary()
    return {"accel_mac_fraction": round(s["accel_mac_fraction"], 4), "cosine": round(cosine(y, want), 5),
            "latency_ms": round(s["end_to_end_ms"], 3), "accel_ms": round(s["accel_time_ms"], 3),
            "sim_wall_s": round(wall, 2), "host_ops": s["host_ops"], "host_layers": host}


def ort_integer_layers_off_definition(dyn, feed) -> dict:
    """How many MatMulInteger outputs onnxruntime (CPU, no graph optimizations) computes differently from the ONNX
    definition ``(x - x_zp) @ (W - W_zp)`` (its x86 u8 x s8 kernel saturates int16 pair sums), and by how much."""
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    q = type(dyn)()
    q.CopyFrom(dyn)
    inits = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    nodes = [n for n in q.graph.node if n.op_type == "MatMulInteger"]
    names = list(dict.fromkeys(t for n in nodes for t in (n.input[0], n.input[2], n.output[0]) if t not in inits))
    del q.graph.output[:]
    q.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in names)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    vals = dict(zip(names, ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
                    .run(None, feed)))
    total = off = worst = 0
    for n in nodes:
        x, xz = vals[n.input[0]].astype(np.int64), np.int64(vals[n.input[2]])
        w = inits[n.input[1]].astype(np.int64) - inits[n.input[3]].astype(np.int64)
        d = np.abs(vals[n.output[0]].astype(np.int64) - (x - xz) @ w)
        total, off, worst = total + d.size, off + int((d > 0).sum()), max(worst, int(d.max()))
    return {"outputs": total, "differing": off, "max_abs_diff": worst}


def load_model(name: str, export: str):
    """(model, source): the real torch export where ``export == "torch"`` has one, else the onnx.helper graph."""
    if export == "torch":
        from compiler.zoo.modern_torch import EXPORTS

        if name in EXPORTS:
            return EXPORTS[name](), "torch.onnx"
    return MODELS[name](), "onnx.helper"


def bench_model(name: str, config: str, target: str, export: str = "helper", method: str = "max",
                keep_float: tuple[str, ...] = ()) -> dict:
    model, source = load_model(name, export)
    cal = sample_inputs(model, 4, seed=1)
    feed = sample_inputs(model, 1, seed=2)[0]
    fp32 = ort_run(model, feed)[0]
    res: dict = {"source": source}
    rows: dict = {}
    mod, host = _build(model, config, target, calibration=Calibration(cal, method=method, keep_float=keep_float))
    y, wall = _timed_run(mod, feed)
    rows["ptq"] = _row(mod, y, fp32, host, wall)  # cosine vs fp32
    p = rows["ptq"]
    res.update(accel_mac_fraction=p["accel_mac_fraction"], cosine_ptq_vs_fp32=p["cosine"], latency_ms=p["latency_ms"],
               accel_ms=p["accel_ms"], sim_wall_s=p["sim_wall_s"], host_ops=p["host_ops"], host_layers=host,
               precision=mod.compiled.stats.get("precision"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qdq = ort_quantize_static(model, cal, defaults=True)
    ort_int8 = ort_run(qdq, feed)[0]
    try:
        qmod, qhost = _build(qdq, config, target)
        yq, qwall = _timed_run(qmod, feed)
        rows["ort_static"] = _row(qmod, yq, ort_int8, qhost, qwall)  # cosine vs onnxruntime on the same QDQ model
        res.update(cosine_vs_ort_int8=rows["ort_static"]["cosine"],
                   ort_qdq_accel_mac_fraction=rows["ort_static"]["accel_mac_fraction"], ort_qdq_host_layers=qhost)
    except Exception as exc:  # noqa: BLE001 - reported by name in the JSON
        res.update(cosine_vs_ort_int8=None, ort_qdq_error=f"{type(exc).__name__}: {str(exc)[:300]}")
    res["ort_int8_cosine_vs_fp32"] = round(cosine(ort_int8, fp32), 5)
    if name in ENCODERS:
        try:
            dyn = quantize_dynamic_model(model)
            dmod, dhost = _build(dyn, config, target)  # MatMulInteger/ConvInteger on the accelerator
            yd, dwall = _timed_run(dmod, feed)
            rows["ort_dynamic"] = _row(dmod, yd, ort_run(dyn, feed)[0], dhost, dwall)  # cosine vs onnxruntime
            # the integer layers on the host (numpy, the ONNX definition) give the same result bit for bit
            href, _ = _build(dyn, config, "ref", quantize=False)
            rows["ort_dynamic"]["equals_host_integer_path"] = bool(np.array_equal(yd, href.run(feed)[0]))
            rows["ort_dynamic"]["ort_matmulinteger_off_definition"] = ort_integer_layers_off_definition(dyn, feed)
            res.update(dynamic_cosine_vs_ort=rows["ort_dynamic"]["cosine"],
                       ort_dynamic_accel_mac_fraction=rows["ort_dynamic"]["accel_mac_fraction"])
        except Exception as exc:  # noqa: BLE001
            res["dynamic_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    res["quantizations"] = rows
    res["min_accel_mac_fraction"] = min(r["accel_mac_fraction"] for r in rows.values())
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--config", default="pynq-z1")
    ap.add_argument("--target", default="sim")
    ap.add_argument("--export", choices=("helper", "torch"), default="helper",
                    help="torch: real torch.onnx exports of bert, vit, recognizer (needs the modern extra)")
    ap.add_argument("--calibration", choices=("max", "percentile", "entropy"), default="max")
    ap.add_argument("--keep-float", default="", help="comma-separated tensor names / op types kept in float")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}; available: {', '.join(MODELS)}")
    out = {}
    for name in names:
        t0 = time.perf_counter()
        out[name] = bench_model(name, args.config, args.target, args.export, args.calibration,
                                tuple(k for k in args.keep_float.split(",") if k))
        out[name]["bench_s"] = round(time.perf_counter() - t0, 1)
        r = out[name]
        fr = "/".join(f"{r['quantizations'][q]['accel_mac_fraction']:.3f}" for q in r["quantizations"])
        print(f"{name:11s} accel {fr} ({'/'.join(r['quantizations'])})  ptq cos {r['cosine_ptq_vs_fp32']:.4f}  "
              f"vs ort int8 {r.get('cosine_vs_ort_int8')}  dynamic vs ort {r.get('dynamic_cosine_vs_ort')}  "
              f"latency {r['latency_ms']} ms  sim {r['sim_wall_s']} s", flush=True)
    print(json.dumps({"config": args.config, "target": args.target, "export": args.export,
                      "calibration": args.calibration, "models": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
