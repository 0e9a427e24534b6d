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
