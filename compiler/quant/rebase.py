"""Rebase uint8 activations to int8: ``u`` with zero point ``z`` is ``u - 128`` with zero point ``z - 128``.

Both encode the same real value ``(u - z) * s``, and ``QuantizeLinear``'s rounding and saturation
commute with the shift, so the rewrite is exact. The accelerator computes on int8 only; after this
pass every internal quantized activation is int8. Graph inputs and outputs keep their dtypes: a
uint8 graph input read by DequantizeLinear gets a host ``RebaseUint8`` node (``u - 128``) in front.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node
from jit_runtime.host_ops.layout import rebase_uint8_array  # noqa: F401 (re-exported)


def _uint8_zp(g: Graph, node) -> bool:
    """A constant uint8 zero point, or none at all (ONNX's default: uint8 zero)."""
    if len(node.inputs) < 3 or not node.inputs[2]:
        return len(node.inputs) >= 2 and node.inputs[1] in g.constants
    zp = g.constants.get(node.inputs[2])
    return zp is not None and zp.dtype == np.uint8


def _zp_input(g: Graph, node) -> str:
    """The node's zero-point input, made explicit (a uint8 0 constant) when omitted."""
    if len(node.inputs) < 3 or not node.inputs[2]:
        node.inputs[2:] = [g.add_constant(g.fresh_name(f"{node.name}/zp"), np.uint8(0))]
    return node.inputs[2]


def rebase_uint8(g: Graph) -> int:
    """Rewrite ``Q(uint8) -> DQ`` pairs on internal tensors to int8 in place; returns how many tensors moved."""
    cons = g.consumers()
    moved = 0
    shifted: dict[str, str] = {}

    def int8_zp(name: str) -> str:
        if name not in shifted:
            z = g.constants[name].astype(np.int16) - 128
            shifted[name] = g.add_constant(g.fresh_name(f"{name}/int8"), z.astype(np.int8))
        return shifted[name]

    for n in g.nodes:
        if n.op != "QuantizeLinear" or not _uint8_zp(g, n):
            continue
        t = n.outputs[0]
        users = cons.get(t, [])
        if t in g.outputs or not users or not all(u.op == "DequantizeLinear" and u.inputs[0] == t and _uint8_zp(g, u)
                                                   for u in users):
            continue
        n.inputs[2] = int8_zp(_zp_input(g, n))
        for u in users:
            u.inputs[2] = int8_zp(_zp_input(g, u))
        g.set_info(t, g.tensors[t].shape, np.int8)
        moved += 1
    for inp in list(g.inputs):
        users = cons.get(inp, [])
        if g.tensors[inp].dtype != np.uint8 or not users or not all(
                u.op == "DequantizeLinear" and u.inputs[0] == inp and _uint8_zp(g, u) for u in users):
            continue
        t = g.fresh_name(f"{inp}/int8")
        g.set_info(t, g.tensors[inp].shape, np.int8)
        g.nodes.insert(0, Node("RebaseUint8", [inp], [t], {}, f"rebase:{inp}"))
        for u in users:
            u.inputs[0] = t
            u.inputs[2] = int8_zp(_zp_input(g, u))
        moved += 1
    if moved:
        g.remove_dead()
    return moved
