"""A real local Ray cluster: a sweep and a tuning run as Ray tasks give the in-process results, and a worker killed
mid-run loses nothing (ray is in the ``test`` extra; these tests skip only where it is not installed)."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from compiler.dse import ResultLog, latency_record, parse_space, run_sweep
from compiler.scaleout import LoopRunner, PoolRunner, RayRunner
from tests.compiler.dse.models import tiny_qdq_model

ray = pytest.importorskip("ray", reason="the ray extra (pip install 'vta-stack[ray]') is not installed")

SPACE = {"base": "tiny", "params": {"log_block_out": [1, 2]}}  # 2 points: most of a task is a fresh worker's imports


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster with 2 CPUs for this module's tests."""
    if ray.is_initialized():
        ray.shutdown()
    runner = RayRunner("local", 2)
    yield runner
    runner.close()
    assert not ray.is_initialized()


def _identity(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in ("seconds", "cpu_seconds")}


def _descends_from_us(pid: int) -> bool:
    """``pid`` is a descendant of this process (a worker of the cluster this process started, not another's)."""
    me = os.getpid()
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == me:
            return True
    return False


def _kill_first(title: bytes, killed: list, stop: threading.Event) -> None:
    """SIGKILL the first of our cluster's processes whose title (Ray names a busy worker ``ray::<function>``)
    starts with ``title``."""
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if cmd.startswith(title) and _descends_from_us(int(pid)):
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    killed.append(int(pid))
                    return
        time.sleep(0.02)


def test_sweep_on_ray_with_a_killed_worker_equals_the_loop(cluster, tmp_path):
    sp = parse_space(SPACE)
    loop = run_sweep(tiny_qdq_model(), sp, tmp_path / "loop", None, LoopRunner())
    killed, stop = [], threading.Event()
    killer = threading.Thread(target=_kill_first, args=(b"ray::latency_record", killed, stop), daemon=True)
    killer.start()
    try:
        got = run_sweep(tiny_qdq_model(), sp, tmp_path / "ray", None, cluster)
    finally:
        stop.set()
    assert killed, "no Ray worker was seen running latency_record"
    assert [r["cycles"] for r in got.rows] == [r["cycles"] for r in loop.rows]
    a, b = ResultLog(tmp_path / "loop" / "dse.jsonl"), ResultLog(tmp_path / "ray" / "dse.jsonl")
    assert len(b) == 2 and b.duplicates == 0 and b.damaged == 0
    assert all(_identity(a.get(k)) == _identity(b.get(k)) for k in a.records)


def test_ray_runner_takes_a_bound_method(cluster):
    """The synthesis stage hands imap a bound method (ResourceModel.evaluate), which ray.remote alone refuses."""
    got = dict(cluster.imap("{}:{}".format, ["a", "b", "c"], ("shared",)))
    assert got == {0: "a:shared", 1: "b:shared", 2: "c:shared"}


def test_process_pool_agrees_item_for_item():
    from isa import make_config

    items = [make_config("tiny", log_block_out=n).to_dict() for n in (1, 2)]
    model = tiny_qdq_model()
    want = [_identity(latency_record(f, model)) for f in items]
    assert want[0]["cycles"] != want[1]["cycles"]  # in order: the two points differ
    with PoolRunner(2) as pool:
        assert [_identity(r) for r in pool.map(latency_record, items, (model,))] == want


def test_tuning_run_on_ray_measures_what_the_local_measurer_does(cluster, tmp_path):
    from compiler.autotune import LocalMeasurer, RayMeasurer, tune_tasks
    from tests.compiler.autotune.test_space_and_tuners import SMALL

    with LocalMeasurer(0) as local:
        want = tune_tasks([SMALL], local, "grid", 6, 3, str(tmp_path / "local.jsonl"), 0, None)
    measurer = RayMeasurer("local")  # joins the module's cluster: ray is already initialized
    got = tune_tasks([SMALL], measurer, "grid", 6, 3, str(tmp_path / "ray.jsonl"), 0, None)
    measurer.close()
    assert ray.is_initialized()  # closing a measurer that joined a cluster leaves the cluster running
    assert [r.cycles for r in got] == [r.cycles for r in want] and got[0].cycles is not None
    assert (tmp_path / "ray.jsonl").read_text().count("\n") == (tmp_path / "local.jsonl").read_text().count("\n") > 0


def _nice(_item) -> int:
    return os.nice(0)


def test_local_cluster_workers_run_at_the_drivers_priority(cluster):
    """Ray's default worker niceness (15) starves evaluations on a shared machine; a local cluster uses 0."""
    assert cluster.map(_nice, [0, 1]) == [os.nice(0)] * 2


def _module_loaded(name) -> bool:
    import sys

    return name in sys.modules


def test_warm_imports_the_modules_in_every_worker(cluster):
    """RayRunner.warm: every worker started with the evaluation's modules imported before the first real task."""
    assert not any(cluster.map(_module_loaded, ["wave"] * 2))  # a module nothing of the stack imports
    assert cluster.warm(("wave",), hold_s=0.5) > 0
    assert cluster.map(_module_loaded, ["wave"] * 4) == [True] * 4


def _held_pid(hold_s: float) -> int:
    time.sleep(hold_s)
    return os.getpid()


def test_a_worker_started_after_warm_has_the_modules(cluster):
    """A worker Ray starts after warm() (here: in place of killed ones) imports the warmed modules before its first
    task, and the task keeps its own name as the worker's title."""
    cluster.warm(("wave",), hold_s=0.2)
    for pid in set(cluster.map(_held_pid, [0.3] * 2)):
        os.kill(pid, signal.SIGKILL)
    assert cluster.map(_module_loaded, ["wave"] * 4) == [True] * 4
    assert all(title.startswith(b"ray::_title") for title in cluster.map(_title, [0.5] * 2))


def _title(hold_s: float) -> bytes:
    time.sleep(hold_s)
    return Path(f"/proc/{os.getpid()}/cmdline").read_bytes()
