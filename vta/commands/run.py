"""``vta run MODEL.onnx``: compile an ONNX model, run it on the accelerator, print outputs and a profile."""
from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

import numpy as np

from vta.checks import check_output_path, load_arrays

DEFAULT_TARGET = "sim"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="compile and run an ONNX model on the simulator; print outputs and a per-layer profile")
    p.add_argument("model", help="ONNX model file (int8 QDQ, or float with --calibrate)")
    p.add_argument("--config", default="pynq-z1", help="hardware preset or JSON file (default pynq-z1)")
    p.add_argument("--input", metavar="FILE", help=".npy for a one-input model, or .npz keyed by input name "
                   "(default: seeded random normal input)")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace JSON of the accelerator layers")
    p.add_argument("--target", default=DEFAULT_TARGET,
                   help="accelerator backend: sim (simulator), rtl (the RTL under Verilator), ref (numpy reference) "
                        "or pynq (a PYNQ board: --bitstream); or a whole-model CPU/GPU target: llvm (this CPU) or cuda "
                        "(an NVIDIA GPU), float models in float32, QDQ models in int8")
    p.add_argument("--check", action="store_true",
                   help="with --target rtl: also run every layer on the simulator and stop at the first layer whose "
                        "bytes or cycles differ, naming it")
    p.add_argument("--bitstream", metavar="FILE", help="--target pynq: the overlay's .bit (its .hwh beside it), "
                   "built by `vta hw build --board BOARD` for the same --config")
    p.add_argument("--cpu", default="numpy", choices=("numpy", "llvm"),
                   help="backend of the CPU layers: numpy kernels or JIT-compiled LLVM kernels (default numpy)")
    p.add_argument("--calibrate", type=int, metavar="N", help="quantize a float model with N calibration samples "
                   "(random, or the first N of --calibration-data)")
    p.add_argument("--calibration-data", metavar="FILE", help=".npy calibration samples for --calibrate")
    p.add_argument("--seed", type=int, default=0, help="seed of random inputs and calibration data")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=run)


def is_quantized(model) -> bool:
    """Whether an ONNX model already carries int8 quantization (QDQ or QLinear operators)."""
    ops = {n.op_type for n in model.graph.node}
    return bool(ops & {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul"})


def model_inputs(model) -> dict[str, tuple[list[int | None], np.dtype]]:
    """Graph inputs (not initializers): name -> (dims with None for symbolic, numpy dtype)."""
    from onnx import helper

    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim]
        out[vi.name] = (dims, np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))
    return out


def load_inputs(path: str, inputs: dict) -> dict[str, np.ndarray]:
    """Read ``--input``: a .npy array (one-input models) or an .npz with one array per input name."""
    p = Path(path)
    data = load_arrays(p, "--input", finite=False)  # NaN/Inf: a warning from Module.set_input
    if isinstance(data, np.ndarray):
        if len(inputs) != 1:
            raise ValueError(f"{p} holds one array but the model has inputs {list(inputs)}: pass an .npz keyed by name")
        return {next(iter(inputs)): data}
    feeds = data
    missing, extra = set(inputs) - set(feeds), set(feeds) - set(inputs)
    if missing or extra:
        raise ValueError(f"{p}: arrays {sorted(feeds)} do not match the model inputs {sorted(inputs)}")
    return feeds


