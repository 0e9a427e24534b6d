"""The sweep in a plain loop: latencies equal the cycle-accurate simulator's, a rerun resumes from the log, points
that cannot be on the front are not synthesized, the front is the set of non-dominated points; the CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.dse import ResourceModel, ResultLog, estimate_resources, latency_record, pareto, parse_space, run_sweep
from compiler.scaleout import LoopRunner
from isa import make_config
from tests.compiler.dse.models import tiny_qdq_model

SPACE = {"base": "tiny", "params": {"log_block_out": [1, 2], "bus_width": [32, 64]}}
CAP = {"LUT": 10_000, "DSP": 40, "RAMB36": 60}


def fake_synth(fields: dict, device: str) -> dict:
    """A stand-in for yosys (seconds, not minutes): the estimate plus 10% LUTs."""
    e = estimate_resources(fields)
    return {"LUT": int(e["LUT"] * 1.1), "DSP": e["DSP"], "RAMB36": e["RAMB36"], "error": None, "seconds": 0.0}


def fake_key(fields: dict, device: str) -> str:
    return "syn-" + device + "-" + json.dumps({k: v for k, v in fields.items() if k != "name"}, sort_keys=True)


RESOURCES = ResourceModel("test-device", CAP, fake_key, fake_synth)


class CountingRunner(LoopRunner):
    def __init__(self):
        self.calls = 0

    def imap(self, fn, items, shared=()):
        self.calls += len(items)
        yield from super().imap(fn, items, shared)


def test_latency_equals_the_simulators_cycles_with_real_data():
    import onnx

    from compiler.executor import build

    cfg = make_config("tiny", log_block_out=1)
    rec = latency_record(cfg.to_dict(), tiny_qdq_model())
    assert rec["error"] is None
    mod = build(onnx.load_model_from_string(tiny_qdq_model()), cfg, target="sim", progress=False)
    mod.run({"input": np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32)})
    cycles = mod.profile_summary()["accel_cycles"]
    assert rec["cycles"] == cycles
    assert rec["latency_ms"] == pytest.approx(cycles / (cfg.clock_mhz * 1e3))


def test_a_point_the_compiler_cannot_serve_is_an_error_record():
    rec = latency_record(make_config("tiny").to_dict(), b"not an onnx model")
    assert rec["cycles"] is None and rec["error"]


def test_pareto_front_by_hand():
    pts = [(1, 9), (2, 5), (3, 5), (4, 1), (5, 2), (1, 9)]
    assert pareto(pts, lambda p: p) == [(1, 9), (2, 5), (4, 1), (1, 9)]


def test_sweep_resumes_skips_dominated_points_and_finds_the_front(tmp_path):
    sp = parse_space(SPACE)
    runner = CountingRunner()
    res = run_sweep(tiny_qdq_model(), sp, tmp_path, RESOURCES, runner)
    assert runner.calls == 4 + res.stats["synthesized"]
    by = {tuple(r["params"].values()): r for r in res.rows}
    # wider GEMM is faster (the model has 16 channels: 2 output blocks of 8 vs 4 of 4)
    assert by[(2, 32)]["cycles"] < by[(1, 32)]["cycles"] and by[(2, 64)]["cycles"] < by[(1, 64)]["cycles"]
    # the skip rule, checked independently: dominated on (latency, estimated utilization) by another point
    for r in res.rows:
        u = lambda q: max(q["estimate"][k] / CAP[k] for k in CAP)  # noqa: E731
        dom = any(q["latency_ms"] <= r["latency_ms"] and u(q) <= u(r) and (q["latency_ms"], u(q)) != (r["latency_ms"], u(r))
                  for q in res.rows)
        assert (r["synth"] == "skipped: dominated on latency and estimated resources") == dom
    # the front: non-dominated among the synthesized points, with their resources
    synth = [r for r in res.rows if r.get("resources")]
    expect = {r["index"] for r in synth if not any(
        q["latency_ms"] <= r["latency_ms"] and q["utilization"] <= r["utilization"]
        and (q["latency_ms"], q["utilization"]) != (r["latency_ms"], r["utilization"]) for q in synth)}
    assert {f["index"] for f in res.front} == expect and expect
    for f in res.front:
        r = next(x for x in synth if x["index"] == f["index"])
        assert (f["LUT"], f["DSP"], f["RAMB36"]) == tuple(fake_synth(r["fields"], "")[k] for k in ("LUT", "DSP", "RAMB36"))
        assert f["fits"] == all(f[k] <= CAP[k] for k in CAP)
    # a rerun evaluates nothing and gives the same front; the log has one line per record
    again = CountingRunner()
    res2 = run_sweep(tiny_qdq_model(), sp, tmp_path, RESOURCES, again)
    assert again.calls == 0 and res2.front == res.front
    log = ResultLog(tmp_path / "dse.jsonl")
    assert len(log) == 4 and log.duplicates == 0 and log.damaged == 0
    assert len((tmp_path / "dse.jsonl").read_text().splitlines()) == 4


def test_a_cut_log_line_is_redone(tmp_path):
    sp = parse_space(SPACE)
    run_sweep(tiny_qdq_model(), sp, tmp_path, None, LoopRunner())
    path = tmp_path / "dse.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][:25])  # a run killed while writing the third record
    runner = CountingRunner()
    run_sweep(tiny_qdq_model(), sp, tmp_path, None, runner)
    log = ResultLog(path)
    assert runner.calls == 2 and len(log) == 4 and log.duplicates == 0 and log.damaged == 1


def test_over_capacity_points_are_not_synthesized(tmp_path):
    small = ResourceModel("small", {"LUT": 1000, "DSP": 10, "RAMB36": 10}, fake_key, fake_synth)
    res = run_sweep(tiny_qdq_model(), parse_space(SPACE), tmp_path, small, LoopRunner())
    assert all(r["synth"].startswith("skipped: estimate") for r in res.rows)
    assert res.front == [] and res.stats["synthesized"] == 0


def test_cli_dse(tmp_path, capsys):
    from vta.cli import main

    model = tmp_path / "m.onnx"
    model.write_bytes(tiny_qdq_model())
    space = tmp_path / "s.json"
    space.write_text(json.dumps({"base": "tiny", "params": {"log_block_out": [1, 2], "bus_width": [32, 128]}}))
    out = tmp_path / "out"
    assert main(["dse", str(model), "--space", str(space), "--board", "pynq-z1", "--workers", "1", "--no-synth",
                 "-o", str(out), "--json"]) == 0
    text = capsys.readouterr().out
    summary = json.loads(text.strip().splitlines()[-1])
    assert summary["points_evaluated"] == 2 and summary["points_pruned_invalid"] == 2  # bus 128: not a PYNQ-Z1 HP width
    assert all("bus_width 128" in p["reason"] for p in summary["pruned"])
    assert (out / "pareto.png").stat().st_size > 0 and (out / "table.txt").exists() and (out / "front.json").exists()
    assert len(ResultLog(out / "dse.jsonl")) == 2


def test_cli_bad_space_is_one_clear_line(tmp_path, capsys):
    from vta.cli import main

    model = tmp_path / "m.onnx"
    model.write_bytes(tiny_qdq_model())
    space = tmp_path / "s.json"
    space.write_text(json.dumps({"base": "tiny", "params": {"bus_widht": [32]}}))
    assert main(["dse", str(model), "--space", str(space), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "vta dse: error: space field 'bus_widht' is not a HwConfig field" in err


def test_tune_1_is_the_analytic_tilings_latency():
    import onnx

    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.executor.registry import create_cpu_backend
    from compiler.executor.module import Module
    from compiler.executor.pipeline import compile_model

    cfg = make_config("tiny", log_block_out=2)
    rec = latency_record(cfg.to_dict(), tiny_qdq_model(), tune=1)
    model = onnx.load_model_from_string(tiny_qdq_model())
    mod = Module(compile_model(model, cfg, progress=False), SimAccelBackend(cfg, tune=1), create_cpu_backend(None),
                 progress=False)
    mod.run({"input": np.random.default_rng(2).standard_normal((1, 8, 8, 8)).astype(np.float32)})
    assert rec["error"] is None and rec["cycles"] == mod.profile_summary()["accel_cycles"]
    assert "tune must be an integer >= 1" in latency_record(cfg.to_dict(), tiny_qdq_model(), tune=0)["error"]
    with pytest.raises(ValueError, match="tune must be an integer >= 1"):
        run_sweep(tiny_qdq_model(), parse_space(SPACE), "unused", tune=0)


def test_no_synth_uses_the_cache_and_runs_no_synthesis(tmp_path):
    sp = parse_space(SPACE)
    cache = tmp_path / "synth.jsonl"
    full = run_sweep(tiny_qdq_model(), sp, tmp_path / "a", RESOURCES, LoopRunner(), synth_cache=cache)
    runner = CountingRunner()
    again = run_sweep(tiny_qdq_model(), sp, tmp_path / "b", RESOURCES, runner, synth_cache=cache, synth=False)
    assert runner.calls == 4  # the latencies of the new log; no synthesis
    assert again.front == full.front and again.stats["synth_missing"] == 0
    empty = run_sweep(tiny_qdq_model(), sp, tmp_path / "b", RESOURCES, LoopRunner(), synth_cache=tmp_path / "none.jsonl",
                      synth=False)
    assert empty.front == [] and empty.stats["synth_missing"] == full.stats["synthesized"] > 0
