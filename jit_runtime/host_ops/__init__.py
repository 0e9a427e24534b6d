"""The host-op kernels in numpy: the operators that run on the CPU beside the accelerator.

They live in the runtime layer so that an exported module (``jit_runtime.module_file``) runs with numpy
alone; the compiler's CPU backend (``compiler.graph.cpu_backend``) uses the same kernels. ``KERNELS`` maps an IR op
type to ``fn(attrs, *inputs)``.
"""
from jit_runtime.host_ops.kernels import KERNELS, TAKES_N_OUTPUTS
from jit_runtime.host_ops import int_transformer  # noqa: F401,E402  (registers QSoftmax, QLayerNorm, QGelu)

__all__ = ["KERNELS", "TAKES_N_OUTPUTS"]
