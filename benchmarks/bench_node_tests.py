"""Operator correctness: onnx backend node tests, the onnx package's sample CNNs, integer exactness.

1. Every onnx backend node test whose operators we list as supported (generated from the installed
   onnx package), compiled for ``ref`` and ``sim`` (float, CPU path) and checked like onnx's backend
   runner; skipped only by ``tests/onnx_node/cases.py:SKIPS``. Counts are over (case, target) pairs.
2. The sample CNNs (``onnx/backend/test/data/light``, shipped without weights) with seeded random
   weights, quantized by the built-in PTQ (2 random calibration images) and run on ``ref``; cosine
   against onnxruntime (ORT_ENABLE_BASIC) running our QDQ export of the same model on the same
   input, on the logits (the input of the final Softmax) and on the shipped output.
3. Integer conv outputs that differ from the exact QDQ result (ties apart).

    python benchmarks/bench_node_tests.py [--cnns resnet50,squeezenet,...|none] [--targets ref,sim]

The last line is one JSON object: ``passed``, ``failed``, ``skipped``, ``failures`` (names),
``cnns`` (per model: ``cosine_logits``, ``cosine_output``, ``seconds``), ``integer_vs_qdq``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.onnx_node.cases import check_skipped, load_cases, run_case, skip_reason  # noqa: E402
from tests.onnx_node.light_models import LIGHT_MODELS, input_shape, seeded_model  # noqa: E402


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def node_tests(targets: list[str]) -> dict:
    cases = load_cases(ROOT / "build" / "onnx_node")
    passed = failed = skipped = 0
    failures = []
    for target in targets:
        for case in cases:
            try:
                if skip_reason(case.name):
                    check_skipped(case, target)
                    skipped += 1
                    continue
                run_case(case, target)
                passed += 1
            except Exception as exc:  # noqa: BLE001 - every failure is reported by name
                failed += 1
                failures.append(f"{target}:{case.name}: {type(exc).__name__}: {str(exc)[:200]}")
    return {"cases": len(cases), "targets": targets, "passed": passed, "failed": failed, "skipped": skipped,
            "failures": failures}


def ort_basic(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def cnn(name: str) -> dict:
    import onnx

    from compiler import build
    from compiler.quant.qdq_export import export_qdq_model

    t0 = time.perf_counter()
    model = seeded_model(name, seed=0)
    last = model.graph.node[-1]
    if last.op_type == "Softmax":  # expose the logits too: softmax of random-weight logits is near one-hot
        model.graph.output.extend([onnx.helper.make_tensor_value_info(last.input[0], onnx.TensorProto.FLOAT, None)])
    shape = input_shape(model)
    rng = np.random.default_rng(1)
    cal = rng.standard_normal((2,) + shape[1:]).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    feeds = {model.graph.input[0].name: x}
    module = build(model, target="ref", calibration=cal, progress=False)
    ours = module.run(feeds)
    ref = ort_basic(export_qdq_model(model, cal), feeds)
    ops = module.compiled.stats["ops"]
    return {"cosine_logits": cosine(ours[-1], ref[-1]), "cosine_output": cosine(ours[0], ref[0]),
            "accel_layers": ops.get("AccelConv2D", 0) + ops.get("AccelDense", 0),
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cnns", default=",".join(LIGHT_MODELS), help="comma list of sample CNNs, or 'none'")
    ap.add_argument("--targets", default="ref,sim")
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = node_tests(args.targets.split(","))
    result["node_tests_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"node tests: {result['passed']} passed, {result['failed']} failed, {result['skipped']} skipped", flush=True)
    cnns = {}
    for name in [] if args.cnns == "none" else args.cnns.split(","):
        cnns[name] = cnn(name)
        print(name, cnns[name], flush=True)
    result["cnns"] = cnns
    result["cnn_min_cosine_logits"] = min((v["cosine_logits"] for v in cnns.values()), default=None)
    from tests.onnx_node.integer_exactness import count_differences

    result["integer_vs_qdq"] = count_differences("ref")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
