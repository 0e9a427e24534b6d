"""Executor: ``build`` a model into a runnable ``Module`` over an accelerator backend registry."""
from compiler.executor.build import build
from compiler.executor.module import Module
from compiler.executor.registry import available_accel_backends, create_accel_backend, register_accel_backend

__all__ = ["build", "Module", "register_accel_backend", "create_accel_backend", "available_accel_backends"]
