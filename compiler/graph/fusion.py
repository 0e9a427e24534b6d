"""Operator fusion with TVM's operator-pattern classification.

Rules (a producer is fused with its consumer only when the consumer is its sole user):
* out-elementwise-fusable group (conv, dense, pool) + elementwise/broadcast consumer;
* injective-or-simpler group + injective-or-simpler consumer;
* injective-or-simpler group + reduction consumer (the group becomes a reduction).
Groups are recorded as ``node.attrs['fusion_group']`` and returned as lists of node names.
"""
from __future__ import annotations

from enum import IntEnum

from compiler.graph.ir import Graph


class OpPattern(IntEnum):
    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


_PATTERNS = {
    OpPattern.ELEMWISE: {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "QuantizeLinear", "QLookup",
                         "DequantizeLinear", "Cast", "Identity", "Dropout"},
    OpPattern.BROADCAST: {"Add", "Sub", "Mul", "Div", "PRelu", "BatchNormalization", "QAdd", "QMul"},
    OpPattern.INJECTIVE: {"Reshape", "Flatten", "Transpose", "Concat", "Pad", "Resize", "Squeeze", "Unsqueeze",
                          "Gather", "FoldTaps", "PackedSqueezeHW", "PackActivation", "UnpackActivation", "Repack"},
    OpPattern.COMM_REDUCE: {"GlobalAveragePool", "QGlobalAveragePool"},
    OpPattern.OUT_ELEMWISE_FUSABLE: {"Conv", "Gemm", "MatMul", "QConv2D", "QDense", "AccelConv2D", "AccelDense",
                                     "MaxPool", "AveragePool", "PackedMaxPool", "QAveragePool"},
}
OP_PATTERN: dict[str, OpPattern] = {op: p for p, ops in _PATTERNS.items() for op in ops}


def op_pattern(op: str) -> OpPattern:
    return OP_PATTERN.get(op, OpPattern.OPAQUE)


def _can_fuse(group: OpPattern, consumer: OpPattern) -> OpPattern | None:
    if group == OpPattern.OUT_ELEMWISE_FUSABLE and consumer <= OpPattern.BROADCAST:
        return group
    if group <= OpPattern.INJECTIVE and consumer <= OpPattern.INJECTIVE:
        return max(group, consumer)
    if group <= OpPattern.INJECTIVE and consumer == OpPattern.COMM_REDUCE:
        return consumer
    return None


def fuse_operators(g: Graph, boundary=None) -> list[list[str]]:
    """Group nodes; ``boundary(a, b)`` may forbid fusing nodes a and b (e.g. different targets)."""
    cons = g.consumers()
    group_of: dict[int, int] = {}
    groups: list[list] = []
    pattern: list[OpPattern] = []
    for n in g.nodes:
        if id(n) not in group_of:
            group_of[id(n)] = len(groups)
            groups.append([n])
            pattern.append(op_pattern(n.op))
        gi = group_of[id(n)]
        users = [c for o in n.outputs for c in cons.get(o, [])]
        if len(users) != 1 or any(o in g.outputs for o in n.outputs) or groups[gi][-1] is not n:
            continue
        c = users[0]
        if id(c) in group_of or (boundary is not None and not boundary(n, c)):
            continue
        new = _can_fuse(pattern[gi], op_pattern(c.op))
        if new is not None:
            group_of[id(c)] = gi
            groups[gi].append(c)
            pattern[gi] = new
    result = []
    for gi, members in enumerate(groups):
        for m in members:
            m.attrs["fusion_group"] = gi
        result.append([m.name for m in members])
    return result
