"""The CUDA toolkit from Python: ``nvcc -ptx`` and ``ptxas`` wrappers (the CUDA target's kernels come from TE:
:mod:`compiler.backend.cuda.runtime`; the per-operator CUDA C generators are retired)."""
from compiler.backend.cuda.nvcc import (CudaToolError, KernelResources, assemble_ptx, compile_cuda, have_nvcc,
                                       have_ptxas, ptx_resources)

__all__ = ["compile_cuda", "assemble_ptx", "have_nvcc", "have_ptxas", "ptx_resources", "KernelResources",
           "CudaToolError"]
