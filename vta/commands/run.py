"""``vta run MODEL.onnx``: compile an ONNX model, run it on the accelerator, print outputs and a profile."""
from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

import numpy as np

from vta.checks import check_output_paths, load_arrays

DEFAULT_TARGET = "sim"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="compile and run an ONNX model (or run an exported .vtamod) on the simulator; "
                                   "print outputs and a per-layer profile")
    p.add_argument("model", help="ONNX model file (int8 QDQ, or float with --calibrate), or a module exported by "
                                 "`vta build` (.vtamod: runs on the runtime alone, no compilation)")
    add_compile_options(p)
    p.add_argument("--input", metavar="FILE", help=".npy for a one-input model, or .npz keyed by input name "
                   "(default: seeded random normal input)")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace JSON of the accelerator layers")
    p.add_argument("--target", default=DEFAULT_TARGET,
                   help="accelerator backend: sim (simulator), rtl (the RTL under Verilator), ref (numpy reference) "
                        "or pynq (a PYNQ board: --bitstream); or a whole-model CPU/GPU target: llvm (this CPU) or cuda "
                        "(an NVIDIA GPU), float models in float32, QDQ models in int8")
    p.add_argument("--check", action="store_true",
                   help="with --target rtl: also run every layer on the simulator and stop at the first layer whose "
                        "bytes or cycles differ, naming it; reports how many layers it compared")
    p.add_argument("--bitstream", metavar="FILE", help="--target pynq: the overlay's .bit (its .hwh beside it), "
                   "built by `vta hw build --board BOARD` for the same --config")
    p.add_argument("--cpu", default="numpy", choices=("numpy", "llvm"),
                   help="backend of the CPU layers: numpy kernels or JIT-compiled LLVM kernels (default numpy)")
    p.add_argument("--outputs", metavar="FILE.npz", help="save the outputs, keyed by output name (np.load reads them)")
    p.add_argument("--plot", metavar="FILE.png", help="a per-layer chart: time per layer (accelerator at the clock, "
                   "host measured) and accelerator utilization")
    p.add_argument("--roofline", metavar="FILE.png", help="a roofline of the accelerator layers: the config's peak "
                   "MACs/cycle and DRAM bytes/cycle, each layer at its arithmetic intensity (real MACs / DRAM bytes "
                   "moved) and attained MACs/cycle (with --json: the points too)")
    p.add_argument("--json", action="store_true", help="end with one JSON line: outputs, profile rows and totals")
    p.add_argument("--force", action="store_true", help="overwrite existing output files (--trace, --outputs, --plot, "
                   "--roofline)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=run)


def add_compile_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``vta run`` and ``vta build``: config, calibration, seed, tuning log."""
    p.add_argument("--config", default=None, help="hardware preset or JSON file (default pynq-z1; an exported module "
                   "carries its own)")
    p.add_argument("--calibrate", type=int, metavar="N", help="quantize a float model with N calibration samples "
                   "(the first N of --calibration-data; without it, seeded random normal data, with a warning)")
    p.add_argument("--calibration-data", metavar="FILE", help=".npy calibration samples for --calibrate")
    p.add_argument("--tuning-log", metavar="FILE", help="apply a tuning log written by `vta tune` (each kernel's "
                   "best record; accelerator targets)")
    p.add_argument("--seed", type=int, default=0, help="seed of random inputs and calibration data")


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
    from compiler.frontend.support import SUPPORTED_OPS

    parts = [f"{op} ({len(names)} node(s): {', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
             for op, names in sorted(exc.unsupported.items())]
    return ("unsupported operator(s): " + "; ".join(parts) + f" (rejected before compilation; {len(SUPPORTED_OPS)} "
            "operators are supported: compiler.frontend.support.SUPPORTED_OPS, docs/getting-started.md)")


COLUMNS = (("#", "right"), ("layer", "left"), ("op", "left"), ("on", "left"), ("cycles", "right"),
           ("accel ms", "right"), ("util", "right"), ("MMACs", "right"), ("padded MMACs", "right"), ("KiB", "right"),
           ("host ms", "right"), ("wall ms", "right"))


def _mmacs(macs: int) -> str:
    return f"{macs / 1e6:.2f}" if macs >= 100_000 else f"{macs / 1e6:.4f}"


def layer_table(rows: list[dict], clock_mhz: float, title: str):
    """A table of per-layer profile rows and their totals (docs/getting-started.md explains the columns): a rich
    Table, or plain text where rich is not installed (the runtime-only install on a board).

    Accelerator rows: cycles and their time at the clock, utilization, real and block-padded MACs, and the wall
    time the backend took here (a simulator's run time, not the hardware's); host rows: measured host time."""
    accel = [r for r in rows if r["target"] == "accel" and r.get("cycles")]
    host = [r for r in rows if r["target"] != "accel"]
    tot_cycles = sum(r["cycles"] for r in accel)
    foot = ["", "total", "", "", f"{tot_cycles:,}", f"{tot_cycles / (clock_mhz * 1e3):,.3f}", "",
            _mmacs(sum(r.get('real_macs') or 0 for r in rows)), _mmacs(sum(r.get('padded_macs') or 0 for r in rows)), "",
            f"{sum(r['time_ms'] for r in host):.2f}", f"{sum(r['time_ms'] for r in rows if r['target'] == 'accel'):.1f}"]
    body = []
    for i, r in enumerate(rows):
        timed = r["target"] == "accel" and bool(r.get("cycles"))
        on = r.get("ran_on") or (r["target"] if r["target"] == "accel" or not r.get("cpu_backend")
                                 else f"cpu:{r['cpu_backend']}")
        real, padded = r.get("real_macs"), r.get("padded_macs")
        body.append([str(i), r["name"], r["op"], on, f"{r['cycles']:,}" if timed else "",
                     f"{r['cycles'] / (clock_mhz * 1e3):,.3f}" if timed else "",
                     f"{r['utilization']:.2f}" if timed and r.get("utilization") is not None else "",
                     _mmacs(real) if real else "", _mmacs(padded) if padded else "",
                     f"{r['bytes'] / 1024:.1f}" if r.get("bytes") else "",
                     f"{r['time_ms']:.2f}" if r["target"] != "accel" else "",
                     f"{r['time_ms']:.1f}" if r["target"] == "accel" else ""])
    try:
        from rich.table import Table
    except ImportError:  # plain text
        cells = [[c for c, _ in COLUMNS]] + body + [foot]
        widths = [min(32, max(len(row[k]) for row in cells)) for k in range(len(COLUMNS))]

        def line(row):
            return "  ".join(v[:w].rjust(w) if j == "right" else v[:w].ljust(w)
                             for v, w, (_, j) in zip(row, widths, COLUMNS))
        return "\n".join([title, line(cells[0])] + [line(r) for r in body] + [line(foot)])
    t = Table(title=title, show_footer=True)
    for (c, j), f in zip(COLUMNS, foot):
        t.add_column(c, footer=f, justify=j, no_wrap=True, overflow="ellipsis", max_width=32 if c == "layer" else None)
    for row in body:
        t.add_row(*row)
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


class PlainConsole:
    """``print`` for text and plain-text tables where rich is not installed (the runtime-only install)."""

    def print(self, obj="") -> None:
        print(obj)


def make_console():
    """A rich console at least 150 columns wide (pipes default to 80, too narrow for the tables), or a
    :class:`PlainConsole` without rich."""
    try:
        from rich.console import Console
    except ImportError:
        return PlainConsole()
    return Console(highlight=False, width=max(Console().width, 150))


def input_feeds(args: argparse.Namespace, inputs: dict, console) -> dict:
    """The run's input arrays: from ``--input`` if given, else seeded random ones; printed, with casts announced."""
    if getattr(args, "input", None):
        feeds = load_inputs(args.input, inputs)
        console.print(f"inputs from {args.input}: " + ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in feeds.items()))
    else:
        feeds = random_inputs(inputs, args.seed)
        console.print(f"no --input given: using seeded random input (seed {args.seed}): "
                      + ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in feeds.items()))
    return explicit_casts(feeds, inputs, console)


