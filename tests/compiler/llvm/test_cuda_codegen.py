"""The CUDA toolkit wrappers: nvcc compiles CUDA C, ptxas assembles the library's PTX (skipped without the toolkit)."""
from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler.backend.cuda import CudaToolError, assemble_ptx, compile_cuda, have_nvcc, have_ptxas
from compiler.graph.ir import Node, TensorInfo
from compiler.backend.plans.plans import build_schedule, plan_node

needs_nvcc = pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH (CUDA toolkit absent): cannot compile CUDA C")
needs_ptxas = pytest.mark.skipif(not have_ptxas(), reason="ptxas not on PATH (CUDA toolkit absent): cannot assemble PTX")


@needs_nvcc
@needs_ptxas
def test_nvcc_compiles_and_ptxas_assembles():
    ptx = compile_cuda('extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }')
    assert ".entry twice(" in ptx and len(assemble_ptx(ptx)) > 0


@needs_nvcc
def test_nvcc_reports_errors():
    with pytest.raises(CudaToolError, match="nvcc failed"):
        compile_cuda('extern "C" __global__ void broken( { }')


@needs_ptxas
def test_ptxas_assembles_library_kernels():
    node = Node("Clip", ["x"], ["y"], {"min": 0.0, "max": 6.0}, "clip")
    plan = plan_node(node, [TensorInfo((4, 100), np.dtype(np.float32))], {}, "cuda")
    s, args = build_schedule(plan)
    assert len(assemble_ptx(compiler.build_op(s, target="cuda", args=args).ptx)) > 0


@needs_nvcc
@needs_ptxas
def test_ptx_resources_reads_each_kernel_and_reports_ptxas_errors():
    from compiler.backend.cuda import ptx_resources

    ptx = compile_cuda('extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n'
                       'extern "C" __global__ void tile(float* x) { __shared__ float t[256]; '
                       't[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = t[255 - threadIdx.x]; }')
    res = ptx_resources(ptx, "sm_90")
    assert set(res) == {"twice", "tile"}
    assert res["tile"].shared_bytes == 256 * 4 and res["twice"].shared_bytes == 0
    assert all(r.registers > 0 and r.spill_bytes == 0 for r in res.values())
    with pytest.raises(CudaToolError, match="ptxas failed"):
        ptx_resources(".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k( { bogus; }", "sm_90")
