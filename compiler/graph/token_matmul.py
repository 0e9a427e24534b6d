"""Linear layers over tokens as 2-D dense layers: ``MatMul([..., T, H], W[H, O]) [+ b]`` -> Gemm on rows.

Transformer exports apply their linear layers (attention projections, the MLP) to ``[batch, tokens,
hidden]`` activations with a 3-D/4-D ``MatMul`` and a separate bias ``Add``. The accelerator's dense
layer (and the int8 lowering, and the built-in PTQ) take a 2-D ``(rows, K) x (K, M)`` product with a bias
in the requant epilogue. :func:`flatten_token_matmuls` rewrites each such MatMul whose weight is a
2-D constant (or DequantizeLinear of one) into ``Reshape (rows, H) -> Gemm(x, W, b) -> Reshape [..., T, O]``;
a following ``Add`` of a constant bias with one value per output column becomes the Gemm's C. When the
activation comes from a per-tensor DequantizeLinear, the Reshape reads its integer input and a DQ of its own
follows (``Reshape -> DQ``: exact, a per-tensor DQ is elementwise), so the QDQ pattern stays intact.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node


def _weight_2d(g: Graph, prod, name: str) -> bool:
    if name in g.constants:
        return np.ndim(g.constants[name]) == 2
    p = prod.get(name)
    return (p is not None and p.op == "DequantizeLinear" and p.inputs[0] in g.constants
            and np.ndim(g.constants[p.inputs[0]]) == 2)


def _per_tensor_dq(g: Graph, node: Node | None) -> bool:
    if node is None or node.op != "DequantizeLinear":
        return False
    return all(not i or (i in g.constants and np.size(g.constants[i]) == 1) for i in node.inputs[1:])


def _bias_add(g: Graph, cons, out: str, n_out: int) -> tuple[Node, str] | None:
    users = cons.get(out, [])
    if len(users) != 1 or out in g.outputs or users[0].op != "Add":
        return None
    add = users[0]
    other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
    b = g.constants.get(other)
    if b is None or b.dtype.kind != "f" or b.ndim > 1 and any(d != 1 for d in b.shape[:-1]) or b.shape[-1:] not in (
            (n_out,), (1,)) and b.ndim:
        return None
    return add, other


def _single_activation(g: Graph, cons, out: str) -> Node | None:
    users = cons.get(out, [])
    if len(users) != 1 or out in g.outputs or users[0].op not in ("Relu", "Clip"):
        return None
    act = users[0]
    return act if all(not i or i in g.constants for i in act.inputs[1:]) else None


def flatten_token_matmuls(g: Graph) -> int:
    """Rewrite every MatMul of a rank >= 3 activation by a 2-D constant weight (and every 2-D MatMul with a
    constant bias Add) as a Gemm on rows; returns how many."""
    prod, cons = g.producers(), g.consumers()
    new: list[Node] = []
    done = 0
    removed: set[int] = set()
    for n in g.nodes:
        if id(n) in removed:
            continue
        if n.op != "MatMul" or n.inputs[0] not in g.tensors or n.outputs[0] not in g.tensors \
                or not _weight_2d(g, prod, n.inputs[1]) or g.tensors[n.inputs[0]].dtype.kind != "f":
            new.append(n)
            continue
        xs = tuple(g.tensors[n.inputs[0]].shape)
        ys = tuple(g.tensors[n.outputs[0]].shape)
        n_out = ys[-1]
        bias = _bias_add(g, cons, n.outputs[0], n_out)
        if len(xs) < 2 or (len(xs) == 2 and bias is None):
            new.append(n)
            continue
        rows = int(np.prod(xs[:-1], dtype=np.int64))
        out = bias[0].outputs[0] if bias is not None else n.outputs[0]
        x = n.inputs[0]
        if len(xs) > 2:
            x2 = g.fresh_name(f"{n.name}/rows")
            g.set_info(x2, (rows, xs[-1]), g.tensors[x].dtype)
            shape = g.add_constant(g.fresh_name(f"{n.name}/rows_shape"), np.asarray([rows, xs[-1]], np.int64))
            dq = prod.get(x)
            if _per_tensor_dq(g, dq):  # the Reshape on the integer side, then a DQ of its own next to the Gemm
                xq = g.fresh_name(f"{n.name}/rows_q")
                g.set_info(xq, (rows, xs[-1]), g.tensors[dq.inputs[0]].dtype)
                new.append(Node("Reshape", [dq.inputs[0], shape], [xq], {}, f"{n.name}/rows_q"))
                new.append(Node("DequantizeLinear", [xq, *dq.inputs[1:]], [x2], dict(dq.attrs), f"{n.name}/rows_dq"))
            else:
                new.append(Node("Reshape", [x, shape], [x2], {}, f"{n.name}/to_rows"))
            x = x2
        y2 = out if len(xs) == 2 else g.fresh_name(f"{n.name}/rows_out")
        if len(xs) > 2:
            g.set_info(y2, (rows, n_out), g.tensors[n.outputs[0]].dtype)
        ins = [x, n.inputs[1]] + ([bias[1]] if bias is not None else [])
        if bias is not None and np.ndim(g.constants[bias[1]]) != 1:
            flat = g.add_constant(g.fresh_name(f"{n.name}/bias"), np.asarray(g.constants[bias[1]]).reshape(-1))
            ins[2] = flat
        new.append(Node("Gemm", ins, [y2], {}, n.name))
        if len(xs) > 2:  # a following Relu/Clip runs on the rows too, so it folds into the dense epilogue
            act = _single_activation(g, cons, out)
            while act is not None and id(act) not in removed:
                a2 = g.fresh_name(f"{act.name}/rows")
                g.set_info(a2, (rows, n_out), g.tensors[act.outputs[0]].dtype)
                new.append(Node(act.op, [y2, *act.inputs[1:]], [a2], dict(act.attrs), act.name))
                removed.add(id(act))
                g.tensors.pop(out, None)
                y2, out = a2, act.outputs[0]
                act = _single_activation(g, cons, out)
            oshape = g.add_constant(g.fresh_name(f"{n.name}/out_shape"), np.asarray(ys, np.int64))
            new.append(Node("Reshape", [y2, oshape], [out], {}, f"{n.name}/from_rows"))
        if bias is not None:
            removed.add(id(bias[0]))
            if n.outputs[0] != out:
                g.tensors.pop(n.outputs[0], None)
        done += 1
    g.nodes = new
    g.toposort()
    g.remove_dead()
    return done