def is_module_file(path: str) -> bool:
    """Whether ``path`` is an exported module (``vta build``), not an ONNX model."""
    from jit_runtime.module_file import FORMAT, peek_format

    return peek_format(path) == FORMAT


def output_options(args: argparse.Namespace) -> dict[str, str | None]:
    return {"--trace": args.trace, "--outputs": args.outputs, "--plot": args.plot, "--roofline": args.roofline}


def input_files(args: argparse.Namespace) -> dict[str, str | None]:
    """The files a run reads (none may be an output path)."""
    config = getattr(args, "config", None)
    return {"model": args.model, "--input": getattr(args, "input", None),
            "--calibration-data": getattr(args, "calibration_data", None),
            "--tuning-log": getattr(args, "tuning_log", None), "--bitstream": getattr(args, "bitstream", None),
            "--config file": config if config and Path(config).is_file() else None}


def explicit_casts(feeds: dict, inputs: dict, console) -> dict:
    """Float inputs of another float dtype are converted to the model's dtype with a printed notice (never
    silently); other dtype differences are left to the module's check (a clear error)."""
    out = {}
    for k, v in feeds.items():
        want = np.dtype(inputs[k][1]) if k in inputs else v.dtype
        if v.dtype != want and v.dtype.kind == "f" and want.kind == "f":
            console.print(f"note: input {k!r} is {v.dtype}; converted to {want} (the model's input dtype)")
            v = v.astype(want)
        out[k] = v
    return out


