"""A tuning log's skipped lines: one warning per reason, at its first line, naming the others (a log of another CPU,
device or hardware config is one warning, not one per line)."""
from __future__ import annotations

import json
import warnings

import pytest

from compiler.autotune import TuningLogWarning, load_records
from compiler.autotune import host_timed as ht
from compiler.autotune import llvm_conv as lc
from compiler.autotune.conv_task import fastest_usable
from compiler.autotune.measure import Result
from compiler.autotune.records import MAX_RANGES, SkippedLines, line_ranges
from compiler.topi.conv2d_direct import Conv2dSpec
from isa import make_config


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    assert all(issubclass(w.category, TuningLogWarning) for w in caught), [str(w.message) for w in caught]
    return out, [str(w.message) for w in caught]


def test_line_ranges_sorts_and_joins_runs():
    assert line_ranges(["f.log:12", "f.log:3", "f.log:4", "f.log:5", "f.log:9", "f.log:4"]) == "3-5, 9, 12"
    assert line_ranges(["a:b:7"]) == "7"  # the line is after the last colon
    assert line_ranges(["x.log:3", "somewhere"]) == "x.log:3, somewhere"  # no line number: as they are
    many = [f"f.log:{2 * k}" for k in range(MAX_RANGES + 3)]
    assert line_ranges(many) == ", ".join(str(2 * k) for k in range(MAX_RANGES)) + ", ..."


def test_skipped_lines_warn_once_per_reason_at_the_first_line():
    s = SkippedLines()
    for n in (4, 5, 6, 9):
        s.add(f"x.log:{n}", "record for CPU 'a'", f" (detail {n})")
    s.add("x.log:7", "not JSON (Expecting value at column 1)")
    _, msgs = _caught(s.warn)
    assert msgs == ["x.log:4: record for CPU 'a' (detail 4); skipped (as are 3 more line(s) for the same reason: "
                    "5-6, 9)",
                    "x.log:7: not JSON (Expecting value at column 1); skipped"]
    _, again = _caught(s.warn)
    assert again == []  # warned once


def _llvm_task(o: int = 8) -> lc.LlvmConvTask:
    return lc.LlvmConvTask(Conv2dSpec(1, 8, 8, 8, o, 3, 3, pads=(1, 1, 1, 1)), bias=True)


def _llvm_line(task, cpu=None) -> str:
    line = json.loads(task.record_line(task.default_knobs(), Result(1000, None, 0.0), "test"))
    if cpu is not None:
        line["cpu"] = cpu
    return json.dumps(line)


def test_a_log_of_another_cpu_is_one_warning(tmp_path):
    task = _llvm_task()
    other = {"name": "x86-64-v3", "hash": "0" * 12}
    lines = [_llvm_line(task, other) for _ in range(40)]
    lines += [json.dumps({"vta_tuning": 1, "hw": {}, "task": {}, "config": {}})] * 3  # accelerator records
    lines += ["{broken", _llvm_line(task), "[1, 2"]
    log = tmp_path / "o.log"
    log.write_text("\n".join(lines) + "\n")
    recs, msgs = _caught(lambda: lc.load_llvm_records(log))
    assert len(recs) == 1 and recs[0][3] == f"{log}:45"
    want = ht.cpu_ident()

    def not_json(text: str) -> str:
        try:
            json.loads(text + "\n")
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg} at column {exc.colno})"
        raise AssertionError(text)
    assert msgs == [
        f"{log}:1: record for LLVM target CPU 'x86-64-v3' (hash {'0' * 12}), but this build compiles for "
        f"{want['name']!r} (hash {want['hash']}); skipped (as are 39 more line(s) for the same reason: 2-40)",
        f"{log}:41: a record for the accelerator, not the llvm target; skipped (as are 2 more line(s) for the same "
        f"reason: 42-43)",
        f"{log}:44: {not_json('{broken')}; skipped", f"{log}:46: {not_json('[1, 2')}; skipped"]


def test_records_of_tasks_not_in_the_model_are_one_warning_naming_the_fastest(tmp_path):
    mine, a, b = _llvm_task(8), _llvm_task(16), _llvm_task(24)
    k = mine.default_knobs()
    records = [(a.ident, k, 300, "m.log:1"), (b.ident, k, 200, "m.log:2"), (a.ident, k, 100, "m.log:3"),
               (mine.ident, k, 50, "m.log:4"), (b.ident, k, 400, "m.log:5")]
    chosen, msgs = _caught(lambda: fastest_usable([mine], records, "m.log", "llvm"))
    assert chosen == {mine.key: k}
    assert msgs == [f"m.log:3: record for a task that is not in this model (conv2d_float: {a.ident['spec']}); "
                    "skipped (as are 3 more line(s) for the same reason: 1-2, 5)"]


def test_an_accelerator_log_of_another_config_is_one_warning(tmp_path):
    cfg = make_config("pynq-z1")
    line = {"vta_tuning": 1, "hw": {"name": "ultra96", "hash": "0123456789ab"}, "task": {}, "config": {},
            "result": None, "error": None, "time": 0.0}
    log = tmp_path / "a.log"
    llvm = _llvm_line(_llvm_task())
    log.write_text("\n".join([json.dumps(line)] * 25 + [llvm] * 3) + "\n")
    recs, msgs = _caught(lambda: load_records(log, cfg))
    assert recs == [] and len(msgs) == 2
    assert msgs[0].startswith(f"{log}:1: record for hardware config 'ultra96' (hash 0123456789ab)")
    assert msgs[0].endswith("; skipped (as are 24 more line(s) for the same reason: 2-25)")
    assert msgs[1] == (f"{log}:26: a record for target 'llvm', not the accelerator; skipped (as are 2 more line(s) "
                       "for the same reason: 27-28)")


def test_a_cuda_log_of_another_device_is_one_warning(tmp_path, monkeypatch):
    from compiler.autotune import cuda_conv as cc

    monkeypatch.setattr(cc, "device_ident", lambda: {"name": "emulate", "arch": "sm_80"})
    line = {"vta_tuning": 1, "target": "cuda", "gpu": {"name": "NVIDIA H200", "arch": "sm_90"}, "task": {},
            "config": {}, "result": {"ns": 5}}
    log = tmp_path / "c.log"
    log.write_text("\n".join(json.dumps(line) for _ in range(12)) + "\n" + json.dumps(dict(line, target="llvm")) + "\n")
    recs, msgs = _caught(lambda: cc.load_cuda_records(log))
    assert recs == [] and len(msgs) == 2
    assert msgs[0] == (f"{log}:1: record for device {{'name': 'NVIDIA H200', 'arch': 'sm_90'}}, but this build runs "
                       "on {'name': 'emulate', 'arch': 'sm_80'}; skipped (as are 11 more line(s) for the same reason: "
                       "2-12)")
    assert msgs[1] == f"{log}:13: a record for target 'llvm', not the cuda target; skipped"


@pytest.mark.parametrize("n", [1, 2])
def test_one_skipped_line_names_no_others(tmp_path, n):
    s = SkippedLines()
    for k in range(n):
        s.add(f"z.log:{k + 1}", "why")
    _, msgs = _caught(s.warn)
    assert msgs == ["z.log:1: why; skipped" + ("" if n == 1 else " (as are 1 more line(s) for the same reason: 2)")]
