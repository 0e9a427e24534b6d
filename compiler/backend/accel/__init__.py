"""Accelerator code generation: loop IR -> operations -> JIT-runtime calls."""
from compiler.backend.accel.emit import emit
from compiler.backend.accel.module import AccelModule, build
from compiler.backend.accel.ops import OpBuilder

__all__ = ["emit", "OpBuilder", "AccelModule", "build"]
