"""The mixed-precision summary of a compiled graph: what runs in int8 on the accelerator, what runs as integer
host ops (QSoftmax, QLayerNorm, QGelu, QAdd, ...), what stays float32 on the host, and what the built-in PTQ
was told to keep in float (``Calibration(keep_float=...)``)."""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph
from compiler.graph.partition import node_target

MOVES = {"Reshape", "Transpose", "Slice", "Concat", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Gather",
         "PackActivation", "UnpackActivation", "PackDenseWeight", "PackedSqueezeHW", "FoldTaps", "Shape", "Cast",
         "QuantizeLinear", "DequantizeLinear"}  # data movement and the float <-> int8 boundary: not counted


def precision_summary(g: Graph) -> dict:
    """``{"accel_int8_layers", "host_int_ops": {op: n}, "host_float_ops": {op: n}, "kept_float": [node names]}``;
    ops that only move data (reshapes, packing, slices) and the Q/DQ boundary are not counted."""
    accel, ints, floats = 0, {}, {}
    for n in g.nodes:
        if node_target(n) == "accel":
            accel += 1
            continue
        if n.op in MOVES or not n.outputs or n.outputs[0] not in g.tensors:
            continue
        kind = ints if np.dtype(g.tensors[n.outputs[0]].dtype).kind in "iu" else floats
        kind[n.op] = kind.get(n.op, 0) + 1
    return {"accel_int8_layers": accel, "host_int_ops": dict(sorted(ints.items())),
            "host_float_ops": dict(sorted(floats.items())),
            "kept_float": [n.name for n in g.nodes if n.attrs.get("keep_float")]}
