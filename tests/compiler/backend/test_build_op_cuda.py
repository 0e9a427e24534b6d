"""TE -> loop IR -> NVPTX: the fused elementwise+reduction op bound to GPU threads with a shared-memory cache."""
import numpy as np
import pytest

import compiler
from compiler import te
from compiler.backend.cuda.nvcc import have_ptxas
from compiler.schedule import create_schedule
from compiler.backend.cuda.runtime import NoGpuError, gpu_present
from compiler.tir import TirError
from tests.compiler.gpu_on_cpu import gpu_matmul, serial_on_cpu


def _gpu_schedule(n=64, m=128, tx=32):
    a = te.placeholder((n, m), "float32", "a")
    b = te.placeholder((m,), "float32", "b")
    k = te.reduce_axis(m, "k")
    c = te.compute((n,), lambda i: te.sum(te.max(a[i, k] * 2.0 + b[k], 0.0), axis=k), name="c")
    s = create_schedule(c)
    io, ii = s[c].split(c.op.axes[0], tx)
    s[c].bind(io, "blockIdx.x")
    s[c].bind(ii, "threadIdx.x")
    bs = s.cache_read(b, "shared", [c])
    ko, ki = s[c].split(s[c].reduce_axis[0], tx)
    s[bs].compute_at(s[c], ko)
    s[bs].bind(s[bs].op.axes[0], "threadIdx.x")
    return s


def test_bound_kernel_compiles_to_ptx():
    op = compiler.build_op(_gpu_schedule(), target="cuda")
    assert [(k.grid, k.block) for k in op.kernels] == [((2, 1, 1), (32, 1, 1))]
    ptx = op.ptx
    assert f".entry {op.kernels[0].name}" in ptx
    assert "%ctaid.x" in ptx and "%tid.x" in ptx
    assert ".shared" in ptx and "bar.sync" in ptx  # the shared-memory cache and its barriers
    if have_ptxas():
        assert len(op.assemble()) > 0


def test_cuda_schedule_errors():
    a = te.placeholder((8,), "float32", "a")
    c = te.compute((8,), lambda i: a[i] + 1.0, name="c")
    s = create_schedule(c)
    with pytest.raises(TirError, match="no loop bound to blockIdx/threadIdx"):
        compiler.build_op(s, target="cuda")
    o, i = s[c].split(c.op.axes[0], 4)
    s[c].parallel(o)
    s[c].bind(i, "threadIdx.x")
    with pytest.raises(TirError, match="marked parallel"):
        compiler.build_op(s, target="cuda")
    big = te.placeholder((4096,), "float32", "big")
    d = te.compute((4096,), lambda i: big[i] * 2.0, name="d")
    s = create_schedule(d)
    s[d].bind(d.op.axes[0], "threadIdx.x")
    with pytest.raises(TirError, match="at most 1024"):
        compiler.build_op(s, target="cuda")


def test_runs_on_gpu_and_matches_numpy():
    op = compiler.build_op(_gpu_schedule(), target="cuda")
    rng = np.random.default_rng(3)
    av = rng.standard_normal((64, 128)).astype(np.float32)
    bv = rng.standard_normal(128).astype(np.float32)
    if not gpu_present():
        with pytest.raises(NoGpuError, match="no GPU"):
            op(av, bv)
        pytest.skip("no GPU")
    np.testing.assert_allclose(op(av, bv), np.maximum(av * 2 + bv, 0).sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "tanh", "abs_", "floor", "round_", "erf"])
def test_math_functions_compile_for_cuda(fn):
    """PTX has no libm: every TE math function must lower to PTX instructions (no unresolved calls)."""
    x = te.placeholder((64,), "float32", "x")
    y = te.compute((64,), lambda i: getattr(te, fn)(x[i]), name="y")
    s = create_schedule(y)
    o, i = s[y].split(y.op.axes[0], 32)
    s[y].bind(o, "blockIdx.x")
    s[y].bind(i, "threadIdx.x")
    op = compiler.build_op(s, target="cuda")
    assert "call" not in op.ptx.split(".entry")[1]
    if have_ptxas():
        op.assemble()


