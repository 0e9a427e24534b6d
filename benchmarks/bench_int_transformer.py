"""Host time of the integer Softmax / LayerNorm / GELU (``jit_runtime.host_ops.int_transformer``) against the
float32 kernels they replace, side by side in one run, at a small-encoder and a BERT-base size.

    python benchmarks/bench_int_transformer.py [--repeats 20]

Last line: JSON ``{"ops": {NAME: {"shape", "int_us", "float_us", "int_over_float"}}}`` (median of ``repeats``
calls each). Wall times: run on an idle machine.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jit_runtime.host_ops import KERNELS  # noqa: E402
from jit_runtime.host_ops.int_transformer import (choose_qgelu, choose_qlayernorm, choose_qsoftmax, qgelu,  # noqa: E402
                                                  qlayernorm, qsoftmax)


def _median_us(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def _float_gelu(x):
    k = KERNELS
    e = k["Erf"]({}, k["Div"]({}, x, np.float32(np.sqrt(2.0))))
    return k["Mul"]({}, k["Mul"]({}, x, k["Add"]({}, e, np.float32(1.0))), np.float32(0.5))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    out = {}
    for tag, att, seq in (("small", (1, 4, 17, 17), (1, 17, 64)), ("bert_base", (1, 12, 128, 128), (1, 128, 768))):
        qa, qs = rng.integers(-128, 128, att).astype(np.int8), rng.integers(-128, 128, seq).astype(np.int8)
        xa, xs = qa.astype(np.float32) * 0.05, qs.astype(np.float32) * 0.05
        g, b = np.ones(seq[-1], np.float32), np.zeros(seq[-1], np.float32)
        ps, pl, pg = (choose_qsoftmax(0.05, 1 / 255, -128), choose_qlayernorm(0.05, 0, g, b, 1e-5, 0.03, 0),
                      choose_qgelu(0.05, 0, 0.05, 0))
        cases = {"softmax": (att, lambda: qsoftmax(qa, ps), lambda: KERNELS["Softmax"]({"axis": -1}, xa)),
                 "layernorm": (seq, lambda: qlayernorm(qs, pl),
                               lambda: KERNELS["LayerNormalization"]({"axis": -1, "epsilon": 1e-5}, xs, g, b)),
                 "gelu": (seq, lambda: qgelu(qs, pg), lambda: _float_gelu(xs))}
        for name, (shape, fi, ff) in cases.items():
            iu, fu = _median_us(fi, args.repeats), _median_us(ff, args.repeats)
            out[f"{name}_{tag}"] = {"shape": list(shape), "int_us": round(iu, 1), "float_us": round(fu, 1),
                                    "int_over_float": round(iu / fu, 2)}
            print(f"{name + '_' + tag:22s} {str(shape):18s} int {iu:10.1f} us  float {fu:10.1f} us", flush=True)
    print(json.dumps({"ops": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
