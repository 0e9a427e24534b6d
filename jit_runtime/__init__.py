"""jit_runtime package."""
