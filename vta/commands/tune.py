"""``vta tune MODEL.onnx --trials N --log FILE``: tune every accelerator kernel of a model on the simulator,
then compile with the log and report the network latency before and after."""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings

TARGETS = ("sim", "llvm", "cuda")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="auto-tune a model's kernels (accelerator: simulator cycles; llvm/cuda: "
                                    "timed on this CPU/GPU)",
                       description="Extracts the model's tasks (the accelerator's conv2d/dense, or the float convs, "
                                   "products and pools of --target llvm|cuda, per shape and epilogue), tunes each "
                                   "with measurements, appends every trial to --log, then builds with the log and "
                                   "prints the network latency before and after.")
    p.add_argument("model", help="ONNX model file (int8 QDQ, or float with --calibrate)")
    p.add_argument("--target", default="sim", choices=TARGETS,
                   help="what to tune: sim (default: the accelerator kernels, measured on the cycle-accurate "
                        "simulator), llvm (the float convs', GEMMs' and max pools' CPU schedules of a float model, "
                        "timed on this CPU) or cuda (the GPU schedules of its convs, depthwise convs, products and "
                        "pools, timed on the GPU)")
    p.add_argument("--config", default="pynq-z1", help="hardware preset or JSON file (default pynq-z1)")
    p.add_argument("--trials", type=int, default=32, help="measured candidates per task (default 32)")
    p.add_argument("--log", required=True, help="tuning log (JSON lines; appended to)")
    p.add_argument("--tuner", default="xgb", choices=("xgb", "random", "grid"), help="search strategy (default xgb)")
    p.add_argument("--batch", type=int, default=8, help="candidates measured per batch (default 8)")
    p.add_argument("--workers", type=int, default=None, help="measurement processes (default: os.cpu_count(); "
                                                                "llvm times in this process)")
    p.add_argument("--ray", metavar="ADDRESS", help="measure as Ray tasks instead: 'local' starts a local cluster with --workers CPUs, or a "
                        "cluster address such as 'auto' (pip install 'vta-stack[ray]')")
    p.add_argument("--calibrate", type=int, metavar="N", help="quantize a float model with N seeded random samples")
    p.add_argument("--seed", type=int, default=0, help="seed of the tuners, the input and calibration data")
    p.add_argument("--in-model", type=int, default=None, metavar="K",
                   help="--target llvm: run each task's K fastest settings in the whole model and log the one its "
                        "layers ran fastest with, or the default (default 4; 0: skip, and an in-model line an "
                        "earlier run logged still decides)")
    p.add_argument("--json", action="store_true", help="end with one JSON object (latencies, per-task results)")
    p.set_defaults(func=run)


def _latency(mod, feeds) -> tuple[int, float]:
    mod.run(feeds)
    s = mod.profile_summary()
    return int(s["accel_cycles"]), float(s["accel_time_ms"])


def run(args: argparse.Namespace) -> int:
    from compiler.autotune import LocalMeasurer, RayMeasurer, extract_tasks, progress_printer, tune_tasks
    from compiler.executor import build
    from compiler.frontend.onnx_import import load_model
    from vta.commands.run import is_quantized, model_inputs, random_inputs

    if args.trials < 1 or args.batch < 1:
        raise ValueError(f"--trials ({args.trials}) and --batch ({args.batch}) must be >= 1")
    if args.target not in TARGETS:
        raise ValueError(f"unknown tuning target {args.target!r}; allowed: {', '.join(TARGETS)}")
    logging.getLogger().setLevel(logging.ERROR)
    if args.target == "llvm":
        return run_llvm(args)
    if args.target == "cuda":
        return run_cuda(args)
    if args.in_model is not None:
        raise ValueError("--in-model applies to --target llvm (the accelerator's cycles do not depend on the "
                         "neighbouring layers)")
    model = load_model(args.model)
    inputs = model_inputs(model)
    feeds = random_inputs(inputs, args.seed)
    calibration = None
    if not is_quantized(model):
        if not args.calibrate:
            raise ValueError(f"{args.model} is a float model: pass --calibrate N to quantize it to int8 first")
        name, x = next(iter(feeds.items()))
        rng = __import__("numpy").random.default_rng(args.seed + 1)
        calibration = rng.standard_normal((args.calibrate * x.shape[0],) + x.shape[1:]).astype(x.dtype)
    shapes = {k: tuple(v.shape) for k, v in feeds.items()}
    mod = build(model, args.config, target=args.target, calibration=calibration, input_shapes=shapes, progress=False)
    tasks = extract_tasks(mod.compiled, mod.accel)
    print(f"{len(tasks)} task(s) to tune with {args.tuner}, {args.trials} trials each; log: {args.log}")
    before = _latency(mod, feeds)
    measurer = RayMeasurer(args.ray, args.workers) if args.ray else LocalMeasurer(args.workers)
    t0 = time.perf_counter()
    with measurer:
        results = tune_tasks(tasks, measurer, args.tuner, args.trials, args.batch, args.log, args.seed,
                             progress_printer(sys.stdout))
    tune_s = time.perf_counter() - t0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = build(model, args.config, target=args.target, calibration=calibration, input_shapes=shapes,
                      progress=False, tuning_log=args.log)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    after = _latency(tuned, feeds)
    print(f"tuned {len(tasks)} task(s) in {tune_s:.1f} s; rejected before measurement: "
          f"{sum(sum(r.rejected.values()) for r in results)}; failed measurements: "
          f"{sum(r.invalid_measured for r in results)}")
    print(f"network latency: before {before[1]:.3f} ms ({before[0]:,} cycles), after {after[1]:.3f} ms "
          f"({after[0]:,} cycles), speed-up {before[0] / after[0]:.3f}x")
    if args.json:
        print(json.dumps({"tasks": len(tasks), "trials": args.trials, "tuner": args.tuner,
                          "cycles_before": before[0], "cycles_after": after[0], "latency_ms_before": before[1],
                          "latency_ms_after": after[1], "tune_seconds": round(tune_s, 2),
                          "per_task": [{"task": r.task.describe(), "cycles": r.cycles, "trials": r.trials,
                                        "rejected": r.rejected} for r in results]}))
    return 0


