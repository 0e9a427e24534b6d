"""Robustness sweep: graphs nobody here wrote, quantized as users quantize them, on the accelerator path.

Models: onnx's sample CNNs (``light_*.onnx`` with seeded weights, shrunk inputs), the zoo's small
models, and exporter-style graphs (``benchmarks/exporter_graphs.py``). Each is quantized with
onnxruntime ``quantize_static`` DEFAULTS after ``quant_pre_process`` (and per-channel), built for
``--target`` (sim) and ``ref``, run on one image and compared with onnxruntime (ORT_ENABLE_BASIC, same
QDQ model). Per model: build error, cosine vs ORT, bit-exactness sim vs ref, ``accel_mac_fraction``,
host ops and the ``HostFallbackWarning`` text. Each model runs in its own process with a time limit.
The last line is one JSON object.

    python benchmarks/sweep_models.py [--models a,b] [--config pynq-z1] [--timeout 600] [--no-per-channel]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# light model -> input side used (the graphs have no fixed reshape before their Gemm we cannot refit)
LIGHT = {"squeezenet": 64, "shufflenet": 64, "resnet50": 64, "densenet121": 64, "inception_v1": 64,
         "inception_v2": 64, "bvlc_alexnet": 128, "zfnet512": 128, "vgg19": 64}
ZOO = ("resnet18_small", "mobilenet_v2_small", "mobilenet_v3_small")


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / d) if d else float(np.array_equal(a, b))


def _shrink_light(model, side: int, seed: int):
    """Set the data input to 1x3xside x side; refit Gemm weights, fixed Reshapes and whole-map AveragePools."""
    import onnx
    from onnx import helper, numpy_helper

    g = model.graph
    dims = g.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = side
    del g.value_info[:]
    rng = np.random.default_rng(seed + 1)
    inits = {t.name: t for t in g.initializer}
    for n in list(g.node):  # Reshape(weight, shape) of two initializers: fold (the Gemm weight is refitted below)
        if n.op_type == "Reshape" and n.input[0] in inits and n.input[1] in inits:
            v = numpy_helper.to_array(inits[n.input[0]]).reshape(numpy_helper.to_array(inits[n.input[1]]))
            t = numpy_helper.from_array(v, n.output[0])
            g.initializer.append(t)
            inits[t.name] = t
            g.node.remove(n)
    for _ in range(64):  # shapes change stage by stage: repeat until nothing changes
        before = model.SerializeToString()
        inf = onnx.shape_inference.infer_shapes(model)
        shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in
                  list(inf.graph.value_info) + list(inf.graph.input)}
        for n in g.node:
            if n.op_type == "AveragePool":
                s = shapes.get(n.input[0])
                ks = next(a for a in n.attribute if a.name == "kernel_shape")
                if s and len(s) == 4 and s[2] and (list(ks.ints) == [7, 7] and s[2] < 7):
                    ks.ints[:] = s[2:]
                    for a in n.attribute:
                        if a.name == "pads":
                            a.ints[:] = [0] * len(a.ints)
            if n.op_type == "Reshape" and n.input[1] in inits:
                v = numpy_helper.to_array(inits[n.input[1]])
                s = shapes.get(n.input[0])
                if v.size == 2 and v[0] in (1, 0) and v[1] > 0:
                    inits[n.input[1]].CopyFrom(numpy_helper.from_array(np.array([v[0], -1], np.int64), n.input[1]))
                elif v.size in (4, 5) and s and len(s) in (4, 5) and all(s[-2:]):  # channel shuffle: (.., H, W)
                    v = v.copy()
                    v[-2:] = s[-2:]
                    inits[n.input[1]].CopyFrom(numpy_helper.from_array(v.astype(np.int64), n.input[1]))
            if n.op_type == "Gemm":
                s = shapes.get(n.input[0])
                w = numpy_helper.to_array(inits[n.input[1]])
                tb = any(a.name == "transB" and a.i for a in n.attribute)
                k = w.shape[1] if tb else w.shape[0]
                if s and len(s) == 2 and s[1] and s[1] != k:
                    shp = (w.shape[0], s[1]) if tb else (s[1], w.shape[1])
                    neww = (rng.standard_normal(shp) * np.sqrt(1.0 / s[1])).astype(np.float32)
                    inits[n.input[1]].CopyFrom(numpy_helper.from_array(neww, n.input[1]))
        if model.SerializeToString() == before:
            break
    del g.value_info[:]
    del g.output[:]
    last = g.node[-1]
    if last.op_type == "Softmax":  # compare the logits (softmax of random logits is near one-hot)
        g.output.extend([helper.make_tensor_value_info(last.input[0], onnx.TensorProto.FLOAT, None)])
        del g.node[-1]
    else:
        g.output.extend([helper.make_tensor_value_info(last.output[0], onnx.TensorProto.FLOAT, None)])
    return model


def load(name: str, seed: int = 0):
    """(float model, input name, input shape) of a sweep model."""
    import onnx
    from onnx import version_converter

    if name.startswith("light_"):
        from tests.onnx_node.light_models import seeded_model

        base = name[len("light_"):]
        m = version_converter.convert_version(seeded_model(base, seed), 13)
        m.ir_version = 8
        m = _shrink_light(m, LIGHT[base], seed)
    elif name.startswith("zoo_"):
        from compiler.zoo import get_model

        m = get_model(name[len("zoo_"):])
    else:
        from benchmarks.exporter_graphs import EXPORTER_GRAPHS

        m = EXPORTER_GRAPHS[name](seed)
    inp = m.graph.input[0]
    shape = tuple(d.dim_value or 1 for d in inp.type.tensor_type.shape.dim)
    return m, inp.name, shape


def run_one(name: str, per_channel: bool, config: str, target: str, cli: bool, seed: int = 0) -> dict:
    import logging
    import subprocess
    import tempfile

    import onnx

    from compiler.executor import build
    from compiler.graph.offload import HostFallbackWarning, float_host_ops_between_accel
    from compiler.quant.ort_tools import ort_quantize_static, ort_run

    logging.getLogger().setLevel(logging.ERROR)
    r: dict = {"model": name, "per_channel": per_channel}
    t0 = time.perf_counter()
    try:
        model, inp, shape = load(name, seed)
        rng = np.random.default_rng(seed)
        calib = [{inp: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)]
        x = rng.standard_normal(shape).astype(np.float32)
        q = ort_quantize_static(model, calib, per_channel=per_channel, defaults=True)
        r["opset"] = next(o.version for o in q.opset_import if o.domain in ("", "ai.onnx"))
        expect = ort_run(q, {inp: x}, basic=True)
    except Exception as e:  # noqa: BLE001 - the sweep records every failure
        r["error"] = f"prepare: {type(e).__name__}: {e}"[:600]
        return r
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mod = build(q, config, target=target, progress=False)
        r["warnings"] = sorted({f"{w.category.__name__}: {w.message}"[:400] for w in caught
                                if issubclass(w.category, HostFallbackWarning) or "Lossy" in w.category.__name__})
        ours = mod.run({inp: x})
        s = mod.profile_summary()
        r.update(accel_mac_fraction=round(s["accel_mac_fraction"], 5), host_ops=s["host_ops"],
                 cycles=int(s["accel_cycles"]), float_between=float_host_ops_between_accel(mod.graph),
                 cosine_vs_ort=min(cosine(a, b) for a, b in zip(ours, expect)),
                 shape_ok=all(np.shape(a) == np.shape(b) for a, b in zip(ours, expect)))
        ref = build(q, config, target="ref", progress=False).run({inp: x})
        r["ref_bit_exact"] = all(np.array_equal(a, b) for a, b in zip(ours, ref))
    except Exception as e:  # noqa: BLE001
        r["error"] = f"build/run: {type(e).__name__}: {e}"[:600]
        r["trace"] = traceback.format_exc()[-1500:]
    if cli and "error" not in r:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "q.onnx"
            onnx.save(q, str(p))
            np.save(Path(d) / "x.npy", x)
            cp = subprocess.run([str(Path(sys.executable).parent / "vta"), "run", str(p), "--config", config, "--input", str(Path(d) / "x.npy"), "--no-progress"],
                                capture_output=True, text=True, timeout=900)
            r["cli_rc"] = cp.returncode
            if cp.returncode:
                r["cli_err"] = (cp.stderr or cp.stdout)[-400:]
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    return r


def _worker(args, q):
    q.put(run_one(*args))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.exporter_graphs import EXPORTER_GRAPHS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = ",".join([f"light_{n}" for n in LIGHT] + [f"zoo_{n}" for n in ZOO] + list(EXPORTER_GRAPHS))
    ap.add_argument("--models", default=default)
    ap.add_argument("--config", default="pynq-z1")
    ap.add_argument("--target", default="sim")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--no-per-channel", action="store_true")
    ap.add_argument("--cli", action="store_true", help="also `vta run` the saved QDQ model")
    args = ap.parse_args(argv)
    results = []
    ctx = mp.get_context("spawn")
    for name in [m for m in args.models.split(",") if m]:
        for pc in (False,) if args.no_per_channel else (False, True):
            qu = ctx.Queue()
            p = ctx.Process(target=_worker, args=((name, pc, args.config, args.target, args.cli), qu))
            p.start()
            p.join(args.timeout)
            if p.is_alive():
                p.kill()
                r = {"model": name, "per_channel": pc, "error": f"timeout after {args.timeout} s"}
            else:
                r = qu.get() if not qu.empty() else {"model": name, "per_channel": pc, "error": f"exit {p.exitcode}"}
            results.append(r)
            brief = {k: r.get(k) for k in ("accel_mac_fraction", "cosine_vs_ort", "ref_bit_exact", "host_ops",
                                           "float_between", "error", "warnings", "wall_s", "cli_rc")}
            print(f"{name} pc={pc}: {brief}", flush=True)
    ok = [r for r in results if "error" not in r]
    print(json.dumps({"config": args.config, "target": args.target, "n": len(results), "failed": len(results) - len(ok),
                      "min_cosine": min((r["cosine_vs_ort"] for r in ok), default=None),
                      "all_bit_exact": all(r.get("ref_bit_exact") for r in ok), "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