def test_shared_tiles_cover_the_whole_thread_block():
    """A and B tiles in shared memory: each is one t x t region per block (threads relaxed), filled one element per
    thread; the loop IR computes the matmul (run serially on the CPU) and the kernel assembles."""
    s = gpu_matmul()
    op = compiler.build_op(s, target="cuda")
    assert "allocate shared A.shared: float32[16, 16]" in op.loop_ir
    assert "allocate shared B.shared: float32[16, 16]" in op.loop_ir
    assert [(k.grid, k.block) for k in op.kernels] == [((3, 4, 1), (16, 16, 1))]
    assert op.ptx.count("bar.sync") >= 2
    if have_ptxas():
        op.assemble()
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 80)).astype(np.float32)
    b = rng.standard_normal((80, 48)).astype(np.float32)
    np.testing.assert_allclose(serial_on_cpu(gpu_matmul())(a, b), a @ b, rtol=1e-4, atol=1e-4)
    if gpu_present():
        np.testing.assert_allclose(op(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_fused_reduction_gpu_schedule_values():
    rng = np.random.default_rng(8)
    av = rng.standard_normal((64, 128)).astype(np.float32)
    bv = rng.standard_normal(128).astype(np.float32)
    out = serial_on_cpu(_gpu_schedule())(av, bv)
    np.testing.assert_allclose(out, np.maximum(av * 2 + bv, 0).sum(1), rtol=1e-5, atol=1e-4)


def test_kernels_are_looked_up_by_the_names_the_loaded_ptx_defines():
    """On a GPU of another architecture than the one compiled for, the op loads PTX generated for that GPU;
    every kernel it asks the driver for must be an ``.entry`` of the PTX it loaded (a fresh code generation
    names its module afresh: looking up the first build's names failed with CUDA_ERROR_NOT_FOUND on an H100)."""
    import re

    from compiler.backend.cuda.device import GpuDevice

    op = compiler.build_op(_gpu_schedule(), target="cuda")
    assert op.arch != "sm_90"
    loaded: dict = {}

    class FakeDriver:
        def cuModuleLoadData(self, image):
            loaded["entries"] = set(re.findall(r"\.entry\s+(\w+)", image.decode().rstrip("\0")))
            loaded["target"] = re.search(r"\.target\s+(\w+)", image.decode()).group(1)
            return 0, "module"

        def cuModuleGetFunction(self, mod, name):
            return (0 if name.decode() in loaded["entries"] else 500), name.decode()

    dev = object.__new__(GpuDevice)  # the real class's load(), on a stand-in driver
    dev.drv, dev.ctx, dev.arch = FakeDriver(), "ctx", "sm_90"
    _, (_, fns), kernels = op._load(dev)
    assert loaded["target"] == "sm_90" and len(fns) == len(kernels) == len(op.kernels) >= 1
    assert set(fns) <= loaded["entries"]


def test_pinned_constants_are_uploaded_once_and_buffers_are_reused(monkeypatch):
    """A pinned array (a packed weight) is copied to the device at its first use only; the other arguments' device
    buffers are allocated once and refilled on every call; a pinned array's device copy is freed with it
    (on the emulated device, which counts the copies and holds the allocations)."""
    import gc

    import compiler.backend.cuda.runtime as cuda_rt
    from compiler.backend.cuda.device import EmulatedDevice

    op = compiler.build_op(_gpu_schedule(), target="cuda")
    dev = EmulatedDevice()
    monkeypatch.setattr(cuda_rt, "get_device", lambda: dev)
    uploads = []
    upload = dev.upload
    dev.upload = lambda d, src, n: (uploads.append((d, n)), upload(d, src, n))
    a = np.ones((64, 128), np.float32)
    b = np.ones(128, np.float32)
    op.pin(b)
    for _ in range(3):
        np.testing.assert_allclose(op(a, b), np.full(64, 3.0 * 128), rtol=1e-6)
    assert [n for _, n in uploads] == [a.nbytes, b.nbytes, a.nbytes, a.nbytes]  # b once, a every call
    assert dev.downloads == 3 and len(dev._mem) == 3  # a, b, the output: allocated once each
    b_dev = uploads[1][0]
    del b
    gc.collect()
    assert b_dev not in dev._mem
    op(a, np.ones(128, np.float32))  # an unpinned array in that position is copied, into a buffer of its own
    assert uploads[-1][1] == 128 * 4 and len(dev._mem) == 3
