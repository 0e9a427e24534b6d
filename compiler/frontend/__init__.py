"""ONNX frontend: load, check operator support, validate, convert opsets, infer shapes, import to the graph IR."""
from compiler.frontend.errors import ModelError, ModelInputError, UnsupportedOperatorError
from compiler.frontend.onnx_import import onnx_to_graph
from compiler.frontend.support import SUPPORTED_OPS, check_supported

__all__ = ["onnx_to_graph", "check_supported", "SUPPORTED_OPS", "UnsupportedOperatorError", "ModelInputError",
           "ModelError"]
