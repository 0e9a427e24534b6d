"""vta-stack compiler: tensor expressions, schedules, lowering, codegen, graph IR, ONNX frontend."""

from compiler.executor import build, register_accel_backend  # noqa: E402
from compiler.frontend.errors import ModelError, ModelInputError, UnsupportedOperatorError  # noqa: E402
from compiler.backend import build_op  # noqa: E402
from jit_runtime.exported import load_module  # noqa: E402  (exported modules run on the runtime layer)

__all__ = ["build", "build_op", "load_module", "register_accel_backend", "ModelError", "ModelInputError", "UnsupportedOperatorError"]
