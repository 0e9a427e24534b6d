"""Move QuantizeLinear/DequantizeLinear across the ops they commute with, exactly, so integer patterns appear.

Quantizers leave some float ops between a DequantizeLinear and the next QuantizeLinear that hide a pattern
:mod:`compiler.quant.qdq_lower` knows (onnxruntime quantizes ``MaxPool`` only from opset 12, and never
``ReduceMean``, ``Flatten`` or ``Squeeze`` before a ``Q``):

* ``op -> Reshape/Flatten/Squeeze/Unsqueeze/Identity/MaxPool -> Q`` becomes ``op -> Q -> that op`` (a
  per-tensor ``Q`` is elementwise and non-decreasing, so it commutes with any op that only moves elements,
  and with a window maximum). Then e.g.
  ``DQ -> GlobalAveragePool -> Q -> Reshape`` lowers to an integer global pool.
* ``DQ -> MaxPool`` becomes ``MaxPool (int8) -> DQ``: dequantization is increasing (scale > 0), so the
  maximum of the dequantized window is the dequantized maximum, padding (-inf) included.

* ``Q(DQ(x))`` with the same parameters is ``x``.

All rewrites are exact: the graph computes the same values.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node

LAYOUT_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
# a per-tensor Q is also non-decreasing: it commutes with MaxPool (padding is the smallest value either way)
HOISTABLE = LAYOUT_OPS | {"MaxPool"}


def _per_tensor(g: Graph, node: Node) -> bool:
    """A Q/DQ with constant, single-value scale and zero point."""
    scale = g.constants.get(node.inputs[1])
    zp = g.constants.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else np.zeros(())
    return scale is not None and zp is not None and np.size(scale) == 1 and np.size(zp) == 1


def _only_consumer(g: Graph, cons: dict, name: str) -> Node | None:
    c = cons.get(name, [])
    return c[0] if len(c) == 1 and name not in g.outputs else None


def hoist_quantize_over_layout(g: Graph) -> int:
    """``x -> layout op / MaxPool -> Q`` becomes ``x -> Q -> that op`` where ``x`` comes from a compute op (not a DQ:
    ``DQ -> layout -> Q`` already lowers as an int8 pass-through); returns the number of rewrites."""
    done = 0
    changed = True
    while changed:
        changed = False
        prod, cons = g.producers(), g.consumers()
        for q in g.nodes:
            if q.op != "QuantizeLinear" or not _per_tensor(g, q):
                continue
            lay = prod.get(q.inputs[0])
            if lay is None or lay.op not in HOISTABLE or (lay.op == "MaxPool" and len(lay.outputs) > 1 and lay.outputs[1]) or _only_consumer(g, cons, lay.outputs[0]) is not q:
                continue
            x = lay.inputs[0]
            src = prod.get(x)
            if src is None or src.op in ("DequantizeLinear", "QuantizeLinear") or x not in g.tensors:
                continue
            qx = g.fresh_name(f"{x}/q")
            g.set_info(qx, g.tensors[x].shape, g.tensors[q.outputs[0]].dtype)
            new_q = Node("QuantizeLinear", [x, *q.inputs[1:]], [qx], dict(q.attrs), q.name)
            new_lay = Node(lay.op, [qx, *lay.inputs[1:]], list(q.outputs), dict(lay.attrs), lay.name)
            i = g.nodes.index(lay)
            g.nodes[i] = new_q
            g.nodes[g.nodes.index(q)] = new_lay
            done += 1
            changed = True
            break
    if done:
        g.toposort()
        g.remove_dead()
    return done


def sink_dequantize_below_maxpool(g: Graph) -> int:
    """``DQ(x) -> MaxPool`` becomes ``MaxPool(x) -> DQ`` for per-tensor DQs of integer activations; returns the
    number of rewrites. A MaxPool with a used indices output is left alone."""
    done = 0
    prod = g.producers()
    for i, n in enumerate(list(g.nodes)):
        if n.op != "MaxPool" or (len(n.outputs) > 1 and n.outputs[1]):
            continue
        dq = prod.get(n.inputs[0])
        if dq is None or dq.op != "DequantizeLinear" or not _per_tensor(g, dq):
            continue
        x, y = dq.inputs[0], n.outputs[0]
        if x in g.constants or x not in g.tensors or y not in g.tensors or g.tensors[x].dtype.kind not in "iu":
            continue
        py = g.fresh_name(f"{y}/int")
        g.set_info(py, g.tensors[y].shape, g.tensors[x].dtype)
        pool = Node("MaxPool", [x], [py], dict(n.attrs), n.name)
        deq = Node("DequantizeLinear", [py, *dq.inputs[1:]], [y], dict(dq.attrs), f"{n.name}/dq")
        pos = g.nodes.index(n)
        g.nodes[pos:pos + 1] = [pool, deq]
        done += 1
    if done:
        g.remove_dead()
    return done


def cancel_dequantize_quantize(g: Graph) -> int:
    """``Q(DQ(x))`` with the same per-tensor scale, zero point and integer type is ``x``: readers of the ``Q``
    read ``x`` (left by the sinking above when a ``Q`` followed the ``MaxPool``); returns the count."""
    done = 0
    prod, cons = g.producers(), g.consumers()
    for q in g.nodes:
        dq = prod.get(q.inputs[0]) if q.op == "QuantizeLinear" else None
        if dq is None or dq.op != "DequantizeLinear" or q.outputs[0] in g.outputs:
            continue
        if not (_per_tensor(g, q) and _per_tensor(g, dq)):
            continue
        x = dq.inputs[0]
        zq = g.constants.get(q.inputs[2]) if len(q.inputs) > 2 and q.inputs[2] else None
        zd = g.constants.get(dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] else None
        if zq is None or zd is None or x not in g.tensors or g.tensors[x].dtype != np.asarray(zq).dtype:
            continue
        same_scale = float(np.asarray(g.constants[q.inputs[1]]).reshape(())) == \
            float(np.asarray(g.constants[dq.inputs[1]]).reshape(()))
        if not same_scale or int(np.asarray(zq).reshape(())) != int(np.asarray(zd).reshape(())):
            continue
        for c in cons.get(q.outputs[0], []):
            c.inputs = [x if i == q.outputs[0] else i for i in c.inputs]
        done += 1
    if done:
        g.remove_dead()
    return done


def commute_qdq(g: Graph) -> int:
    """The rewrites above, DQ sinking first (it can expose a ``DQ -> pool -> layout -> Q`` chain)."""
    return sink_dequantize_below_maxpool(g) + cancel_dequantize_quantize(g) + hoist_quantize_over_layout(g)
