"""Every CPU test in this folder runs once per x86-64 feature level (v2: SSE4.2, v3: AVX2+FMA, v4: AVX-512).

LLVM compiles for the level; where this machine lacks it, the test runs up to the first call of compiled code and
is reported as skipped ("compile-only") when that call is refused (``HostLacksFeatures``): scheduling, lowering
and code generation are still checked, code for missing features is never executed. CUDA tests run once."""
import pytest

from compiler.backend.llvm.host import HostLacksFeatures, use_cpu

LEVEL_NAMES = ("x86-64-v2", "x86-64-v3", "x86-64-v4")


def pytest_generate_tests(metafunc):
    name = metafunc.module.__name__ + metafunc.function.__name__
    if "cuda" not in name and "gpu" not in name:
        metafunc.parametrize("cpu_level", LEVEL_NAMES, indirect=True)


@pytest.fixture(autouse=True)
def cpu_level(request):
    """The feature level this test compiles for (the name; None for GPU tests); compile-only when this machine
    lacks it."""
    level = getattr(request, "param", None)
    if level is None:
        yield None
        return
    with use_cpu(level):
        yield level


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(HostLacksFeatures):
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), item.location[1] or 0, f"compile-only: {call.excinfo.value}")


@pytest.fixture
def emulated(monkeypatch):
    """The emulated CUDA device (``VTA_CUDA_DEVICE=emulate``: this CPU plays the GPU, counting what crosses the bus)."""
    from compiler.backend.cuda.device import get_device

    monkeypatch.setenv("VTA_CUDA_DEVICE", "emulate")
    return get_device()
