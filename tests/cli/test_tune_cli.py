"""``vta tune``: per-task progress lines, the log it writes, latency before/after, one-line errors."""
from __future__ import annotations

import json
import re

import onnx
import pytest

from compiler.autotune import load_records
from compiler.zoo.builder import OnnxBuilder
from isa import make_config
from vta.cli import main


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    b = OnnxBuilder(11)
    y = b.conv_bn("input", 16, 32, 3)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    p = tmp_path_factory.mktemp("tune") / "m.onnx"
    onnx.save(b.model("m", "input", (1, 16, 6, 6), b.gemm(y, 32, 16)), str(p))
    return p


def test_tune_prints_progress_writes_the_log_and_reports_latency(model_path, tmp_path, capsys):
    log = tmp_path / "m.log"
    assert main(["tune", str(model_path), "--calibrate", "2", "--trials", "3", "--batch", "2", "--workers", "0",
                 "--tuner", "random", "--log", str(log), "--json"]) == 0
    out = capsys.readouterr().out
    lines = re.findall(r"^\[Task +(\d+)/ *(\d+)\] Current/Best: +([\d.]+)/ +([\d.]+) GOPS \| "
                       r"Progress: \((\d+)/3\) \| ([\d.]+) s$", out, re.M)
    assert {(i, n) for i, n, *_ in lines} == {("1", "2"), ("2", "2")}
    assert all(float(best) >= float(cur) for _, _, cur, best, _, _ in lines)
    assert "network latency: before" in out
    res = json.loads(out.strip().splitlines()[-1])
    recs = load_records(log, make_config("pynq-z1"))
    assert len(recs) == sum(t["trials"] for t in res["per_task"]) and all(r.tuner == "random" for r in recs)
    best = {}
    for r in recs:
        best[r.task_key] = min(best.get(r.task_key, r.cycles), r.cycles)
    # the tuned network's accelerator cycles are the sum of each task's best record (one call per task here)
    assert res["cycles_after"] == sum(best.values())
    assert res["cycles_after"] <= res["cycles_before"]


def test_tune_errors_are_one_line(model_path, tmp_path, capsys):
    assert main(["tune", str(model_path), "--log", str(tmp_path / "x.log")]) == 2
    assert "float model" in capsys.readouterr().err
    assert main(["tune", str(model_path), "--calibrate", "1", "--trials", "0", "--log", str(tmp_path / "x.log")]) == 2
    assert "--trials (0)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["tune", str(model_path), "--target", "gpu", "--log", str(tmp_path / "x.log")])
    err = capsys.readouterr().err
    assert "invalid choice: 'gpu'" in err and "'sim'" in err and "'llvm'" in err
    assert main(["tune", str(model_path), "--target", "llvm", "--calibrate", "1", "--log", str(tmp_path / "x.log")]) == 2
    assert "float convs and GEMMs of a float model" in capsys.readouterr().err
    log = str(tmp_path / "x.log")
    assert main(["tune", str(model_path), "--target", "llvm", "--in-model", "-1", "--log", log]) == 2
    assert "--in-model must be >= 0" in capsys.readouterr().err
    assert main(["tune", str(model_path), "--calibrate", "1", "--in-model", "2", "--log", log]) == 2
    assert "--in-model applies to --target llvm" in capsys.readouterr().err


def test_tune_llvm_logs_cpu_records_and_times_the_model(model_path, tmp_path, capsys):
    log = tmp_path / "cpu.log"
    assert main(["tune", str(model_path), "--target", "llvm", "--trials", "2", "--batch", "2", "--tuner", "random",
                 "--log", str(log), "--json"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\[Task +1/ *1\] Current/Best: ", out, re.M) and "network wall time" in out
    res = json.loads(out.strip().splitlines()[-1])
    assert res["target"] == "llvm" and res["tasks"] == 1 and res["wall_ms_after"] > 0
    assert res["tasks_kept"] in (0, 1) and f"kept logged knobs for {res['tasks_kept']} of 1 task(s)" in out
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    timed = [d for d in lines if "in_model" not in d]
    assert len(timed) == 2 and all(d["target"] == "llvm" and d["result"]["ns"] > 0 for d in timed)
    # then each task's fastest settings other than the default (measured first) ran in the model (--in-model 4 by
    # default): one line for the task where the two trials logged one, saying what it chose
    ranked = [d for d in lines if "in_model" in d]
    configs = [json.dumps(d["config"], sort_keys=True) for d in timed]
    others = set(configs[1:]) - {configs[0]}
    assert len(ranked) == res["in_model_ranked"] == (1 if others else 0)
    assert f"{res['in_model_chosen']} of {res['in_model_ranked']} task(s) ran faster" in out
    assert all(d["in_model"]["default_ms"] > 0 and d["result"] is None for d in ranked)
