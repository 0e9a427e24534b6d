"""The cuda kernels' shared-memory barriers, checked on their loop IR (``shared_races``): the emulated device runs
each thread alone, so a missing ``sync_threads`` gives it the right values while a GPU's threads race."""
from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler.autotune.cuda_conv import CudaConvTask
from compiler.tir.ir import For, IfThen, Sync
from compiler.topi.conv2d_direct import Conv2dSpec
from tests.compiler.gpu_on_cpu import gpu_matmul, model_cuda_ops, serial_on_cpu, shared_races

TASK = CudaConvTask(Conv2dSpec(1, 16, 8, 8, 16, 3, 3, pads=(1, 1, 1, 1)), bias=True, act="relu")


def _syncs(body: list, out: list) -> list:
    """``(containing list, Sync)`` of every barrier in ``body``, in order."""
    for s in body:
        if isinstance(s, Sync):
            out.append((body, s))
        elif isinstance(s, (For, IfThen)):
            _syncs(s.body, out)
    return out


def test_a_missing_barrier_is_found():
    """The tile conv stages its input (col) and weight chunks in shared memory: one barrier before the two fills (the
    last chunk's reads are done) and one after them, before the products (the fills are done); neither fill reads
    the other, so none between them. Without the first, the next fill overwrites what a slower thread still reads;
    without the last, the products read a fill in progress (both fills, either way)."""
    op = TASK.kernel(TASK.default_knobs())
    assert shared_races(op.func) == []
    assert len(_syncs(op.func.body, [])) == 2
    found = {}
    for i in range(2):
        func = TASK.kernel(TASK.default_knobs()).func
        body, sync = _syncs(func.body, [])[i]
        body.remove(sync)
        found[i] = [r.split(": ", 1)[1] for r in shared_races(func)]
    assert found == {0: ["col.shared written after a read with no sync between",
                         "weight.shared written after a read with no sync between"],
                     1: ["col.shared read after a write with no sync between",
                         "weight.shared read after a write with no sync between"]}


def test_a_fill_that_reads_an_earlier_fill_waits_for_it():
    """Consecutive fills share one barrier before and one after, plus one between two fills where the later reads
    what the earlier wrote: here the second copy of A's chunk reads the first (then B's fill follows, unsynced)."""
    s = gpu_matmul(32, 32, 32, 8, chained=True)
    op = compiler.build_op(s, target="cuda")
    assert shared_races(op.func) == []
    assert len(_syncs(op.func.body, [])) == 3
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32, 32), np.float32), rng.standard_normal((32, 32), np.float32)
    np.testing.assert_allclose(serial_on_cpu(s)(x, y), x @ y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v2", "resnet18_int8", "mobilenet_v2_int8"])
def test_every_kernel_of_a_model_syncs_its_shared_memory(model):
    ops = model_cuda_ops(model)
    assert sum("shared" in op.loop_ir for op in ops) >= 10  # the tile convs and products stage in shared memory
    assert {op.func.name: shared_races(op.func) for op in ops} == {op.func.name: [] for op in ops}
