"""Where the CPU thread pool's workers run: a worker woken onto its launcher's CPU moves off it, unpinned."""
from __future__ import annotations

import os
import threading

import pytest

from compiler.backend.llvm import parallel

linux_multi = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                                 reason="needs Linux CPU affinity and two CPUs")


def _in_thread(fn):
    """Run ``fn`` on a fresh thread (affinity changes stay there); its result."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn()))
    t.start()
    t.join()
    return out["r"]


@linux_multi
def test_woken_worker_leaves_the_launchers_cpu_and_stays_unpinned(monkeypatch):
    monkeypatch.setattr(parallel, "_launcher_cpu", [-1])
    cpus = os.sched_getaffinity(0)

    def run():
        here = parallel._current_cpu()
        parallel._launcher_cpu[0] = here
        parallel._leave_launcher_cpu()
        return here, parallel._current_cpu(), os.sched_getaffinity(0)

    before, after, mask = _in_thread(run)
    assert before >= 0 and after != before
    assert mask == cpus

    def elsewhere():  # not on the launcher's CPU: stays
        parallel._launcher_cpu[0] = -1
        parallel._leave_launcher_cpu()
        return os.sched_getaffinity(0)

    assert _in_thread(elsewhere) == cpus
