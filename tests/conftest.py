"""Test-session settings shared by every package's tests."""
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread_per_xdist_worker():
    """`make test` runs two pytest workers on two cores: each keeps its BLAS to one thread so they do not
    oversubscribe the machine (a busy-waiting BLAS on a full machine is many times slower)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def pytest_collection_modifyitems(session, config, items):
    """Modules with slow tests (yosys synthesis, RTL harness builds) run first, each module kept together: on the
    suite's two workers the longest ones start at once instead of ending the run alone on one worker."""
    slow = {item.module for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.module not in slow)