def random_inputs(inputs: dict, seed: int) -> dict[str, np.ndarray]:
    """Seeded random feeds: normal(0, 1) floats, uniform ints; symbolic dims become 1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (dims, dtype) in inputs.items():
        shape = tuple(d or 1 for d in dims)
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            feeds[name] = rng.integers(max(info.min, -128), min(info.max, 127), shape, endpoint=True).astype(dtype)
    return feeds


def calibration_set(args: argparse.Namespace, inputs: dict, feeds: dict) -> np.ndarray:
    """``--calibrate N`` samples: the first N of ``--calibration-data`` or seeded random normal data."""
    if len(inputs) != 1:
        raise ValueError(f"--calibrate supports one-input models; this one has inputs {list(inputs)}")
    if args.calibrate < 1:
        raise ValueError(f"--calibrate N needs N >= 1, got {args.calibrate}")
    name = next(iter(inputs))
    shape = feeds[name].shape
    if args.calibration_data:
        p = Path(args.calibration_data)
        data = load_arrays(p, "--calibration-data")
        if not isinstance(data, np.ndarray):
            raise ValueError(f"--calibration-data {p} must be one .npy array of samples, not an .npz archive")
        data = data.astype(np.float32)
        if data.shape[1:] != shape[1:]:
            raise ValueError(f"calibration data {p} has samples of shape {data.shape[1:]}; the model input "
                             f"{name!r} needs {shape[1:]}")
        return data[:args.calibrate]
    rng = np.random.default_rng(args.seed + 1)
    return rng.standard_normal((args.calibrate * shape[0],) + shape[1:]).astype(np.float32)


def one_line_unsupported(exc) -> str:
    parts = [f"{op} ({len(names)} node(s): {', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
             for op, names in sorted(exc.unsupported.items())]
    return "unsupported operator(s): " + "; ".join(parts) + " (rejected before compilation; `vta run --help`)"


def layer_table(rows: list[dict], clock_mhz: float, title: str):
    """A rich table of per-layer profile rows (cycles and latency for accelerator layers)."""
    from rich.table import Table

    t = Table(title=title)
    for c, j in (("#", "right"), ("layer", "left"), ("op", "left"), ("on", "left"), ("cycles", "right"),
                 ("us @clk", "right"), ("util", "right"), ("MMACs", "right"), ("KiB", "right"), ("host ms", "right")):
        t.add_column(c, justify=j, no_wrap=True, overflow="ellipsis", max_width=32 if c == "layer" else None)
    for i, r in enumerate(rows):
        accel = r["target"] == "accel"
        on = r["target"] if accel or not r.get("cpu_backend") else f"cpu:{r['cpu_backend']}"
        t.add_row(str(i), r["name"], r["op"], on, f"{r['cycles']:,}" if accel else "",
                  f"{r['cycles'] / clock_mhz:,.1f}" if accel else "", f"{r['utilization']:.2f}" if accel else "",
                  f"{r['macs'] / 1e6:.2f}" if r["macs"] else "", f"{r['bytes'] / 1024:.1f}" if r["bytes"] else "",
                  f"{r['time_ms']:.2f}")
    return t


def output_summary(name: str, out: np.ndarray, top: int = 5, max_rows: int = 4) -> list[str]:
    """Lines describing one output; 2-D (batch, classes) outputs get their top-k classes per row."""
    a = np.asarray(out)
    lines = [f"output {name!r}: shape {a.shape} {a.dtype}  min {a.min():.4g}  max {a.max():.4g}  mean {a.mean():.4g}"]
    if a.ndim == 2 and a.shape[1] > 1:
        for r in range(min(a.shape[0], max_rows)):
            idx = np.argsort(-a[r], kind="stable")[:top]
            lines.append(f"  row {r} top-{len(idx)}: " + ", ".join(f"{int(i)} ({a[r, i]:.4g})" for i in idx))
        if a.shape[0] > max_rows:
            lines.append(f"  ... {a.shape[0] - max_rows} more rows")
    return lines


def make_console():
    """A rich console at least 150 columns wide (pipes default to 80, too narrow for the tables)."""
    from rich.console import Console

    return Console(highlight=False, width=max(Console().width, 150))


def run(args: argparse.Namespace) -> int:
    from compiler.executor import available_accel_backends, build
    from compiler.executor.config import resolve_config
    from compiler.frontend.errors import NonFiniteInputWarning, UnsupportedOperatorError
    from compiler.frontend.onnx_import import check_model_support, load_model
    from compiler.graph.offload import HostFallbackWarning, LossyWeightsWarning
    from compiler.frontend.validate import check_structure

    logging.getLogger().setLevel(logging.ERROR)
    console = make_console()
    if args.trace:  # before any work, and never one of the inputs
        check_output_path(args.trace, "--trace", {"model": args.model, "--input": args.input,
                                                  "--calibration-data": args.calibration_data,
                                                  "--config file": args.config if Path(args.config).is_file() else None})
    model = load_model(args.model)
    try:
        check_model_support(model)  # before any other work (shape subgraphs folded first)
    except UnsupportedOperatorError as exc:
        raise ValueError(one_line_unsupported(exc)) from None
    check_structure(model, str(args.model))
    if getattr(args, "check", False):
        if args.target != "rtl":
            raise ValueError(f"--check compares the RTL with the simulator: it needs --target rtl, not {args.target!r}")
        args.target = "rtl-check"
    from compiler.targets import MODEL_TARGETS

    model_target = args.target in MODEL_TARGETS
    if not model_target and args.target not in available_accel_backends():
        raise ValueError(f"unknown --target {args.target!r}; available: "
                         f"{', '.join(available_accel_backends() + list(MODEL_TARGETS))}")
    if model_target and getattr(args, "cpu", "numpy") != "numpy":
        raise ValueError(f"--cpu chooses the host backend of accelerator targets; --target {args.target} compiles "
                         "every layer with the operator library")
    if args.target == "pynq" and not getattr(args, "bitstream", None):
        raise ValueError("--target pynq needs --bitstream FILE.bit (written by `vta hw build --board BOARD`)")
    target_options = {"bitstream": args.bitstream} if args.target == "pynq" else None
    cfg = resolve_config(args.config)
    inputs = model_inputs(model)
    if args.input:
        feeds = load_inputs(args.input, inputs)
        console.print(f"inputs from {args.input}: " + ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in feeds.items()))
    else:
        feeds = random_inputs(inputs, args.seed)
        console.print(f"no --input given: using seeded random input (seed {args.seed}): "
                      + ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in feeds.items()))
    calibration = None
    if not is_quantized(model) and not (model_target and not args.calibrate):
        if not args.calibrate:
            raise ValueError(f"{args.model} is a float model: the accelerator runs int8. Pass --calibrate N to quantize "
                             "it with N calibration samples (seeded random, or --calibration-data FILE.npy)")
        calibration = calibration_set(args, inputs, feeds)
        src = args.calibration_data or "seeded random normal data"
        console.print(f"float model: quantizing to int8 with {len(calibration)} calibration sample(s) from {src}")
    shapes = {k: tuple(v.shape) for k, v in feeds.items()}
    show = not args.no_progress
    console.print(f"compiling {args.model} for {getattr(cfg, 'name', 'config')} (target {args.target}) ...")
    with warnings.catch_warnings(record=True) as caught:  # printed once, in the console's words
        warnings.simplefilter("always", HostFallbackWarning)
        warnings.simplefilter("always", LossyWeightsWarning)
        if model_target:
            mod = build(model, cfg, target=args.target, calibration=calibration, input_shapes=shapes, progress=show)
        else:
            mod = build(model, cfg, target=args.target, calibration=calibration, input_shapes=shapes, progress=show,
                        cpu=getattr(args, "cpu", "numpy"), target_options=target_options)
    for w in caught:
        if issubclass(w.category, (HostFallbackWarning, LossyWeightsWarning)):
            console.print(f"warning: {w.message}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    mod.keep_details = bool(args.trace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NonFiniteInputWarning)
        for k, v in feeds.items():
            mod.set_input(k, v)
    for w in caught:
        if issubclass(w.category, NonFiniteInputWarning):
            console.print(f"warning: {w.message}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if args.target == "cuda":
        from compiler.target.cuda import gpu_present

        if not gpu_present():
            raise ValueError(f"--target cuda: the model compiled ({len(getattr(mod.cpu, '_plans', {}))} GPU kernels, PTX) "
                             "but this machine has no NVIDIA GPU to run them; use --target llvm to run on the CPU")
    console.print(f"running on target {args.target} ...")
    outs = mod.run()
    clock = float(getattr(cfg, "clock_mhz", 100.0))
    for name, out in zip(mod.output_names, outs):
        for line in output_summary(name, out):
            console.print(line)
    rows = mod.profile()
    console.print(layer_table(rows, clock, f"per-layer profile ({args.target}, {getattr(cfg, 'name', '')} @ {clock:g} MHz)"))
    s = mod.profile_summary()
    if args.target == "ref":
        console.print("note: target 'ref' is the numpy reference backend: it has no cycle counts")
    if model_target:
        console.print(f"note: target '{args.target}' runs every layer with operator-library kernels "
                      f"({'float32' if not mod.compiled.stats.get('int8_lowered') else 'int8'}): no accelerator cycles")
    console.print(f"accelerator: {s['accel_layers']} layers, {s['accel_cycles']:,} cycles = {s['accel_time_ms']:.3f} ms "
                  f"at {clock:g} MHz, {s['macs'] / 1e6:.1f} MMACs; CPU: {s['cpu_layers']} layers, "
                  f"{s['cpu_time_ms']:.1f} ms host time")
    host_ops = ", ".join(f"{op} x{k}" for op, k in s["host_ops"].items()) or "none"
    console.print(f"where the time goes: {s['accel_mac_fraction']:.1%} of the MACs on the accelerator; end to end "
                  f"{s['end_to_end_ms']:.1f} ms (accelerator at {clock:g} MHz + measured host); host ops: {host_ops}")
    plan = mod.compiled.memory_plan
    console.print(f"intermediate tensors: {plan.peak_bytes / 1024:,.1f} KiB arena (static memory plan; "
                  f"{plan.no_reuse_bytes / 1024:,.1f} KiB without reuse)")
    if args.trace:
        source = mod.write_trace(args.trace)
        console.print(f"trace written to {args.trace} (timings from {source}); open it in ui.perfetto.dev")
    return 0
