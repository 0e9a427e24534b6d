"""The native replay function: bound kernel calls, byte copies and no-ops run in order and timed, the inputs copied
in with NaN/Inf counted per float dtype (the expected values are numpy's), bad steps refused."""
from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.backend.llvm.native_replay import NO_OP, ByteCopy, InputCopy, KernelCall, NativeReplay, clock_address
from compiler.schedule import create_schedule

pytestmark = pytest.mark.skipif(not clock_address(), reason="the native replay needs libc's clock_gettime (64-bit Linux)")


def _add_one(n: int):
    a = te.placeholder((n,), "float32", "a")
    y = te.compute((n,), lambda i: a[i] + te.const(1.0, "float32"), name="y")
    s = create_schedule(y)
    return compiler.build_op(s, args=[a, y])


def test_kernels_copies_and_no_ops_run_in_order():
    op = _add_one(64)
    x = np.arange(64, dtype=np.float32)
    mid, out = np.zeros(64, np.float32), np.zeros(64, np.float32)
    first = op.bind(x, out=mid)  # mid = x + 1
    second = op.bind(mid, out=out)  # out = mid + 1: must run after the first
    assert first.native.func and first.native.args[1:] == (x.ctypes.data, mid.ctypes.data)
    copy_dst = np.zeros(64, np.float32)
    r = NativeReplay([first.native, NO_OP, second.native, ByteCopy(copy_dst.ctypes.data, out.ctypes.data, out.nbytes)],
                     [])
    assert r.run([]) == 0
    np.testing.assert_array_equal(out, x + 2)
    np.testing.assert_array_equal(copy_dst, x + 2)
    secs = r.step_seconds()
    assert secs.shape == (4,) and (secs >= 0).all() and secs.sum() < 1.0


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_inputs_copied_with_non_finite_counted(dtype):
    rng = np.random.default_rng(1)
    src = rng.standard_normal(1001).astype(dtype)  # odd length: the vector loop's remainder too
    src[[0, 17, 500, 1000]] = [np.nan, np.inf, -np.inf, np.nan]
    src[3] = np.finfo(dtype).max  # finite, the largest exponent below all ones
    dst = np.zeros_like(src)
    other_src, other_dst = np.arange(10, dtype=np.int32), np.zeros(10, np.int32)
    r = NativeReplay([NO_OP], [InputCopy(dst.ctypes.data, dst.nbytes, dtype),
                               InputCopy(other_dst.ctypes.data, other_dst.nbytes, "int32")])
    assert r.run([src.ctypes.data, other_src.ctypes.data]) == 4
    np.testing.assert_array_equal(dst, src)  # NaN at the same places
    np.testing.assert_array_equal(other_dst, other_src)
    src[...] = 1
    assert r.run([src.ctypes.data, 0]) == 0  # finite; 0: that input is not copied
    assert (dst == 1).all() and other_dst[9] == 9
    other_dst[...] = -1
    assert r.run([0, 0]) == 0 and (other_dst == -1).all() and (dst == 1).all()


def test_bad_step_refused():
    with pytest.raises(TypeError, match="KernelCall or a ByteCopy, got None"):
        NativeReplay([None], [])


def test_no_native_call_for_a_kernel_this_cpu_cannot_run(monkeypatch):
    op = _add_one(8)
    assert isinstance(op.native_call([1, 2]), KernelCall)
    monkeypatch.setattr(op._jit, "runnable", False)  # compiled for a CPU this machine lacks: only its refusal runs
    assert op.native_call([1, 2]) is None
