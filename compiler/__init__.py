"""vta-stack compiler: tensor expressions, schedules, lowering, codegen, graph IR, ONNX frontend."""

from compiler.executor import build, register_accel_backend  # noqa: E402
from compiler.frontend.errors import ModelError, ModelInputError, UnsupportedOperatorError  # noqa: E402
from compiler.target import build_op  # noqa: E402

__all__ = ["build", "build_op", "register_accel_backend", "ModelError", "ModelInputError", "UnsupportedOperatorError"]
