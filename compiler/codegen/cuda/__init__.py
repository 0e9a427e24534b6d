"""CUDA code generation for the CPU-side kernels: CUDA C sources + nvcc/ptxas, and llvmlite NVPTX PTX.

Nothing here executes: no GPU exists on the build machines; kernels are compiled and assembled only.
"""
from compiler.codegen.cuda import source
from compiler.codegen.cuda.nvcc import CudaToolError, assemble_ptx, compile_cuda, have_nvcc, have_ptxas
from compiler.codegen.cuda.nvptx import clip_kernel_ir, emit_ptx

__all__ = ["source", "compile_cuda", "assemble_ptx", "have_nvcc", "have_ptxas", "CudaToolError", "clip_kernel_ir",
           "emit_ptx"]
