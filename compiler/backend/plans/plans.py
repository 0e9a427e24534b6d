"""Graph node -> operator-library kernel: which TE op computes a node, with what arguments.

``plan_node(node, infos, constants, target)`` returns an :class:`~compiler.backend.plans.oplan.OpPlan`: a cache
``key`` (op, shapes, dtypes, attributes), ``make()`` building the TE op and its schedule for the target, and
``args(inputs)`` mapping the node's input arrays to the kernel's arguments (weights are packed once, at plan
time). The planners live in :mod:`compiler.backend.plans.plans_float` and :mod:`compiler.backend.plans.plans_int8`.
Nodes no library op covers raise :class:`UnsupportedOnTarget` naming the op and what is allowed.
"""
from __future__ import annotations

from typing import Callable

from compiler.graph.ir import Node, TensorInfo
from compiler.schedule import Schedule, create_schedule
from compiler.backend.plans import plans_float, plans_int8
from compiler.backend.plans.oplan import OpPlan, UnsupportedOnTarget
from compiler.te import Tensor

PLANNERS: dict[str, Callable[..., OpPlan]] = {**plans_float.PLANNERS, **plans_int8.PLANNERS}
# glue ops below that run a compiled kernel on llvm where the planner takes the node (else numpy, as everywhere)
COMPILED_GLUE: dict[str, Callable[..., OpPlan]] = dict(plans_int8.COMPILED_GLUE)
LIBRARY_OPS = frozenset(PLANNERS)
# metadata-only reshapes: numpy views, no data moves
VIEW_OPS = frozenset({"Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze", "PackedSqueezeHW"})
# run by the numpy reference kernels on every target (labelled "numpy" in the profile): data movement without
# arithmetic, masks and indices (comparisons, logic, selects, ranges: a transformer's attention mask from its token
# ids; ArgMax/ArgMin/TopK/NonZero/NonMaxSuppression: label and box indices; rearrangements: Tile, DepthToSpace, Trilu, scatters;
# index arithmetic: CumSum/CumProd, Mod, bitwise ops and shifts of ids; EyeLike),
# and the rest of the int8 pipeline's glue between accelerator-style layers (and the exact int64 transformer ops)
NUMPY_GLUE_OPS = frozenset({"Cast", "Concat", "ConstantOfShape", "Gather", "Pad", "Resize", "Shape", "Slice", "Split",
                            "Transpose", "Equal", "Where", "And", "IsNaN", "Range", "Expand", "GatherElements",
                            "GatherND", "FoldTaps", "QGlobalAveragePool", "QAveragePool",
                            "RebaseUint8", "Repack", "PackDenseWeight", "ZeroInsert",
                            "RowSumDigits", "ZeroPointBias", "JoinBytes", "QSoftmax", "QLayerNorm", "QGelu",
                            "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Or", "Xor", "Not", "ArgMax", "ArgMin",
                            "Tile", "DepthToSpace", "SpaceToDepth", "Trilu", "ScatterND", "ScatterElements", "OneHot",
                            "TopK", "NonZero", "CastLike", "Size", "CumSum", "Mod", "NonMaxSuppression", "IsInf",
                            "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift", "EyeLike", "CumProd"})

# arithmetic that also meets integer index math (int64 position ids, sequence lengths, mask sums): where every input
# is an integer or bool tensor and the library declines the node (its kernels are float32 / int8 / int32), the numpy
# kernel runs it (exact), as glue; a float node the library declines is still refused
INDEX_ARITHMETIC_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sign", "Min", "Max", "Mean", "Pow", "Clip",
                                  "Relu", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"})

__all__ = ["PLANNERS", "LIBRARY_OPS", "VIEW_OPS", "NUMPY_GLUE_OPS", "COMPILED_GLUE", "INDEX_ARITHMETIC_OPS", "OpPlan",
           "UnsupportedOnTarget",
           "plan_node", "build_schedule"]


def plan_node(node: Node, infos: list[TensorInfo | None], consts: dict, target: str) -> OpPlan:
    """The library kernel plan of ``node`` for ``target`` (raises :class:`UnsupportedOnTarget`)."""
    planner = PLANNERS.get(node.op)
    if planner is None:
        raise UnsupportedOnTarget(f"node {node.name!r}: operator {node.op} is not in the operator library for target "
                                  f"{target!r}; library ops: {sorted(LIBRARY_OPS)}")
    return planner(node, infos, consts, target)


def build_schedule(plan: OpPlan) -> tuple[Schedule, list[Tensor]]:
    """The TE op of ``plan`` with its target schedule applied; returns (schedule, [args..., output])."""
    ins, out, sched = plan.make()
    s = create_schedule(out)
    sched(s)
    return s, list(ins) + [out]
