"""Tuning records: reload and rebuild byte-identical programs; build(tuning_log=) with good and bad logs."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from compiler.backend.accel.backend import Replay, compile_conv2d
from compiler.autotune import (RandomTuner, Task, TuningLog, TuningLogWarning, best_records, extract_tasks,
                               load_records, measure, tune_tasks)
from compiler.autotune.measure import Result
from compiler.executor import build
from jit_runtime.host_ops.requant import Requant
from compiler.topi.conv2d import ConvShape
from compiler.topi.knobs import ConvKnobs
from compiler.zoo.builder import OnnxBuilder
from isa import make_config

CFG = make_config("pynq-z1")
RQ = Requant(shift=7, relu=True, out_min=0, out_max=127)
TASK = Task(CFG, ConvShape(1, 1, 2, 2, 6, 6, 3, 3, (1, 1), (1, 1, 1, 1)), None, RQ)


def _run(t, batch):
    return [measure(t, k) for k in batch]


def _program_bytes(knobs: ConvKnobs) -> bytes:
    rep = Replay(CFG, compile_conv2d(CFG, TASK.shape, None, RQ, knobs))
    return rep.program.dram.tobytes()


def test_records_reload_and_rebuild_byte_identical_programs(tmp_path):
    log = tmp_path / "t.log"
    tuner = RandomTuner(TASK, seed=3)
    tuner.tune(6, _run, batch_size=3, log=TuningLog(log))
    lines = log.read_text().splitlines()
    assert len(lines) == 6
    recs = load_records(log, CFG)
    assert [r.cycles for r in recs] == [r.cycles for _, r in tuner.history]
    best = best_records(recs)[TASK.key]
    assert best.cycles == tuner.best_cycles and best.knobs == tuner.best_knobs
    assert _program_bytes(best.knobs) == _program_bytes(tuner.best_knobs)
    obj = json.loads(lines[0])
    assert set(obj) >= {"task", "config", "result", "error", "time"}


def _model():
    b = OnnxBuilder(3)
    y = b.conv_bn("input", 16, 32, 3)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    return b.model("m", "input", (1, 16, 6, 6), b.gemm(y, 32, 16))


CALIB = np.random.default_rng(0).standard_normal((4, 16, 6, 6)).astype(np.float32)
X = np.random.default_rng(1).standard_normal((1, 16, 6, 6)).astype(np.float32)


@pytest.fixture(scope="module")
def tuned_log(tmp_path_factory):
    """A log of the model's tasks, and the module built without it (reference outputs and cycles)."""
    log = tmp_path_factory.mktemp("log") / "m.log"
    base = build(_model(), "pynq-z1", calibration=CALIB, progress=False)
    tasks = extract_tasks(base.compiled, base.accel)
    res = tune_tasks(tasks, _run, "random", n_trial=4, batch_size=4, log=str(log))
    base(input=X)
    return log, tasks, res, base


def test_build_applies_the_best_record_per_task(tuned_log):
    log, tasks, res, base = tuned_log
    assert len(tasks) == 2 and all(r.invalid_measured == 0 for r in res)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningLogWarning)
        mod = build(_model(), "pynq-z1", calibration=CALIB, progress=False, tuning_log=log)
    out = mod(input=X)
    np.testing.assert_array_equal(out, base.get_output(0))
    used = sorted((rep.comp.kernel.knobs for rep in mod.accel._replays.values()), key=repr)
    assert used == sorted((r.knobs for r in res), key=repr)
    cyc = [row["cycles"] for row in mod.profile() if row["target"] == "accel"]
    assert sorted(cyc) == sorted(r.cycles for r in res)


def _bad_lines(tasks) -> list[str]:
    other = make_config("ultra96")
    good = json.loads(tasks_line(tasks[0]))
    foreign_cfg = dict(good, hw={"name": other.name, "hash": "0123456789ab"})
    unknown = json.loads(tasks_line(Task(CFG, ConvShape(1, 1, 3, 3, 5, 5, 1, 1, (1, 1), (0, 0, 0, 0)), None, RQ)))
    bad_knob = dict(good, config=dict(good["config"], vthread_axis="z"))
    unusable = dict(good, config=dict(good["config"], vthreads=4, vthread_axis="oc"), result={"cycles": 1, "gops": 1.0})
    return ["{not json", json.dumps({"some": "other tool"}), json.dumps(foreign_cfg), json.dumps(unknown),
            json.dumps(bad_knob), json.dumps(unusable), ""]


def tasks_line(task: Task) -> str:
    from compiler.autotune.records import record_line

    return record_line(task, ConvKnobs(1, 1, 1, 1), Result(1000, None, 0.1))


def test_bad_log_lines_warn_with_their_line_and_the_build_still_runs(tuned_log, tmp_path):
    log, tasks, res, base = tuned_log
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join(_bad_lines(tasks)) + "\n")
    with pytest.warns(TuningLogWarning) as caught:
        mod = build(_model(), "pynq-z1", calibration=CALIB, progress=False, tuning_log=bad)
    msgs = [str(w.message) for w in caught]
    want = {1: "not JSON", 2: "not a vta-stack tuning record", 3: "hardware config 'ultra96'",
            4: "not in this model", 5: "malformed tuning record", 6: "cannot be used"}
    for line, text in want.items():
        assert any(f"{bad}:{line}:" in m and text in m for m in msgs), (line, msgs)
    assert any("no usable record for 2 of 2 task(s)" in m and "analytic choice" in m for m in msgs)
    np.testing.assert_array_equal(mod(input=X), base.get_output(0))


def test_missing_log_fails_before_compiling(tmp_path):
    with pytest.raises(FileNotFoundError, match="tuning log .*nope.log does not exist"):
        build(_model(), "pynq-z1", calibration=CALIB, progress=False, tuning_log=tmp_path / "nope.log")


def test_ref_target_ignores_the_log_with_a_warning(tuned_log):
    log = tuned_log[0]
    with pytest.warns(TuningLogWarning, match="no tunable kernels"):
        build(_model(), "pynq-z1", target="ref", calibration=CALIB, progress=False, tuning_log=log)
