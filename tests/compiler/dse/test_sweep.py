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


def fmax_synth(fields: dict, device: str) -> dict:
    """fake_synth plus an Fmax, as a synthesis run that also timed its netlist: the 64-bit bus misses tiny's
    25 MHz clock (10 MHz), the 32-bit one makes it (100 MHz)."""
    return {**fake_synth(fields, device), "fake_fmax": 10.0 if fields["bus_width"] == 64 else 100.0}


def from_synth(rec: dict) -> dict:
    return {"fmax_mhz": rec["fake_fmax"], "error": None}


def _dominated(a, b):
    return all(y <= x for x, y in zip(a, b)) and a != b


def test_fmax_sets_the_latency_at_the_clock_a_point_can_run(tmp_path):
    from compiler.dse import TimingModel

    cap = {"LUT": 100_000, "DSP": 40, "RAMB36": 60}  # DSP-bound: a bus width changes the latency, not the estimate
    res_model = ResourceModel("test-device", cap, fake_key, fmax_synth)
    timing = TimingModel("fake", from_synthesis=from_synth)
    runner = CountingRunner()
    res = run_sweep(tiny_qdq_model(), parse_space(SPACE), tmp_path, res_model, runner, timing=timing)
    clock = make_config("tiny").clock_mhz
    timed = [r for r in res.rows if r.get("resources")]
    assert timed and runner.calls == 4 + len(timed)  # the Fmax came with the synthesis: no run of its own
    for r in timed:
        fmax = 10.0 if r["params"]["bus_width"] == 64 else 100.0
        assert r["fmax_mhz"] == fmax and r["meets"] == (fmax >= clock)
        assert r["latency_ms"] == pytest.approx(r["cycles"] / (min(clock, fmax) * 1e3))
        assert r["latency_ms_at_clock"] == pytest.approx(r["cycles"] / (clock * 1e3))
    assert any(r["meets"] is False for r in timed)
    # the skip rule after the candidates' Fmax is known: a skipped point is dominated by a point's final latency
    # (achievable where timed), and every point that no final value dominates was synthesized
    u = {r["index"]: max(r["estimate"][k] / cap[k] for k in cap) for r in res.rows}
    for r in res.rows:
        nominal = r["cycles"] / (clock * 1e3)
        dom = any(_dominated((nominal, u[r["index"]]), (q["latency_ms"], u[q["index"]])) for q in res.rows if q is not r)
        if r["synth"].startswith("skipped: dominated"):
            assert dom
        if not dom:
            assert r["synth"] == "synthesized"
    # a 32-bit point first skipped behind its faster 64-bit twin is synthesized once the twin's 10 MHz is known
    assert res.stats["synth_rounds"] == 2
    expect = {r["index"] for r in timed if not any(_dominated((r["latency_ms"], r["utilization"]),
                                                              (q["latency_ms"], q["utilization"])) for q in timed)}
    assert {f["index"] for f in res.front} == expect
    assert all(f["fmax_mhz"] is not None and f["clock_mhz"] == clock for f in res.front)


def ecp5_like_timing(fields: dict) -> dict:
    return {"fmax_mhz": 12.5 * fields["log_block_out"], "error": None, "seconds": 0.0}


def test_a_timing_run_of_its_own_is_cached_like_synthesis(tmp_path):
    from compiler.dse import TimingModel

    timing = TimingModel("fake run", key=lambda f: "tim-" + fake_key(f, ""), evaluate=ecp5_like_timing)
    runner = CountingRunner()
    cache = tmp_path / "cache.jsonl"
    res = run_sweep(tiny_qdq_model(), parse_space(SPACE), tmp_path / "a", RESOURCES, runner, timing=timing,
                    synth_cache=cache)
    timed = [r for r in res.rows if r.get("resources")]
    assert runner.calls == 4 + 2 * len(timed)  # latency, synthesis and one timing run per synthesized point
    for r in timed:
        assert r["fmax_mhz"] == 12.5 * r["params"]["log_block_out"]
    again = CountingRunner()
    res2 = run_sweep(tiny_qdq_model(), parse_space(SPACE), tmp_path / "b", RESOURCES, again, timing=timing,
                     synth_cache=cache, synth=False)
    assert again.calls == 4 and res2.front == res.front  # only the new log's latencies; timing from the cache
    with pytest.raises(ValueError, match="either from_synthesis or both key and evaluate"):
        TimingModel("neither")


def test_the_chosen_tiling_is_timed_once(monkeypatch):
    """SimAccelBackend(tune=2) on the timing-only device: every program is timed once (the chooser's candidates;
    the backend's run of the chosen one reuses its timing), and the cycles are the simulator's with real data."""
    import onnx

    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.executor.registry import create_cpu_backend
    from compiler.executor.module import Module
    from compiler.executor.pipeline import compile_model
    from compiler.backend.accel import measure as tune

    cfg = make_config("tiny", log_block_out=2, wgt_buff_size=16384)  # a config no other test compiled
    runs: list = []
    real = tune.TimingOnlyDevice.run

    def counted(self, dram, insn_addr, n_insns):
        runs.append((id(dram), insn_addr, n_insns))
        return real(self, dram, insn_addr, n_insns)

    monkeypatch.setattr(tune.TimingOnlyDevice, "run", counted)
    tune._CACHE.clear()
    tune._PROGRAMS.clear()
    model = onnx.load_model_from_string(tiny_qdq_model())
    mod = Module(compile_model(model, cfg, progress=False), SimAccelBackend(cfg, device=tune.TimingOnlyDevice(cfg)),
                 create_cpu_backend(None), progress=False)
    mod.run({"input": np.zeros((1, 8, 8, 8), np.float32)})
    measured = list(tune._PROGRAMS.values())
    assert measured and len(runs) == len(measured) == sum(kp.timed is not None for kp in measured)
    sim = Module(compile_model(model, cfg, progress=False), SimAccelBackend(cfg), create_cpu_backend(None),
                 progress=False)
    sim.run({"input": np.random.default_rng(3).standard_normal((1, 8, 8, 8)).astype(np.float32)})
    assert mod.profile_summary()["accel_cycles"] == sim.profile_summary()["accel_cycles"] > 0


def test_the_latency_stage_submits_the_largest_evaluations_first(tmp_path):
    """Fewer MACs per cycle (more GEMM blocks to compile and time) first: the last tasks to finish are short."""
    from compiler.dse.evaluate import latency_cost

    class Recording(LoopRunner):
        items: list = []

        def imap(self, fn, items, shared=()):
            self.items = list(items)
            yield from super().imap(fn, items, shared)

    runner = Recording()
    run_sweep(tiny_qdq_model(), parse_space(SPACE), tmp_path, None, runner)
    blocks = [f["log_block_out"] for f in runner.items]
    assert blocks == sorted(blocks) and len(blocks) == 4  # block_out 2 before 4
    assert [latency_cost(f) for f in runner.items] == sorted(latency_cost(f) for f in runner.items)
