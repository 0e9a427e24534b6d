"""The llvm target's tunable tasks of a float ONNX model: the graph ``build(model, target="llvm")`` compiles, and
its conv tasks (:func:`compiler.autotune.llvm_conv.graph_tasks`). Here, above autotune, because it runs the
executor's pipeline."""
from __future__ import annotations

from compiler.autotune.llvm_conv import LlvmConvTask, graph_tasks


def float_graph(model, input_shapes=None):
    """The graph the llvm target compiles for a float ``model`` (ONNX path or proto): the float pipeline with
    conv/dense epilogues fused, as ``build(model, target="llvm")`` runs it."""
    from compiler.executor.config import resolve_config
    from compiler.executor.pipeline import compile_model
    from compiler.frontend.onnx_import import check_model_support, load_model
    from compiler.graph.float_fuse import fuse_conv_epilogues

    model = check_model_support(load_model(model), input_shapes)
    compiled = compile_model(model, resolve_config(None), quantize=False, input_shapes=input_shapes, progress=False,
                             fuse_residual=False, widen_convs=False, checked=True)
    fuse_conv_epilogues(compiled.graph)
    return compiled.graph


def extract_llvm_tasks(model, input_shapes=None) -> list[LlvmConvTask]:
    """Distinct tunable conv tasks of a float ONNX model on the llvm target (see :func:`float_graph`)."""
    return graph_tasks(float_graph(model, input_shapes))
