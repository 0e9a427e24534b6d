"""ResNet-18 conv layers C2-C11 on pynq-z1 (cycle-accurate simulator), with and without virtual threads.

Per layer: cycles, GOPS at the config clock, utilization = MACs / (macs_per_cycle x cycles).
``--epilogue`` selects what follows the convolution: ``none`` (the int32 accumulators are
stored narrowed to int8, i.e. the convolution alone) or ``requant`` (rounding shift by 8 +
relu + clip to int8) or ``full`` (what a quantized model's conv runs: per-channel int32 bias, per-channel
scales from ``choose_requant``, output zero point, relu, clip). Every result is checked bit for bit against numpy.
The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from compiler import te
from compiler.backend.accel.backend import compile_conv2d, run_compiled
from compiler.quant.requant_params import acc_bound, choose_requant
from jit_runtime.host_ops.requant import Requant, apply_requant
from compiler.topi.conv2d import ConvShape
from compiler.topi.knobs import choose_conv_knobs
from compiler.backend.accel.measure import tune_conv_knobs
from isa import make_config

LAYERS = [("C2", 56, 64, 64, 3, 1, 1), ("C3", 56, 64, 64, 1, 1, 0), ("C4", 56, 64, 128, 3, 2, 1),
          ("C5", 56, 64, 128, 1, 2, 0), ("C6", 28, 128, 128, 3, 1, 1), ("C7", 28, 128, 256, 3, 2, 1),
          ("C8", 28, 128, 256, 1, 2, 0), ("C9", 14, 256, 256, 3, 1, 1), ("C10", 14, 256, 512, 3, 2, 1),
          ("C11", 14, 256, 512, 1, 2, 0)]


def _epilogue(kind: str, cout: int = 0, fan_in: int = 0, seed: int = 0):
    """``(bias, Requant)`` of an epilogue kind for a layer with ``cout`` channels and ``fan_in`` MACs per output."""
    if kind == "none":
        return None, None
    if kind == "requant":
        return None, Requant(shift=8, relu=True, out_min=0, out_max=127)
    if kind == "full":
        rng = np.random.default_rng(seed)
        bias = rng.integers(-(1 << 14), 1 << 14, cout).astype(np.int32)
        scales = 1.0 / (np.sqrt(fan_in) * 128.0) * rng.uniform(0.5, 2.0, cout)
        rq = choose_requant(scales, acc_bound(np.full((cout, fan_in), 127, np.int8), bias), relu=True)
        return bias, dataclasses.replace(rq, zero_point=-7)
    raise SystemExit(f"unknown epilogue {kind!r}")


def _compile(cfg, cs, bias, epi, vthreads, tune: int):
    from compiler.topi.conv2d import conv2d_compute, conv2d_epilogue

    ep = conv2d_epilogue(cfg, cs, conv2d_compute(cfg, cs)[3], bias, epi)
    n_consts, n_alu = len(ep.consts), len(ep.stages)
    if tune > 1:  # simulate the best `tune` analytic candidates (compiler.backend.accel.measure)
        knobs = tune_conv_knobs(cfg, cs, bias, epi, n_consts, n_alu, vthreads, top=tune)
    else:
        knobs = choose_conv_knobs(cfg, cs, n_consts, n_alu=n_alu, vthreads=vthreads)
    return compile_conv2d(cfg, cs, bias, epi, knobs)


def _reference(comp, x, w, bias, epi) -> np.ndarray:
    acc = te.evaluate(comp.kernel.conv, {comp.kernel.data: x, comp.kernel.weight: w}).astype(np.int64)
    if epi is None:
        return acc.astype(np.int8)
    ocb, oh, ow, bo = acc.shape[2], acc.shape[3], acc.shape[4], acc.shape[6]
    chw = acc[0, 0, :, :, :, 0, :].transpose(0, 3, 1, 2).reshape(ocb * bo, oh, ow)  # channel-major
    out = apply_requant(chw, bias, epi, channel_axis=0)
    return out.reshape(ocb, bo, oh, ow).transpose(0, 2, 3, 1).reshape(acc.shape)


def run(epilogue: str = "none", layers=None, check: bool = True, tune: int = 4) -> dict:
    cfg = make_config("pynq-z1")
    rng = np.random.default_rng(0)
    rows = []
    for name, hw, cin, cout, k, s, p in LAYERS:
        if layers and name not in layers:
            continue
        cs = ConvShape(1, 1, cin // cfg.block_in, cout // cfg.block_out, hw, hw, k, k, (s, s), (p, p, p, p))
        row = {"layer": name, "hw": hw, "cin": cin, "cout": cout, "kernel": k, "stride": s, "macs": cs.macs(cfg)}
        bias, epi = _epilogue(epilogue, cout, cin * k * k)
        x = w = None
        for label, vt in (("vthread", 2), ("serial", 1)):
            t0 = time.time()
            comp = _compile(cfg, cs, bias, epi, vt, tune)
            k_ = comp.kernel
            if x is None:
                x = rng.integers(-128, 128, k_.data.shape).astype(np.int8)
                w = rng.integers(-128, 128, k_.weight.shape).astype(np.int8)
            out, prof = run_compiled(cfg, comp, {k_.data: x, k_.weight: w}, "sim")
            if check and not np.array_equal(out, _reference(comp, x, w, bias, epi)):
                raise SystemExit(f"{name} ({label}): accelerator result differs from the numpy reference")
            cyc = prof["cycles"]
            row[f"cycles_{label}"] = cyc
            row[f"gops_{label}"] = round(2 * cs.macs(cfg) / (cyc / (cfg.clock_mhz * 1e6)) / 1e9, 3)
            row[f"utilization_{label}"] = round(prof["utilization"], 4)
            row[f"knobs_{label}"] = vars(k_.knobs) if hasattr(k_.knobs, "__dict__") else str(k_.knobs)
            row[f"seconds_{label}"] = round(time.time() - t0, 2)
        rows.append(row)
        print(f"{name:4s} {hw:3d}x{hw:<3d} {cin:3d}->{cout:3d} k{k} s{s}: cycles vthread {row['cycles_vthread']:8d} "
              f"serial {row['cycles_serial']:8d}  util vthread {row['utilization_vthread']:.3f} "
              f"serial {row['utilization_serial']:.3f}  GOPS {row['gops_vthread']:.2f}", file=sys.stderr, flush=True)
    return {
        "config": cfg.name, "clock_mhz": cfg.clock_mhz, "epilogue": epilogue, "tune_candidates": tune,
        "avg_utilization_vthread": round(float(np.mean([r["utilization_vthread"] for r in rows])), 4),
        "avg_utilization_serial": round(float(np.mean([r["utilization_serial"] for r in rows])), 4),
        "layers": rows,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epilogue", default="none", choices=["none", "requant", "full"])
    ap.add_argument("--layers", nargs="*", help="subset, e.g. C2 C9")
    ap.add_argument("--no-check", action="store_true", help="skip the numpy bit-exactness check")
    ap.add_argument("--tune", type=int, default=4,
                    help="simulate this many best analytic tilings per layer and keep the fastest (1: analytic only)")
    a = ap.parse_args(argv)
    res = run(a.epilogue, a.layers, not a.no_check, a.tune)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
