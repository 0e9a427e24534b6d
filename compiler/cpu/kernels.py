"""Moved to :mod:`jit_runtime.host_ops.kernels` (the runtime layer runs exported modules without the compiler);
this name is the same module object, kept for the compiler's imports."""
import importlib
import sys

sys.modules[__name__] = importlib.import_module("jit_runtime.host_ops.kernels")
