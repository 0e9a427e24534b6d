"""The vta-stack demo: a CNN trained on scikit-learn's real digits, quantized, run on the simulator.

``vta demo`` (and ``make demo``) call :func:`main`. Steps: onnxruntime float accuracy on the
test split; onnxruntime ``quantize_static`` (QDQ, calibration subset of the train split,
symmetric activations so every conv/dense offloads, 7-bit weights so onnxruntime's own int8
kernels are exact); onnxruntime int8 accuracy; then the whole test split compiled and run on
the accelerator backend ("sim" when registered, else the numpy reference "ref" -- said so).

    python examples/digits/demo.py [--config pynq-z1] [--target sim|ref]
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from isa import make_config

CALIBRATION_STEP = 4     # every 4th of the first 400 training images: 100 calibration images
CALIBRATION_SPAN = 400


@dataclass
class DemoResult:
    """Everything the demo measured (``report`` prints it)."""

    target: str
    target_note: str
    config: str
    clock_mhz: float
    test_images: int
    calibration_images: int
    float_ort_accuracy: float
    int8_ort_accuracy: float
    accuracy: float
    identical_predictions: float
    cycles_per_image: float
    latency_us_per_image: float
    accel_layers: int
    cpu_layers: int
    wall_s: dict = field(default_factory=dict)
    profile: list = field(default_factory=list)


def choose_target(requested: str | None) -> tuple[str, str]:
    """The backend to use and a note: "sim" when registered, else "ref" (a note says so)."""
    from compiler.executor import available_accel_backends

    have = available_accel_backends()
    if requested:
        if requested not in have:
            raise ValueError(f"target {requested!r} is not registered; available: {have}")
        return requested, ""
    if "sim" in have:
        return "sim", ""
    return "ref", ("the simulator backend 'sim' is not registered in this build: ran on 'ref', the bit-exact numpy "
                   "reference of the accelerator operators (no cycle counts)")


_QUANTIZED: dict = {}  # calibration images' digest -> the QDQ model's bytes: the same in every run of a process


def quantize_digits(xtr: np.ndarray):
    """onnxruntime QDQ int8 digits model and the number of calibration images used."""
    import hashlib

    import onnx

    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo.digits import digits_model_path

    calib = [{"input": xtr[i:i + 1]} for i in range(0, min(CALIBRATION_SPAN, len(xtr)), CALIBRATION_STEP)]
    key = hashlib.sha256(b"".join(c["input"].tobytes() for c in calib)).hexdigest()
    if key not in _QUANTIZED:
        _QUANTIZED[key] = ort_quantize_static(digits_model_path(), calib, symmetric_activations=True,
                                              reduce_range=True).SerializeToString()
    return onnx.load_from_string(_QUANTIZED[key]), len(calib)  # a fresh copy: a build may annotate its model


def run_demo(config: str = "pynq-z1", target: str | None = None, progress: bool = True,
             images: int | None = None) -> DemoResult:
    """Run the whole demo and return its measurements (``images``: only the first N test images; default all)."""
    from compiler.executor import build
    from compiler.executor.config import resolve_config
    from compiler.quant.ort_tools import ort_run
    from compiler.zoo.digits import digits_model_path, load_digits_split

    logging.getLogger().setLevel(logging.ERROR)
    target, note = choose_target(target)
    cfg = resolve_config(config)
    wall: dict[str, float] = {}
    t0 = time.perf_counter()
    xtr, _, xte, yte = load_digits_split()
    if images is not None:
        if not 1 <= images <= len(xte):
            raise ValueError(f"--images {images}: the digits test split has {len(xte)} images; choose 1..{len(xte)}")
        xte, yte = xte[:images], yte[:images]
    float_pred = ort_run(digits_model_path(), {"input": xte})[0].argmax(1)
    qmodel, n_calib = quantize_digits(xtr)
    ort_pred = ort_run(qmodel, {"input": xte})[0].argmax(1)
    wall["onnxruntime_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mod = build(qmodel, cfg, target=target, input_shapes={"input": xte.shape}, progress=progress)
    wall["compile_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = mod(input=xte).argmax(1)
    wall["run_s"] = time.perf_counter() - t0
    s = mod.profile_summary()
    clock = float(getattr(cfg, "clock_mhz", 100.0))
    n = len(xte)
    return DemoResult(target=target, target_note=note, config=str(getattr(cfg, "name", config)), clock_mhz=clock,
                      test_images=n, calibration_images=n_calib,
                      float_ort_accuracy=float((float_pred == yte).mean()), int8_ort_accuracy=float((ort_pred == yte).mean()),
                      accuracy=float((pred == yte).mean()), identical_predictions=float((pred == ort_pred).mean()),
                      cycles_per_image=s["accel_cycles"] / n, latency_us_per_image=s["accel_cycles"] / n / clock,
                      accel_layers=s["accel_layers"], cpu_layers=s["cpu_layers"], wall_s=wall, profile=mod.profile())


def report(res: DemoResult, console=None) -> None:
    """Print the demo's results, the per-layer table and a final JSON line."""
    from vta.commands.run import layer_table, make_console

    c = console or make_console()
    c.print(f"[bold]vta-stack demo[/bold]: digits CNN (scikit-learn load_digits, {res.test_images} test images), "
            f"int8 on target [bold]{res.target}[/bold], config {res.config} @ {res.clock_mhz:g} MHz")
    hw = make_config(res.config)
    c.print(f"  hardware {hw.name}: {hw.batch}x{hw.block_in}x{hw.block_out} GEMM, {hw.macs_per_cycle} MACs/cycle, "
            f"peak {hw.peak_gops:g} GOPS; scratchpads uop/inp/wgt/acc {hw.uop_buff_size // 1024}/"
            f"{hw.inp_buff_size // 1024}/{hw.wgt_buff_size // 1024}/{hw.acc_buff_size // 1024} KiB; "
            f"{hw.bus_width}-bit DRAM bus, latency {hw.dram_latency} cycles")
    if res.target_note:
        c.print(f"[yellow]NOTE: {res.target_note}[/yellow]")
    c.print(f"  onnxruntime float accuracy     {res.float_ort_accuracy:.2%}")
    c.print(f"  onnxruntime int8 accuracy      {res.int8_ort_accuracy:.2%}   (quantize_static QDQ, "
            f"{res.calibration_images} train images, symmetric activations, 7-bit weights)")
    c.print(f"  accelerator ({res.target}) accuracy   {res.accuracy:.2%}")
    c.print(f"  identical predictions vs onnxruntime int8: {res.identical_predictions:.2%}")
    if res.cycles_per_image:
        c.print(f"  {res.cycles_per_image:,.0f} cycles per image = {res.latency_us_per_image:,.1f} us per image at "
                f"{res.clock_mhz:g} MHz ({res.accel_layers} accelerator layers, {res.cpu_layers} CPU layers)")
    else:
        c.print(f"  no cycle counts on target {res.target!r}")
    c.print(f"  wall time: " + ", ".join(f"{k} {v:.1f}" for k, v in res.wall_s.items()))
    c.print(layer_table(res.profile, res.clock_mhz, f"per-layer profile: {res.test_images} images in one batch"))
    summary = {k: v for k, v in asdict(res).items() if k != "profile"}
    print(json.dumps(summary))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="pynq-z1")
    ap.add_argument("--target", default=None, help="sim or ref (default: sim when registered)")
    ap.add_argument("--images", type=int, default=None, help="only the first N test images (default all 450)")
    args = ap.parse_args(argv)
    report(run_demo(args.config, args.target, images=args.images))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
