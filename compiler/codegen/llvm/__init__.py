"""LLVM (llvmlite) CPU backend: JIT-compiled kernels for the operators the accelerator leaves on the CPU."""
from compiler.codegen.llvm.backend import LlvmCpuBackend, compiled_kernels
from compiler.codegen.llvm.registry import PLANNERS, VIEW_OPS

__all__ = ["LlvmCpuBackend", "compiled_kernels", "PLANNERS", "VIEW_OPS"]