def model_wall_ms(mod, feeds, repeats: int = 5) -> float:
    """Median wall-clock ms of a whole-model run (after one warm-up run)."""
    mod.run(feeds)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        mod.run(feeds)
        ts.append(time.perf_counter() - t0)
    return 1e3 * sorted(ts)[len(ts) // 2]


def _build_tuned_and_compare(model, target: str, shapes: dict, log: str, base, feeds: dict, tasks: list,
                             results: list, tune_s: float, where: str) -> tuple[int, float, float]:
    """Build ``model`` for ``target`` with ``log`` (its warnings printed), time it against ``base`` (the untuned
    build) alternately, print the summary lines; ``(tasks kept, ms before, ms after)``."""
    from compiler.autotune.llvm_conv import MIN_GAIN
    from compiler.executor import build

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = build(model, target=target, input_shapes=shapes, progress=False, tuning_log=log)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    before, after = [], []
    for _ in range(3):  # alternating, min of each side
        before.append(model_wall_ms(base, feeds))
        after.append(model_wall_ms(tuned, feeds))
    b, a = min(before), min(after)
    kept = tuned.compiled.stats.get("tuned_tasks", 0)
    print(f"tuned {len(tasks)} task(s) in {tune_s:.1f} s; rejected before measurement: "
          f"{sum(sum(r.rejected.values()) for r in results)}; failed measurements: "
          f"{sum(r.invalid_measured for r in results)}")
    print(f"the build kept logged knobs for {kept} of {len(tasks)} task(s) (the others: no faster than the default "
          f"by {MIN_GAIN:.0%}, {where})")
    print(f"network wall time (min of alternating medians): before {b:.3f} ms, after {a:.3f} ms, "
          f"speed-up {b / a:.3f}x")
    return kept, b, a


def run_llvm(args: argparse.Namespace) -> int:
    """``vta tune MODEL --target llvm``: tune the float convs' and GEMMs' CPU schedules (their ``schedule_cpu``'s
    knobs) by timing
    compiled kernels on this CPU, then build with and without the log and time the whole model."""
    from compiler.autotune import progress_printer, tune_tasks
    from compiler.autotune.llvm_conv import MIN_GAIN, LlvmMeasurer
    from compiler.executor.llvm_rank import CANDIDATES as IN_MODEL, rank_in_model
    from compiler.executor.llvm_tasks import extract_llvm_tasks
    from compiler.executor import build
    from compiler.frontend.onnx_import import load_model
    from vta.commands.run import is_quantized, model_inputs, random_inputs

    if args.ray:
        raise ValueError("--ray does not apply to --target llvm: kernels are timed on this CPU, one at a time")
    if args.in_model is None:
        args.in_model = IN_MODEL
    if args.in_model < 0:
        raise ValueError(f"--in-model must be >= 0 (settings run in the model per task; 0: skip), got {args.in_model}")
    model = load_model(args.model)
    if is_quantized(model) or args.calibrate:
        raise ValueError(f"--target llvm tunes the float convs and GEMMs of a float model; {args.model} is "
                         f"quantized or --calibrate was given (int8 CPU kernels have no tuning space yet)")
    feeds = random_inputs(model_inputs(model), args.seed)
    shapes = {k: tuple(v.shape) for k, v in feeds.items()}
    tasks = extract_llvm_tasks(model, shapes)
    print(f"{len(tasks)} llvm task(s) (convs and products) to tune with {args.tuner}, {args.trials} trials each; "
          f"log: {args.log}")
    t0 = time.perf_counter()
    with LlvmMeasurer() as measurer:
        results = tune_tasks(tasks, measurer, args.tuner, args.trials, args.batch, args.log, args.seed,
                             progress_printer(sys.stdout))
    tune_s = time.perf_counter() - t0
    base = build(model, target="llvm", input_shapes=shapes, progress=False)
    ranked = {}
    if args.in_model:
        ranked = rank_in_model(model, args.log, candidates=args.in_model, feeds=feeds, base=base)
        print(f"in the model ({args.in_model} fastest settings a task): {sum(v is not None for v in ranked.values())} "
              f"of {len(ranked)} task(s) ran faster with a logged setting than with the default by {MIN_GAIN:.0%}")
    kept, b, a = _build_tuned_and_compare(model, "llvm", shapes, args.log, base, feeds, tasks, results, tune_s,
                                          "alone and in the model")
    if args.json:
        print(json.dumps({"target": "llvm", "tasks": len(tasks), "trials": args.trials, "tuner": args.tuner,
                          "tasks_kept": kept, "in_model_chosen": sum(v is not None for v in ranked.values()),
                          "in_model_ranked": len(ranked), "wall_ms_before": b, "wall_ms_after": a,
                          "tune_seconds": round(tune_s, 2),
                          "per_task": [{"task": r.task.describe(), "ns": r.cycles, "trials": r.trials,
                                        "rejected": r.rejected} for r in results]}))
    return 0


def run_cuda(args: argparse.Namespace) -> int:
    """``vta tune MODEL --target cuda``: tune the float convs', products' and pools' GPU schedules (knobs of
    ``conv2d_gpu.schedule_gpu``, ``conv2d_direct.schedule_gpu``, ``pool.schedule_gpu``)
    by timing compiled kernels on the device, then build with and without the log and time the whole model."""
    from compiler.autotune import progress_printer, tune_tasks
    from compiler.autotune.cuda_conv import CudaMeasurer, device_ident, graph_tasks
    from compiler.backend.cuda.device import NoGpuError, get_device
    from compiler.executor import build
    from compiler.frontend.onnx_import import load_model
    from vta.commands.run import is_quantized, model_inputs, random_inputs

    if args.ray:
        raise ValueError("--ray does not apply to --target cuda: kernels are timed on this machine's GPU, one at a time")
    if args.in_model is not None:
        raise ValueError("--in-model applies to --target llvm (CPU kernels that share caches and cores with their "
                         "neighbours); --target cuda's build keeps each task's fastest logged schedule where it "
                         "beats the default alone and in the model")
    model = load_model(args.model)
    if is_quantized(model) or args.calibrate:
        raise ValueError(f"--target cuda tunes the float convs of a float model; {args.model} is quantized or "
                         f"--calibrate was given (int8 GPU kernels have no tuning space yet)")
    try:
        get_device()  # before anything is compiled
    except NoGpuError as exc:
        raise ValueError(f"--target cuda times kernels on a GPU: {exc}") from None
    feeds = random_inputs(model_inputs(model), args.seed)
    shapes = {k: tuple(v.shape) for k, v in feeds.items()}
    base = build(model, target="cuda", input_shapes=shapes, progress=False)
    tasks = graph_tasks(base.graph)
    dev = device_ident()
    print(f"{len(tasks)} cuda task(s) (convs, products and pools) to tune with {args.tuner}, {args.trials} trials "
          f"each, on {dev['name']} ({dev['arch']}); log: {args.log}")
    t0 = time.perf_counter()
    with CudaMeasurer() as measurer:
        results = tune_tasks(tasks, measurer, args.tuner, args.trials, args.batch, args.log, args.seed,
                             progress_printer(sys.stdout))
    tune_s = time.perf_counter() - t0
    kept, b, a = _build_tuned_and_compare(model, "cuda", shapes, args.log, base, feeds, tasks, results, tune_s,
                                          "alone and in the model, on this device")
    if args.json:
        print(json.dumps({"target": "cuda", "device": dev, "tasks": len(tasks), "trials": args.trials,
                          "tuner": args.tuner, "tasks_kept": kept, "wall_ms_before": b, "wall_ms_after": a,
                          "tune_seconds": round(tune_s, 2),
                          "per_task": [{"task": r.task.describe(), "ns": r.cycles, "trials": r.trials,
                                        "rejected": r.rejected} for r in results]}))
    return 0
