"""Today's models on the accelerator: BERT- and ViT-style encoders, a YOLOv8-style detector, a DBNet-style
text detector and a CRNN/SVTR-style recognizer (``compiler.zoo.modern``: onnx.helper graphs of the public
definitions with seeded weights; nothing downloaded), on the cycle-accurate simulator.

Per model: the float export quantized by the built-in PTQ (4 seeded calibration feeds) -> ``accel_mac_fraction``,
``cosine_ptq_vs_fp32`` (vs onnxruntime fp32 on a fifth feed), ``latency_ms`` (``profile_summary()["end_to_end_ms"]``:
accelerator cycles at the config clock + measured host time), ``sim_wall_s`` (wall time of one ``run()``),
``host_ops``, ``host_layers`` (the HostFallbackWarning's layers); onnxruntime ``quantize_static`` with its
defaults (uint8 asymmetric activations, per-channel weights) built by us -> ``cosine_vs_ort_int8`` (ours vs
onnxruntime running the same QDQ model), ``ort_qdq_accel_mac_fraction``, ``ort_int8_cosine_vs_fp32``
(onnxruntime's own int8 against fp32); for the encoders ``quantize_dynamic`` built and run (host integer
ops) -> ``dynamic_cosine_vs_ort``.

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
    mod, host = _build(model, config, target, calibration=Calibration(cal, method=method, keep_float=keep_float))
    y, wall = _timed_run(mod, feed)
    s = mod.profile_summary()
    res.update(accel_mac_fraction=round(s["accel_mac_fraction"], 4), cosine_ptq_vs_fp32=round(cosine(y, fp32), 5),
               latency_ms=round(s["end_to_end_ms"], 3), accel_ms=round(s["accel_time_ms"], 3),
               sim_wall_s=round(wall, 2), host_ops=s["host_ops"], host_layers=host,
               precision=mod.compiled.stats.get("precision"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qdq = ort_quantize_static(model, cal, defaults=True)
    ort_int8 = ort_run(qdq, feed)[0]
    try:
        qmod, qhost = _build(qdq, config, target)
        yq, _ = _timed_run(qmod, feed)
        res.update(cosine_vs_ort_int8=round(cosine(yq, ort_int8), 5),
                   ort_qdq_accel_mac_fraction=round(qmod.profile_summary()["accel_mac_fraction"], 4),
                   ort_qdq_host_layers=qhost)
    except Exception as exc:  # noqa: BLE001 - reported by name in the JSON
        res.update(cosine_vs_ort_int8=None, ort_qdq_error=f"{type(exc).__name__}: {str(exc)[:300]}")
    res["ort_int8_cosine_vs_fp32"] = round(cosine(ort_int8, fp32), 5)
    if name in ENCODERS:
        try:
            dyn = quantize_dynamic_model(model)
            dmod, _ = _build(dyn, config, target, quantize=False)
            yd, _ = _timed_run(dmod, feed)
            res["dynamic_cosine_vs_ort"] = round(cosine(yd, ort_run(dyn, feed)[0]), 5)
        except Exception as exc:  # noqa: BLE001
            res["dynamic_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
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
        print(f"{name:11s} accel {r['accel_mac_fraction']:.3f}  ptq cos {r['cosine_ptq_vs_fp32']:.4f}  "
              f"vs ort int8 {r.get('cosine_vs_ort_int8')}  latency {r['latency_ms']} ms  sim {r['sim_wall_s']} s",
              flush=True)
    print(json.dumps({"config": args.config, "target": args.target, "export": args.export,
                      "calibration": args.calibration, "models": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
