"""Fmax of every preset (fpga.timing: nextpnr-ecp5 for ECP5 parts, the calibrated yosys estimate for Xilinx
parts) and the models' latency at the pynq-z1 preset's clock. The last output line is one JSON object:

    {"configs": {NAME: {"fmax_mhz", "clock_mhz", "meets", "method", "critical_path", ...}},
     "models": {"resnet18": {"cycles", "latency_ms", "clock_mhz", "config"}, "mobilenet_v2": {...}},
     "commit": ..., "date": ...}

    python benchmarks/bench_timing.py [--configs tiny,ecp5-85f,pynq-z1,ultra96] [--models resnet18,mobilenet_v2]
                                      [--model-config pynq-z1] [--no-cache] [--no-models]

Place and route / synthesis runs are cached in build/timing/ by design hash, so rerunning after a change to one
config's design reruns only that one; ``--configs`` selects configs for a cheap partial rerun. Wall times on a
loaded machine are noisy; the Fmax figures are the tools' (nextpnr is deterministic for a given seed and input).
"""
from __future__ import annotations

import argparse
import datetime
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def model_cycles(name: str, config: str, seed: int = 0) -> int:
    """Accelerator cycles of one zoo model on the simulator, quantized exactly as benchmarks/bench_models.py does."""
    sys.path.insert(0, str(HERE))
    from bench_models import CALIBRATION_IMAGES, SHAPE

    from compiler.executor import build
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import get_model

    rng = np.random.default_rng(seed)
    calib = [{"input": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(CALIBRATION_IMAGES)]
    x = rng.standard_normal(SHAPE).astype(np.float32)
    mod = build(ort_quantize_static(get_model(name), calib, reduce_range=True), config, target="sim", progress=False)
    mod(input=x)
    return int(mod.profile_summary()["accel_cycles"])


def commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True).stdout
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "hw", "isa", "fpga"], cwd=HERE,
                               capture_output=True, text=True).stdout.strip()
        return rev.strip() + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    from fpga.timing import timing_record
    from isa import make_config
    from isa.config import preset_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=None, help="comma-separated configs (default: every preset; '' for none)")
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--model-config", default="pynq-z1", help="config the models run on (at its clock_mhz)")
    ap.add_argument("--no-models", action="store_true", help="timing only")
    ap.add_argument("--no-cache", action="store_true", help="rerun the tools even for cached designs")
    args = ap.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    names = [c.strip() for c in args.configs.split(",") if c.strip()] if args.configs is not None else preset_names()
    out: dict = {"configs": {}, "models": {}, "commit": commit(),
                 "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    for name in names:
        cfg = make_config(name)
        t0 = time.time()
        rec = timing_record(cfg, use_cache=not args.no_cache)
        path = rec["critical_path"] or {}
        print(f"{name:>10}: Fmax {rec['fmax_mhz']} MHz vs clock {rec['clock_mhz']:g} MHz -> "
              f"{'meets' if rec['meets'] else 'MISSES'} ({'cached' if rec['cached'] else f'{time.time() - t0:.0f} s'}); "
              f"path {path.get('from')} -> {path.get('to')}", flush=True)
        out["configs"][name] = {k: rec[k] for k in ("fmax_mhz", "clock_mhz", "meets", "method", "critical_path",
                                                    "part", "design_hash", "seconds")}
    if not args.no_models:
        mcfg = make_config(args.model_config)
        for m in [m.strip() for m in args.models.split(",") if m.strip()]:
            t0 = time.time()
            cyc = model_cycles(m, args.model_config)
            out["models"][m] = {"cycles": cyc, "latency_ms": round(cyc / (mcfg.clock_mhz * 1e3), 3),
                                "clock_mhz": mcfg.clock_mhz, "config": mcfg.name}
            print(f"{m:>12}: {cyc:,} cycles = {cyc / (mcfg.clock_mhz * 1e3):.2f} ms at {mcfg.clock_mhz:g} MHz "
                  f"({time.time() - t0:.0f} s)", flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
