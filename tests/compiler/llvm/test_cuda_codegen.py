"""CUDA C generation compiled by nvcc and assembled by ptxas; NVPTX PTX from llvmlite (no GPU: nothing runs)."""
from __future__ import annotations

import pytest

from compiler.codegen.cuda import (CudaToolError, assemble_ptx, clip_kernel_ir, compile_cuda, emit_ptx, have_nvcc,
                                   have_ptxas, source)

needs_nvcc = pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH (CUDA toolkit absent): cannot compile CUDA C")
needs_ptxas = pytest.mark.skipif(not have_ptxas(), reason="ptxas not on PATH (CUDA toolkit absent): cannot assemble PTX")


def _all_kernels():
    return [source.relu_clip("int8", 100), source.relu_clip("float32", 64, -1.0, 6.0), source.binary("Add", "int8", 50),
            source.binary("Div", "float32", 50), source.quantize(128, "int8"), source.quantize(16, "uint8"),
            source.dequantize(128, "int32"), source.maxpool("int8", (1, 3, 9, 9), (3, 3), (2, 2), (1, 1), (5, 5)),
            source.maxpool("float32", (2, 4, 8, 8), (2, 2), (2, 2), (0, 0), (4, 4)),
            source.global_avg_pool("float32", 8, 49)]


def test_sources_are_specialized():
    src, name = source.maxpool("int8", (1, 3, 9, 9), (3, 3), (2, 2), (1, 1), (5, 5))
    assert f"void {name}(" in src and "-128" in src and "75LL" in src  # 1*3*5*5 outputs baked in
    with pytest.raises(TypeError, match="integer Div"):
        source.binary("Div", "int8", 4)
    with pytest.raises(TypeError, match="float16"):
        source.relu_clip("float16", 4)


@needs_nvcc
@needs_ptxas
def test_nvcc_compiles_and_ptxas_assembles():
    kernels = _all_kernels()
    ptx = compile_cuda("\n".join(src for src, _ in kernels))
    for _, name in kernels:
        assert f".entry {name}(" in ptx
    assert len(assemble_ptx(ptx)) > 0


@needs_nvcc
def test_nvcc_reports_errors():
    with pytest.raises(CudaToolError, match="nvcc failed"):
        compile_cuda('extern "C" __global__ void broken( { }')


def test_llvmlite_nvptx_emits_ptx():
    ptx = emit_ptx(clip_kernel_ir(100, 0.0, 6.0))
    assert ".entry vta_clip(" in ptx and ".target sm_80" in ptx
    assert "ld.global" in ptx and "st.global" in ptx and "setp.lt.f32" in ptx
    if have_ptxas():
        assert len(assemble_ptx(ptx)) > 0
