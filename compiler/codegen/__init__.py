"""Accelerator code generation: loop IR -> operations -> JIT-runtime calls."""
from compiler.codegen.emit import emit
from compiler.codegen.module import AccelModule, build
from compiler.codegen.ops import OpBuilder

__all__ = ["emit", "OpBuilder", "AccelModule", "build"]
