"""A CUDA kernel of more than 256 threads a block declares its block as its most threads (PTX ``.maxntid``), so
``ptxas`` keeps a block within an SM's 65,536 registers: a 1,024-thread tile conv kernel took 66 registers a thread
for sm_90 without it, a block the launch refuses (``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES``) on an H100/H200. The
ptxas checks run where the CUDA toolkit is installed (the PTX checks everywhere)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from compiler.autotune.cuda_conv import CudaConvTask
from compiler.backend.cuda.codegen import generate_ptx
from compiler.backend.cuda.nvcc import KernelResources, have_ptxas, parse_ptxas_report, ptx_resources
from compiler.topi.conv2d_direct import Conv2dSpec
from compiler.topi.conv2d_gpu import GpuConvKnobs
from tests.compiler.gpu_on_cpu import SM_REGISTERS, SM_STATIC_SHARED, model_cuda_ops

needs_ptxas = pytest.mark.skipif(not have_ptxas(), reason="needs ptxas (the CUDA toolkit)")

# 256 -> 256 channels 3x3 at 14x14: a 128 x 128 block tile with 2 x 8 accumulators a thread, the reduction split in 4
TASK = CudaConvTask(Conv2dSpec(1, 256, 14, 14, 256, 3, 3, pads=(1, 1, 1, 1)), bias=True, act="relu")
WIDE = GpuConvKnobs(bo=128, bp=128, vo=2, vp=8, rk=16, split=4)


def _maxntid(ptx: str) -> dict[str, tuple[int, ...]]:
    """Entry name -> its ``.maxntid`` (x, y, z) in PTX text."""
    out, name = {}, None
    for line in ptx.splitlines():
        m = re.match(r"\s*\.visible \.entry (\w+)\(", line)
        if m:
            name = m.group(1)
        m = re.match(r"\s*\.maxntid (\d+), (\d+), (\d+)", line)
        if m and name is not None:
            out[name] = tuple(int(v) for v in m.groups())
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_kernel_of_more_than_256_threads_declares_its_block(arch):
    op = TASK.kernel(WIDE)
    ptx, kernels, _ = generate_ptx(op.func, arch)
    tile, total = kernels  # the tile kernel: threads along the pixels (BP / VP) and the channels (BO / VO)
    assert tile.block == (WIDE.bp // WIDE.vp, WIDE.bo // WIDE.vo, 1) == (16, 64, 1)
    assert total.block == (256, 1, 1)  # the split's sum: 256 threads, 255 registers each still fit an SM
    assert _maxntid(ptx) == {tile.name: (16, 64, 1)}


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_1024_thread_tile_kernel_fits_an_sm(arch):
    op = TASK.kernel(WIDE)
    ptx, kernels, _ = generate_ptx(op.func, arch)
    res = ptx_resources(ptx, arch)
    assert res.keys() == {k.name for k in kernels}
    for k in kernels:
        threads = int(np.prod(k.block))
        assert res[k.name].registers * threads <= SM_REGISTERS, (k, res[k.name])
    assert res[kernels[0].name].shared_bytes == 4 * WIDE.rk * (WIDE.bo + WIDE.bp)  # the two staged tiles, float32


@needs_ptxas
@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v2", "resnet18_int8", "mobilenet_v2_int8"])
def test_every_kernel_of_a_model_fits_an_sm(model):
    """Every kernel of a whole network's cuda build (small input) assembles for an H100/H200 (sm_90) with a block
    that fits an SM: registers x threads, static shared memory, no spills."""
    ops = model_cuda_ops(model)
    assert len(ops) >= 10
    for op in ops:
        ptx, kernels, _ = generate_ptx(op.func, "sm_90")
        res = ptx_resources(ptx, "sm_90")
        for k in kernels:
            r = res[k.name]
            assert r.registers * int(np.prod(k.block)) <= SM_REGISTERS, (k, r)
            assert r.shared_bytes <= SM_STATIC_SHARED and r.spill_bytes == 0, (k, r)


def test_ptxas_reports_are_read_per_entry_function():
    report = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'op_k1' for 'sm_90'
ptxas info    : Function properties for op_k1
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 0 barriers, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'op_k0' for 'sm_90'
ptxas info    : Function properties for op_k0
    24 bytes stack frame, 20 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 16384 bytes smem, 368 bytes cmem[0]
"""
    assert parse_ptxas_report(report) == {"op_k1": KernelResources(16, 0, 0), "op_k0": KernelResources(64, 16384, 32)}
