"""Whole models on the CPU/GPU targets: ``build(model, target="llvm" | "cuda")``.

float models (no calibration) run in float32: the graph pipeline with ``quantize=False``, then conv/dense
epilogue fusion (:mod:`compiler.graph.float_fuse`). int8 QDQ models (or float models with ``calibration``)
go through the same lowering as for the accelerator; on llvm their integer conv/dense layers keep its packed
layout and run on :class:`~compiler.backend.plans.accel.TargetAccelBackend`; on cuda they stay NCHW
(``QConv2D``/``QDense``) and run as the other nodes' kernels do, on the device's arena (a model with an int8
product of two activations, attention's, keeps the packed layout: that backend takes its weight at run time). Every kernel comes from the operator library
(:mod:`compiler.topi`) and is compiled at build time.
"""
from __future__ import annotations

from compiler.executor.module import Module
from compiler.executor.pipeline import compile_model

MODEL_TARGETS = ("llvm", "cuda")


def build_for_target(model, cfg, target: str, *, calibration=None, quantize: bool | None = None,
                     input_shapes=None, progress: bool | None = None, checked: bool = False,
                     tuning_log=None) -> Module:
    """Compile the loaded ONNX ``model`` for ``target`` (see the module docstring); ``checked``: it was folded and
    checked for operator support already (``build`` does it first). ``tuning_log`` (float models): the float
    convs use the log's knobs where they time faster than the default (:mod:`compiler.autotune.llvm_conv`,
    :mod:`compiler.autotune.cuda_conv`)."""
    from compiler.graph.memory_plan import plan_memory
    from compiler.graph.partition import partition_graph
    from compiler.backend.plans.accel import TargetAccelBackend
    from compiler.backend.plans.backend import TargetCpuBackend
    from compiler.graph.conv_transpose import lower_conv_transposes
    from compiler.graph.float_fuse import fuse_conv_epilogues

    if target not in MODEL_TARGETS:
        raise ValueError(f"unknown model target {target!r}; allowed: {', '.join(MODEL_TARGETS)}")
    qdq = any(n.op_type in ("QuantizeLinear", "DequantizeLinear", "MatMulInteger", "ConvInteger")  # quantized
              for n in model.graph.node)
    if quantize is None:
        quantize = calibration is not None or qdq
    if quantize and calibration is None and not qdq:
        raise ValueError("quantize=True on a float model needs calibration data (calibration=...)")
    def compile_packed(packed: bool):
        return compile_model(model, cfg, calibration=calibration, quantize=None if quantize else False,
                             input_shapes=input_shapes, progress=progress,
                             fuse_residual=target == "llvm", standalone_adds=False,  # llvm: Adds in conv epilogues
                             widen_convs=False, checked=checked,  # the CPU would do the widened convs' extra MACs
                             # llvm: the packed int8 conv skips zero input channels (no FoldTaps copy)
                             fold_taps=packed and target != "llvm", packed_layout=packed)

    # cuda: NCHW int8 layers, whose kernels read and write the device's arena (no repacking on the host between
    # them); a product of two activations (attention's int8 MatMuls) needs the packed layers' backend, which takes
    # its weight at run time: such a model keeps the packed layout
    compiled = compile_packed(target == "llvm")
    if target == "cuda" and _runtime_int8_weights(compiled.graph):
        compiled = compile_packed(True)
    _refuse_value_shaped_kernels(compiled.graph, target)
    if not quantize:
        # ConvTranspose as ZeroInsert (numpy) -> Conv (a library kernel), as on the accelerator path
        compiled.stats["conv_transposes_as_conv"] = lower_conv_transposes(compiled.graph)
        compiled.stats["epilogues_fused"] = fuse_conv_epilogues(compiled.graph)
        compiled.partitions = partition_graph(compiled.graph)
        compiled.memory_plan = plan_memory(compiled.graph)
    accel = TargetAccelBackend(cfg, target)
    compiled.stats["int8_layers_compiled"] = accel.prepare(compiled.graph)
    if tuning_log is None:
        cpu = TargetCpuBackend(target)
        cpu.prepare(compiled.graph)
        return Module(compiled, accel, cpu, progress)
    from compiler.executor.llvm_log import confirm_in_model

    if target == "cuda":
        from compiler.autotune.cuda_conv import logged_faster
    else:
        from compiler.autotune.llvm_conv import logged_faster
    mod, kept = confirm_in_model(compiled, accel, logged_faster(compiled.graph, tuning_log), progress, target)
    compiled.stats["tuned_tasks"] = len(kept)
    return mod


def _runtime_int8_weights(g) -> bool:
    """Whether an NCHW int8 conv/dense layer of ``g`` takes its weight from another layer (not a constant)."""
    return any(n.op in ("QConv2D", "QDense") and len(n.inputs) > 1 and n.inputs[1] not in g.constants
               for n in g.nodes)


def _refuse_value_shaped_kernels(g, target: str) -> None:
    """A tensor whose shape the inputs' values set (``Graph.value_shaped``: an NMS's selection, a Pad sized by an
    input) may feed numpy glue and views (they take any shape) but no compiled kernel: those are built for static
    shapes. Raises :class:`UnsupportedOnTarget` naming the first such node."""
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans import NUMPY_GLUE_OPS, VIEW_OPS

    shaped = getattr(g, "value_shaped", set())
    for n in g.nodes:
        bad = [i for i in n.inputs if i in shaped]
        if bad and n.op not in NUMPY_GLUE_OPS and n.op not in VIEW_OPS:
            raise UnsupportedOnTarget(
                f"node {n.name!r} ({n.op}) reads tensor {bad[0]!r}, whose shape the inputs' values set at run time; "
                f"target {target!r} compiles {n.op} for a static shape (the ref and sim targets run such graphs; or "
                f"make the values that size it constants)")
