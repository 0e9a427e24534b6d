"""The compile pipeline: ONNX -> IR -> quantize -> passes -> partitioned, planned graph."""
from __future__ import annotations

from dataclasses import dataclass, field

from tqdm.auto import tqdm

from compiler.frontend.onnx_import import onnx_to_graph
from compiler.graph.bn_fold import fold_batchnorm
from compiler.graph.const_fold import fold_constants
from compiler.graph.conv_transpose import lower_conv_transposes
from compiler.graph.dilation_expand import expand_dilated_convs
from compiler.graph.fusion import fuse_operators
from compiler.graph.group_merge import merge_conv_groups
from compiler.graph.ir import Graph
from compiler.graph.layout import pack_layouts
from compiler.graph.residual_fuse import fuse_residual_adds, offload_standalone_adds
from compiler.graph.tap_fold import fold_conv_taps
from compiler.graph.token_matmul import flatten_token_matmuls
from compiler.graph.width_split import split_wide_convs
from compiler.graph.memory_plan import MemoryPlan, plan_memory
from compiler.graph.offload import host_fallbacks, mac_split
from compiler.graph.partition import Partition, partition_graph
from compiler.quant.act_matmul import unroll_qmatmul
from compiler.quant.calibrate import insert_qdq
from compiler.quant.integer_ops import has_integer_ops, lower_integer_ops
from compiler.quant.precision import precision_summary
from compiler.quant.qdq_lower import lower_qdq
from compiler.quant.rebase import rebase_uint8

PROGRESS_MIN_NODES = 40


@dataclass
class CompiledGraph:
    graph: Graph
    config: object
    partitions: list[Partition]
    fusion_groups: list[list[str]]
    memory_plan: MemoryPlan
    stats: dict = field(default_factory=dict)


def is_qdq(g: Graph) -> bool:
    return any(n.op in ("QuantizeLinear", "DequantizeLinear") for n in g.nodes)


def compile_model(model, config, *, calibration=None, quantize: bool | None = None, input_shapes=None,
                  progress: bool | None = None, fuse_residual: bool = True, widen_convs: bool = True,
                  checked: bool = False, fold_taps: bool = True, standalone_adds: bool = True,
                  packed_layout: bool = True) -> CompiledGraph:
    """Run the whole graph-level pipeline. ``quantize``: None = auto (QDQ models and float models
    with a calibration set run int8), False = keep float on the CPU, True = require int8.
    ``fuse_residual``: fuse quantized residual Adds into the producing accelerator conv's epilogue (and, with
    ``standalone_adds``, run the Adds of two conv results that cannot fuse as identity convs).
    ``widen_convs``: rewrite int8 convs the accelerator cannot run as they are into ones it can, with
    more MACs: dilated kernels zero-inserted (:mod:`compiler.graph.dilation_expand`), groups that do not fill
    blocks merged (:mod:`compiler.graph.group_merge`). ``fold_taps``: fold the taps of convs with few input channels
into the channel axis (:mod:`compiler.graph.tap_fold`; the llvm target's packed int8 conv skips the zero
channels instead and needs no ``FoldTaps`` copy). ``packed_layout``: int8 layers in the accelerator's packed
    layout and shapes (convs wider than it takes split, then :func:`~compiler.graph.layout.pack_layouts`); False keeps
    them NCHW (``QConv2D``, ``QDense``): the cuda target's kernels run them so, on the device. ``checked``: ``model``
    was folded and checked for operator support already (:func:`compiler.frontend.onnx_import.check_model_support`,
    which ``build`` runs first)."""
    g = onnx_to_graph(model, input_shapes, checked=checked)
    show = progress if progress is not None else len(g.nodes) >= PROGRESS_MIN_NODES
    stats: dict = {"imported_nodes": len(g.nodes)}
    steps = tqdm(total=7, desc="compile", disable=not show, leave=False)

    def step(name: str, value) -> None:
        stats[name] = value
        steps.set_postfix_str(name)
        steps.update()

    step("const_folded", fold_constants(g))
    stats["token_matmuls_as_dense"] = flatten_token_matmuls(g)
    stats["conv_transposes_as_conv"] = lower_conv_transposes(g) if quantize is not False else 0
    quantized = is_qdq(g) or has_integer_ops(g)  # QDQ pairs, or quantize_dynamic's MatMulInteger/ConvInteger
    step("bn_folded", 0 if quantized else fold_batchnorm(g))
    if not quantized and quantize is not False:
        if calibration is None:
            if quantize:
                raise ValueError("quantize=True on a float model needs calibration data (calibration=...)")
            raise ValueError("this is a float model: pass calibration=<array or list of feed dicts> to quantize it to "
                             "int8 for the accelerator, or quantize=False to run it in float on the CPU")
        insert_qdq(g, calibration)
    if quantize is not False:
        stats["uint8_rebased"] = rebase_uint8(g)
    step("int8_lowered", lower_qdq(g, config) if quantize is not False else 0)
    stats["integer_ops_lowered"] = lower_integer_ops(g) if quantize is not False else 0
    fold_constants(g, keep_ops=frozenset())  # weights of CPU-fallback QDQ ops become float constants
    stats["act_matmuls_unrolled"] = unroll_qmatmul(g)
    stats["dilations_expanded"] = expand_dilated_convs(g) if widen_convs else 0
    stats["taps_folded"] = fold_conv_taps(g, config) if fold_taps else 0
    stats["conv_groups_merged"] = merge_conv_groups(g, config) if widen_convs else 0
    stats["convs_split_by_width"] = split_wide_convs(g, config) if packed_layout else 0
    step("layout_transforms", pack_layouts(g, config) if packed_layout else 0)
    stats["residual_adds_fused"] = fuse_residual_adds(g, config) if fuse_residual else 0
    stats["residual_adds_standalone"] = offload_standalone_adds(g, config) if fuse_residual and standalone_adds else 0
    groups = fuse_operators(g)
    step("fusion_groups", len(groups))
    parts = partition_graph(g)
    step("partitions", len(parts))
    plan = plan_memory(g)
    step("peak_bytes", plan.peak_bytes)
    steps.close()
    if quantize is False:
        for n in g.nodes:
            n.attrs.setdefault("host_reason", "quantize=False keeps the model in float on the CPU")
    acc_macs, host_macs = mac_split(g)
    stats.update(no_reuse_bytes=plan.no_reuse_bytes, nodes=len(g.nodes), ops=g.op_counts(), accel_macs=acc_macs,
                 host_macs=host_macs, host_fallbacks=host_fallbacks(g), precision=precision_summary(g))
    return CompiledGraph(g, config, parts, groups, plan, stats)