def save_outputs(path: str, names: list[str], outs: list[np.ndarray]) -> None:
    """``--outputs``: an .npz of the outputs keyed by name (``np.load(path)[name]``)."""
    with open(path, "wb") as fh:  # a file object keeps numpy from appending ".npz"
        np.savez(fh, **{n: np.asarray(o) for n, o in zip(names, outs)})


def json_rows(rows: list[dict]) -> list[dict]:
    keys = ("name", "op", "target", "ran_on", "cycles", "accel_ms", "utilization", "real_macs", "padded_macs",
            "bytes", "dram_bytes", "time_ms", "compile_ms", "cpu_backend")
    return [{k: r.get(k) for k in keys if k in r} for r in rows]


def json_line(args, cfg_name: str, clock: float, names, outs, rows, summary, extra: dict) -> str:
    import json

    return json.dumps({"model": str(args.model), "target": args.target, "config": cfg_name, "clock_mhz": clock,
                       "outputs": {n: {"shape": list(np.shape(o)), "dtype": str(np.asarray(o).dtype),
                                       "min": float(np.min(o)), "max": float(np.max(o)), "mean": float(np.mean(o))}
                                   for n, o in zip(names, outs)},
                       "summary": summary, "layers": json_rows(rows), **extra}, default=float)


def plot_profile(path: str, rows: list[dict], clock_mhz: float, title: str) -> None:
    """``--plot``: time per layer (accelerator at the clock, host measured) and accelerator utilization."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in rows]
    accel = [r["cycles"] / (clock_mhz * 1e3) if r["target"] == "accel" and r.get("cycles") else 0.0 for r in rows]
    host = [r["time_ms"] if r["target"] != "accel" else 0.0 for r in rows]
    util = [r["utilization"] if r["target"] == "accel" and r.get("utilization") is not None else np.nan for r in rows]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(max(6.0, 0.35 * len(rows) + 2), 6), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    x = np.arange(len(rows))
    ax.bar(x, accel, color="tab:blue", label=f"accelerator (cycles at {clock_mhz:g} MHz)")
    ax.bar(x, host, bottom=accel, color="tab:orange", label="host (measured)")
    ax.set_ylabel("ms")
    ax.set_title(title)
    ax.legend()
    ax2.bar(x, util, color="tab:green")
    ax2.set_ylim(0, 1)
    ax2.set_ylabel("utilization")
    ax2.set_xticks(x, names, rotation=90, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def finish(args, console, cfg_name: str, clock: float, names, outs, rows, summary, extra: dict, hw=None) -> None:
    """The outputs shared by both runs: --outputs, --plot, --roofline (``hw``: the HwConfig), --json."""
    if args.outputs:
        save_outputs(args.outputs, names, outs)
        console.print(f"outputs written to {args.outputs} ({', '.join(names)})")
    if args.plot:
        plot_profile(args.plot, rows, clock, f"{Path(args.model).name} on {args.target} ({cfg_name})")
        console.print(f"per-layer chart written to {args.plot}")
    if args.roofline:
        from vta.roofline import plot_roofline, roofline_points

        roof = roofline_points(rows, hw)
        if not roof["layers"]:
            raise ValueError(f"--roofline: no accelerator layer of this run has cycles and DRAM bytes (target "
                             f"{args.target!r}); use an accelerator target that runs programs: sim, rtl or pynq")
        plot_roofline(args.roofline, roof, f"{Path(args.model).name} on {args.target} ({cfg_name})")
        console.print(f"roofline written to {args.roofline} ({len(roof['layers'])} accelerator layers; ridge at "
                      f"{roof['ridge_intensity']:g} MACs/byte)")
        extra = {**extra, "roofline": roof}
    if args.json:
        print(json_line(args, cfg_name, clock, names, outs, rows, summary, extra))


def run_exported(args: argparse.Namespace) -> int:
    """``vta run FILE.vtamod``: load with the runtime alone and run on --target sim|rtl|pynq."""
    from jit_runtime.exported import load_module

    console = make_console()
    fixed = [o for o, v in (("--calibrate", args.calibrate), ("--calibration-data", args.calibration_data),
                            ("--tuning-log", args.tuning_log), ("--check", args.check), ("--trace", args.trace)) if v]
    if args.cpu != "numpy":
        fixed.append("--cpu")
    if fixed:
        raise ValueError(f"{args.model} is an exported module: it was compiled by `vta build`, so {', '.join(fixed)} "
                         "do not apply (pass them to vta build, or run the ONNX model)")
    if args.target not in ("sim", "sim-functional", "rtl", "pynq"):
        raise ValueError(f"an exported module runs on the accelerator devices sim, rtl or pynq, not --target "
                         f"{args.target!r} (whole-model CPU/GPU targets need the ONNX model)")
    if args.target == "pynq" and not args.bitstream:
        raise ValueError("--target pynq needs --bitstream FILE.bit (written by `vta hw build --board BOARD`)")
    opts = {"bitstream": args.bitstream} if args.target == "pynq" else {}
    m = load_module(args.model, device=args.target, **opts)
    if args.config is not None:
        from isa import make_config

        want = make_config(args.config)
        if want.to_dict() != m.cfg.to_dict():
            raise ValueError(f"{args.model} was compiled for config {m.cfg.name!r}, not --config {args.config} "
                             f"({want.name}); rebuild it with vta build --config {args.config}")
    inputs = {k: (list(s["shape"]), s["dtype"]) for k, s in m.inputs.items()}
    feeds = input_feeds(args, inputs, console)
    console.print(f"running exported module {args.model} ({m.name}, config {m.cfg.name}) on {args.target} ...")
    outs = m.run(feeds)
    for name, out in zip(m.output_names, outs):
        for line in output_summary(name, out):
            console.print(line)
    rows = m.profile()
    clock = float(m.cfg.clock_mhz)
    console.print(layer_table(rows, clock, f"per-layer profile ({args.target}, {m.cfg.name} @ {clock:g} MHz, "
                                           f"exported module)"))
    s = m.profile_summary()
    console.print(f"accelerator: {s['accel_layers']} layers, {s['accel_cycles']:,} cycles = {s['accel_time_ms']:.3f} ms "
                  f"at {clock:g} MHz; host: {s['cpu_layers']} layers, {s['cpu_time_ms']:.1f} ms measured; end to end "
                  f"{s['end_to_end_ms']:.1f} ms")
    finish(args, console, m.cfg.name, clock, m.output_names, outs, rows, s, {"exported": True}, hw=m.cfg)
    return 0


def compile_for_cli(args: argparse.Namespace, console, *, target: str, show: bool):
    """Load, check, calibrate and build ``args.model`` for ``target`` as ``vta run``/``vta build`` do; returns
    (module, config, feeds) with the feeds set as the module's inputs."""
    from compiler.executor import available_accel_backends, build
    from compiler.executor.config import resolve_config
    from compiler.frontend.errors import NonFiniteInputWarning, UnsupportedOperatorError
    from compiler.frontend.onnx_import import check_model_support, load_model
    from compiler.frontend.validate import check_structure
    from compiler.graph.offload import HostFallbackWarning, LossyWeightsWarning
    from compiler.executor.targets import MODEL_TARGETS

    model = load_model(args.model)
    try:
        check_model_support(model)  # before any other work (shape subgraphs folded first)
    except UnsupportedOperatorError as exc:
        raise ValueError(one_line_unsupported(exc)) from None
    check_structure(model, str(args.model))
    model_target = target in MODEL_TARGETS
    if not model_target and target not in available_accel_backends():
        raise ValueError(f"unknown --target {target!r}; available: "
                         f"{', '.join(available_accel_backends() + list(MODEL_TARGETS))}")
    if model_target and getattr(args, "cpu", "numpy") != "numpy":
        raise ValueError(f"--cpu chooses the host backend of accelerator targets; --target {target} compiles "
                         "every layer with the operator library")
    if model_target and args.tuning_log:
        raise ValueError(f"--tuning-log applies to accelerator targets; --target {target} compiles every layer with "
                         "the operator library")
    if target == "pynq" and not getattr(args, "bitstream", None):
        raise ValueError("--target pynq needs --bitstream FILE.bit (written by `vta hw build --board BOARD`)")
    if getattr(args, "roofline", None) and (model_target or target == "ref"):
        raise ValueError(f"--roofline draws accelerator layers from their cycles and DRAM bytes; --target {target} "
                         "runs no accelerator programs (use sim, rtl or pynq)")
    target_options = {"bitstream": args.bitstream} if target == "pynq" else None
    cfg = resolve_config(args.config or "pynq-z1")
    inputs = model_inputs(model)
    feeds = input_feeds(args, inputs, console)
    calibration = None
    if is_quantized(model) and args.calibrate:
        console.print(f"warning: {args.model} is already quantized (QDQ): --calibrate {args.calibrate} is ignored "
                      "(its scales come from the model)")
    if not is_quantized(model) and not (model_target and not args.calibrate):
        if not args.calibrate:
            raise ValueError(f"{args.model} is a float model: the accelerator runs int8. Pass --calibrate N to quantize "
                             "it with N calibration samples (seeded random, or --calibration-data FILE.npy)")
        calibration = calibration_set(args, inputs, feeds)
        src = args.calibration_data or "seeded random normal data"
        console.print(f"float model: quantizing to int8 with {len(calibration)} calibration sample(s) from {src}")
        if not args.calibration_data:
            console.print("warning: calibrating on random data: the int8 scales fit random inputs, not your data, so "
                          "accuracy on real inputs may suffer; pass --calibration-data FILE.npy with real samples "
                          "(docs/getting-started.md)")
    shapes = {k: tuple(v.shape) for k, v in feeds.items()}
    console.print(f"compiling {args.model} for {getattr(cfg, 'name', 'config')} (target {target}) ...")
    with warnings.catch_warnings(record=True) as caught:  # printed once, in the console's words
        warnings.simplefilter("always", HostFallbackWarning)
        warnings.simplefilter("always", LossyWeightsWarning)
        if model_target:
            mod = build(model, cfg, target=target, calibration=calibration, input_shapes=shapes, progress=show)
        else:
            mod = build(model, cfg, target=target, calibration=calibration, input_shapes=shapes, progress=show,
                        cpu=getattr(args, "cpu", "numpy"), target_options=target_options, tuning_log=args.tuning_log)
    for w in caught:
        if issubclass(w.category, (HostFallbackWarning, LossyWeightsWarning)):
            console.print(f"warning: {w.message}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NonFiniteInputWarning)
        for k, v in feeds.items():
            mod.set_input(k, v)
    for w in caught:
        if issubclass(w.category, NonFiniteInputWarning):
            console.print(f"warning: {w.message}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return mod, cfg, feeds


def run(args: argparse.Namespace) -> int:
    logging.getLogger().setLevel(logging.ERROR)
    # before any work: every output path is writable, new (or --force) and none of the inputs
    check_output_paths(output_options(args), input_files(args), args.force)
    if is_module_file(args.model):
        return run_exported(args)
    from compiler.executor.targets import MODEL_TARGETS

    console = make_console()
    target = args.target
    if getattr(args, "check", False):
        if target != "rtl":
            raise ValueError(f"--check compares the RTL with the simulator: it needs --target rtl, not {target!r}")
        target = "rtl-check"
    model_target = target in MODEL_TARGETS
    mod, cfg, _ = compile_for_cli(args, console, target=target, show=not args.no_progress)
    mod.keep_details = bool(args.trace)
    if target == "cuda":
        from compiler.backend.cuda.device import device_kind, gpu_present

        if device_kind() == "gpu" and not gpu_present():
            raise ValueError(f"--target cuda: the model compiled ({len(getattr(mod.cpu, '_plans', {}))} GPU kernels, PTX) "
                             "but this machine has no NVIDIA GPU to run them; use --target llvm to run on the CPU "
                             "(or VTA_CUDA_DEVICE=emulate to check the GPU kernels' values on the CPU, slowly)")
    console.print(f"running on target {target} ...")
    outs = mod.run()
    if target == "cuda" and not args.trace:
        extra_runs = mod.time_on_device()
    clock = float(getattr(cfg, "clock_mhz", 100.0))
    for name, out in zip(mod.output_names, outs):
        for line in output_summary(name, out):
            console.print(line)
    rows = mod.profile()
    console.print(layer_table(rows, clock, f"per-layer profile ({args.target}, {getattr(cfg, 'name', '')} @ {clock:g} MHz)"))
    s = mod.profile_summary()
    extra: dict = {}
    if target == "rtl-check":
        n = s["accel_layers"]
        console.print(f"check: {n} layers: bytes and cycles equal (RTL vs simulator, every accelerator layer compared)")
        extra["check"] = {"layers_compared": n, "equal": True}
    if args.target == "ref":
        console.print("note: target 'ref' is the numpy reference backend: it has no cycle counts")
    if model_target:
        console.print(f"note: target '{args.target}' runs every layer with operator-library kernels "
                      f"({'float32' if not mod.compiled.stats.get('int8_lowered') else 'int8'}): no accelerator cycles")
        console.print(f"{args.target}: {len(rows)} layers, {sum(r['time_ms'] for r in rows):.1f} ms measured on this "
                      f"machine ({s['macs'] / 1e6:.1f} MMACs)")
    else:
        where = "run by the numpy reference backend, target ref" if target == "ref" else f"on {mod.accel.runs_on}" \
            if hasattr(mod.accel, "runs_on") else "on the accelerator"
        console.print(f"accelerator: {s['accel_layers']} layers, {s['accel_cycles']:,} cycles = {s['accel_time_ms']:.3f} ms "
                      f"at {clock:g} MHz, {s['real_macs'] / 1e6:.1f} MMACs ({s['macs'] / 1e6:.1f} with block padding); "
                      f"CPU: {s['cpu_layers']} layers, {s['cpu_time_ms']:.1f} ms host time")
        host_ops = ", ".join(f"{op} x{k}" for op, k in s["host_ops"].items()) or "none"
        console.print(f"where the time goes: {s['accel_mac_fraction']:.1%} of the MACs in accelerator layers ({where}); end to end "
                      f"{s['end_to_end_ms']:.1f} ms (accelerator at {clock:g} MHz + measured host); host ops: {host_ops}")
    if s.get("jit_compile_ms"):
        console.print(f"JIT compilation (once, on first use; not in the rows): {s['jit_compile_ms']:.1f} ms")
    if target == "cuda" and not args.trace:
        extra["layer_times"] = "device" if mod.timed_on_device else "host"
        console.print("per-layer times: the device's own (timed between its events), of a replayed run (run "
                      f"{1 + extra_runs}: the first ones load the kernels and weights)" if mod.timed_on_device else
                      "per-layer times: this host's time to launch each layer (its runs are not replayed and timed on "
                      f"the device: {mod.replay_refusal})")
        if not mod.timed_on_device:
            extra["not_replayed"] = mod.replay_refusal
    plan = mod.compiled.memory_plan
    console.print(f"intermediate tensors: {plan.peak_bytes / 1024:,.1f} KiB arena (static memory plan; "
                  f"{plan.no_reuse_bytes / 1024:,.1f} KiB without reuse)")
    if args.trace:
        source = mod.write_trace(args.trace)
        console.print(f"trace written to {args.trace} (timings from {source}); open it in ui.perfetto.dev")
    finish(args, console, getattr(cfg, "name", ""), clock, mod.output_names, outs, rows, s, extra, hw=cfg)
    return 0
