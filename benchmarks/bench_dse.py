"""Design-space exploration of ResNet-18 on the PYNQ-Z1's part (Zynq-7020), scaled out on Ray.

    python benchmarks/bench_dse.py [--workers 2] [--out build/dse-bench] [--speed-points 8] [--kill-points 2]
                                   [--tune 2] [--stages ray,loop,kill,sweep] [--no-synth]

Stages (each prints a JSON line; the last line is the summary):

1. ``ray``: the latency stage for ``--speed-points`` points spread over the space (0: all of it) as Ray tasks on
   a local cluster with ``--workers`` CPUs (a fresh log: nothing cached). The workers are started and import the
   evaluation's modules first (``ray_warm_s``), as this process has them for stage 2.
2. ``loop``: the same latency stage in this process, one point after the other (fresh log): ``ray_speedup`` is
   its wall time over stage 1's, ``ray_results_equal`` compares every record field but the wall time.
3. ``kill``: ``--kill-points`` of those points on Ray again (fresh log) while one worker is SIGKILLed mid-task:
   ``worker_killed_lost`` counts points missing, duplicated or different from stage 2's results.
4. ``sweep``: the full sweep (resumes stage 1's latencies and any earlier sweep's): the other points' latencies
   on Ray, estimates, synthesis with sta in the same yosys run (as Ray tasks, at most ``--workers`` at once) of
   the points that can be on the front, cached by the Verilog's hash in ``OUT/synth-cache.jsonl``, their Fmax and
   latency at min(clock, Fmax); the front, the table, the plot (``OUT/sweep/pareto.png``) and where the pynq-z1
   preset stands. ``--no-synth``: only the syntheses already cached.

ResNet-18 is the zoo model quantized as in bench_models (4 seeded calibration images), cached as
``OUT/resnet18_int8.onnx``. Wall times on a shared machine are noisy: run it twice.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

K = 1024
#: The swept space: GEMM width, weight/accumulator scratchpads and the AXI width on the pynq-z1 preset
#: (bus 128 is not a PYNQ-Z1 HP port width: the board prunes it; some buffer/block pairs overflow a micro-op).
SPACE = {"base": "pynq-z1", "params": {"log_block_out": [3, 4, 5], "wgt_buff_size": [64 * K, 128 * K, 256 * K],
                                       "acc_buff_size": [64 * K, 128 * K], "bus_width": [32, 64, 128]}}
BOARD = "pynq-z1"
#: what an evaluation imports (compiler.dse.evaluate.latency_record), imported before either side is timed
WARM_MODULES = ("onnx", "compiler.backend.accel.backend", "compiler.executor.registry", "compiler.executor.module",
                "compiler.executor.pipeline", "compiler.backend.accel.measure", "compiler.dse.evaluate")


def resnet18_int8(out: Path) -> Path:
    path = out / "resnet18_int8.onnx"
    if not path.exists():
        import onnx

        from compiler.quant.ort_tools import ort_quantize_static
        from compiler.zoo import get_model

        rng = np.random.default_rng(0)
        calib = [{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(4)]
        out.mkdir(parents=True, exist_ok=True)
        onnx.save(ort_quantize_static(get_model("resnet18"), calib, reduce_range=True), str(path))
    return path


def _identity(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in ("seconds", "cpu_seconds")}


def _reason_counts(pruned: list[dict]) -> dict[str, int]:
    """How many points each reason pruned (the point's own name taken out of the message)."""
    import re

    out: dict[str, int] = {}
    for p in pruned:
        r = re.sub(r"config '[^']*': ", "", p["reason"])
        r = re.sub(r"^HwConfig: ", "", r)
        out[r] = out.get(r, 0) + 1
    return out


def _board_ok(check, fields) -> bool:
    try:
        check(fields)
    except ValueError:
        return False
    return True


def _descends_from_us(pid: int) -> bool:
    """``pid`` descends from this process (a worker of the cluster it started, not another user's)."""
    me = os.getpid()
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == me:
            return True
    return False


def _kill_one_worker(fn_name: str, stop: threading.Event, killed: list) -> None:
    """SIGKILL the first of our Ray workers seen running ``fn_name`` (its title is ``ray::<fn_name>``)."""
    title = f"ray::{fn_name}".encode()
    while not stop.is_set() and not killed:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(title) and _descends_from_us(int(pid)):
                time.sleep(2.0)  # well into the task
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    killed.append(int(pid))
                except ProcessLookupError:
                    continue
                return
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    import importlib

    from compiler.dse import ResultLog, apply_fmax, parse_space, run_sweep
    from compiler.dse.report import plot, table
    from compiler.scaleout import LoopRunner, RayRunner
    from fpga.boards import get_board
    from isa import make_config
    from vta.commands.dse import sweep_models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="build/dse-bench")
    ap.add_argument("--speed-points", type=int, default=8,
                    help="points of the space timed on Ray and in-process for ray_speedup (0: all)")
    ap.add_argument("--kill-points", type=int, default=2)
    ap.add_argument("--stages", default="ray,loop,kill,sweep",
                    help="stages to run; the figures of the others come from OUT/figures.json (an earlier run)")
    ap.add_argument("--tune", type=int, default=2,
                    help="conv tilings timed per layer shape (2: as build does; 1: the analytic choice, 1/3 the work)")
    ap.add_argument("--no-synth", action="store_true",
                    help="run no yosys in the sweep stage: the front from the syntheses already cached")
    ap.add_argument("--model", help="an int8 ONNX model instead of ResNet-18 (a quick check of the script)")
    ap.add_argument("--space", help="a space JSON file instead of the built-in one")
    args = ap.parse_args(argv)
    out = Path(args.out)
    stages = set(args.stages.split(","))
    model = Path(args.model).read_bytes() if args.model else resnet18_int8(out).read_bytes()
    space_dict = json.loads(Path(args.space).read_text()) if args.space else SPACE
    space = parse_space(space_dict)
    board = get_board(BOARD)

    def check(fields):
        board.check_config(make_config(fields))

    resources, timing = sweep_models("xc7")  # yosys counts and the sta path in one run; Fmax by fpga.timing
    run_id = time.strftime("%H%M%S")
    saved = out / "figures.json"
    figures: dict = json.loads(saved.read_text()) if saved.exists() else {}
    figures.update({"model": args.model or "resnet18 (224x224, int8)", "board": BOARD, "space": space_dict["params"],
                    "workers": args.workers, "tune": args.tune, "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()[0]})

    def save(stage: str, **extra) -> None:
        print(json.dumps({"stage": stage, **extra}), flush=True)
        saved.write_text(json.dumps(figures, indent=1))

    t0 = time.perf_counter()
    ray_runner = RayRunner("local", args.workers)
    figures["ray_init_s"] = round(time.perf_counter() - t0, 2)
    # both sides start with the evaluation's modules imported: this process for the loop, every Ray worker for Ray
    for m in WARM_MODULES:
        importlib.import_module(m)
    figures["ray_warm_s"] = round(ray_runner.warm(WARM_MODULES), 2)
    try:
        # 1. latency on Ray (a fresh log each run: timed from nothing)
        ok_points = [p for p in space.valid if _board_ok(check, p.fields)]
        n = args.speed_points or len(ok_points)
        speed = parse_space(space_dict)
        speed.valid = ok_points[::max(1, len(ok_points) // n)][:n]  # spread over the space
        figures["speed_points"] = [p.params for p in speed.valid]
        ray_dir = out / f"ray-{run_id}"
        if "ray" in stages:
            ray_res = run_sweep(model, speed, ray_dir, resources=None, runner=ray_runner, check=check, progress=True, tune=args.tune)
            figures.update(ray_latency_stage_s=ray_res.stats["latency_stage_s"], ray_dir=str(ray_dir))
            save("ray", latency_stage_s=figures["ray_latency_stage_s"], points=ray_res.stats["points_evaluated"])
        # 2. the same in this process
        loop_dir = out / f"loop-{run_id}"
        if "loop" in stages:
            loop_res = run_sweep(model, speed, loop_dir, resources=None, runner=LoopRunner(), check=check,
                                 progress=True, tune=args.tune)
            figures.update(loop_latency_stage_s=loop_res.stats["latency_stage_s"], loop_dir=str(loop_dir))
            ray_log, loop_log = ResultLog(Path(figures["ray_dir"]) / "dse.jsonl"), ResultLog(loop_dir / "dse.jsonl")
            keys = [r["latency_key"] for r in loop_res.rows]
            figures["ray_results_equal"] = all(ray_log.get(k) is not None and _identity(ray_log.get(k))
                                               == _identity(loop_log.get(k)) for k in keys)
            figures["ray_speedup"] = round(figures["loop_latency_stage_s"] / figures["ray_latency_stage_s"], 3)
            figures["latency_eval_s_mean"] = round(float(np.mean([loop_log.get(k)["seconds"] for k in keys])), 2)
            # the same work on both sides (CPU seconds of the evaluations); wall time per Ray task above its CPU time
            # is time its worker waited for a core (other jobs on a shared machine), not Ray overhead
            figures["loop_cpu_s"] = round(sum(loop_log.get(k).get("cpu_seconds", 0.0) for k in keys), 2)
            figures["ray_tasks_cpu_s"] = round(sum(ray_log.get(k).get("cpu_seconds", 0.0) for k in keys), 2)
            figures["ray_tasks_wall_s"] = round(sum(ray_log.get(k)["seconds"] for k in keys), 2)
            save("loop", **{k: figures[k] for k in ("loop_latency_stage_s", "ray_speedup", "ray_results_equal")})
        # the sweep's own log starts from Ray's latencies of those points (equal to the loop's, checked above)
        main_log = ResultLog(out / "sweep" / "dse.jsonl")
        if "ray_dir" in figures:
            for k, rec in ResultLog(Path(figures["ray_dir"]) / "dse.jsonl").records.items():
                if k not in main_log:
                    main_log.append(rec)
        # 3. a worker killed mid-run
        sub = parse_space(space_dict)
        sub.valid = speed.valid[:args.kill_points]
        kdir = out / f"kill-{run_id}"
        if "kill" in stages:
            loop_log = ResultLog(Path(figures["loop_dir"]) / "dse.jsonl")
            stop, killed = threading.Event(), []
            killer = threading.Thread(target=_kill_one_worker, args=("latency_record", stop, killed), daemon=True)
            killer.start()
            kill_res = run_sweep(model, sub, kdir, resources=None, runner=ray_runner, check=check, tune=args.tune)
            stop.set()
            klog = ResultLog(kdir / "dse.jsonl")
            lost = sum(1 for r in kill_res.rows if r["latency_key"] not in klog
                       or _identity(klog.get(r["latency_key"])) != _identity(loop_log.get(r["latency_key"])))
            figures.update(worker_killed=len(killed), worker_killed_lost=lost + klog.duplicates + klog.damaged,
                           kill_points=len(kill_res.rows), kill_log_lines=len(klog), kill_resubmits=ray_runner.lost)
            save("kill", worker_killed=len(killed), worker_killed_lost=figures["worker_killed_lost"])
        if "sweep" not in stages:
            return 0
        # 4. the full sweep: estimates, synthesis of what can be on the front
        res = run_sweep(model, space, out / "sweep", resources=resources, runner=ray_runner, check=check,
                        synth_cache=out / "synth-cache.jsonl", progress=True, tune=args.tune,
                        synth=not args.no_synth, timing=timing)
    finally:
        ray_runner.close()
    from rich.console import Console

    Console(width=160).print(table(res))
    plot(res, out / "sweep" / "pareto.png", "ResNet-18 on PYNQ-Z1 (xc7z020): latency vs utilization")
    preset = make_config("pynq-z1").to_dict()
    same = [r for r in res.rows if {k: v for k, v in r["fields"].items() if k != "name"}
            == {k: v for k, v in preset.items() if k != "name"}]
    stand: dict = {"in_space": bool(same)}
    if same:
        p = same[0]
        key = resources.key(p["fields"], "xc7")
        cache = ResultLog(out / "synth-cache.jsonl")
        if not p.get("resources") and key not in cache and not args.no_synth:
            # skipped by the estimate: synthesize it anyway to say where it stands
            cache.append({"key": key, "stage": "synth", "device": "xc7", **resources.evaluate(p["fields"], "xc7")})
        if not p.get("resources") and key in cache and cache.get(key)["error"] is None:
            rec = cache.get(key)
            p["resources"] = {k: rec[k] for k in ("LUT", "DSP", "RAMB36")}
            p["utilization"] = max(rec[k] / resources.capacity[k] for k in ("LUT", "DSP", "RAMB36"))
            p["fits"] = p["utilization"] <= 1
            apply_fmax(p, timing.from_synthesis(rec))
        stand.update(index=p["index"], latency_ms=p["latency_ms"], synth=p.get("synth"))
    if same and p.get("resources"):
        front_idx = {f["index"] for f in res.front}
        better = [f for f in res.front if f["fits"] and f["latency_ms"] <= p["latency_ms"]
                  and f["utilization"] <= p["utilization"] and f["index"] != p["index"]]
        stand.update(index=p["index"], on_front=p["index"] in front_idx, latency_ms=p["latency_ms"],
                     clock_mhz=p["fields"]["clock_mhz"], fmax_mhz=p.get("fmax_mhz"), meets=p.get("meets"),
                     latency_ms_at_clock=p.get("latency_ms_at_clock"),
                     utilization=round(p["utilization"], 4), synth=p.get("synth"), **p["resources"],
                     dominated_by=[{"index": f["index"], "params": f["params"], "latency_ms": f["latency_ms"],
                                    "utilization": f["utilization"]} for f in better])
    figures.update({k: res.stats[k] for k in ("points_total", "points_evaluated", "points_pruned_invalid",
                                              "synth_skipped_dominated", "synth_skipped_over_capacity",
                                              "synthesized", "synth_missing", "synth_stage_s", "latency_errors",
                                              "synth_rounds")})
    figures["timing_method"] = res.stats.get("timing_method")
    figures.update(pareto=res.front, best_fitting=res.stats.get("best_fitting"), preset_pynq_z1=stand,
                   pruned_reasons=_reason_counts(res.pruned),
                   load_avg_end=os.getloadavg()[0])
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
