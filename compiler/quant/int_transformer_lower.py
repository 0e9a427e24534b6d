"""Lower the quantized transformer nonlinearities to integer host ops (:mod:`jit_runtime.host_ops.int_transformer`).

* ``DQ(x) -> Softmax -> Q`` -> ``QSoftmax`` (I-BERT integer exp, integer division);
* ``DQ(x) -> LayerNormalization(x, gamma, beta) -> Q`` over the last axis -> ``QLayerNorm`` (exact integer
  mean removal, integer Newton square root);
* the erf GELU ``DQ(x) -> Div(x, sqrt 2) | Mul(x, 1/sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5 -> Q`` (either
  order of the two Muls, as torch.onnx and hand-written graphs emit it) -> ``QGelu`` (I-BERT integer erf); a
  Reshape between the DQ and the GELU (a token linear layer's output) moves after the ``QGelu`` on int8 data.

A node whose ``attrs["keep_float"]`` is set (the built-in PTQ's ``keep_float`` option) stays in float.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node
from jit_runtime.host_ops.int_transformer import choose_qgelu, choose_qlayernorm, choose_qsoftmax

INT_TRANSFORMER_OPS = ("Softmax", "LayerNormalization", "Erf")
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")


def _scalar(g: Graph, name: str) -> float | None:
    c = g.constants.get(name)
    return float(np.asarray(c).reshape(())) if c is not None and np.size(c) == 1 else None


def _sole_user(cons, g: Graph, t: str) -> Node | None:
    users = cons.get(t, [])
    return users[0] if len(users) == 1 and t not in g.outputs else None


def _lower_softmax(g: Graph, n: Node, prod, cons, act_params, output_quantize):
    x, oq = act_params(g, prod.get(n.inputs[0])), output_quantize(g, n, cons)
    if x is None or oq is None or n.attrs.get("keep_float"):
        return None
    q, sy, zy = oq
    rank = len(g.tensors[x[0]].shape)
    axis = int(n.attrs.get("axis", -1))
    p = choose_qsoftmax(x[1], sy, zy, axis=axis - rank if axis >= 0 else axis)
    return Node("QSoftmax", [x[0]], [q.outputs[0]], {"qsoftmax": p}, n.name), [n, q]


def _lower_layernorm(g: Graph, n: Node, prod, cons, act_params, output_quantize):
    x, oq = act_params(g, prod.get(n.inputs[0])), output_quantize(g, n, cons)
    if x is None or oq is None or n.attrs.get("keep_float") or any(cons.get(o) for o in n.outputs[1:] if o):
        return None
    rank = len(g.tensors[x[0]].shape)
    axis = int(n.attrs.get("axis", -1))
    gamma = g.constants.get(n.inputs[1])
    beta = g.constants.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    width = g.tensors[x[0]].shape[-1]
    if (axis % rank) != rank - 1 or gamma is None or np.size(gamma) not in (1, width) or \
            (len(n.inputs) > 2 and n.inputs[2] and (beta is None or np.size(beta) not in (1, width))):
        return None
    q, sy, zy = oq
    p = choose_qlayernorm(x[1], x[2], np.broadcast_to(np.asarray(gamma, np.float64).ravel(), (width,)), beta,
                          float(n.attrs.get("epsilon", 1e-5)), sy, zy)
    return Node("QLayerNorm", [x[0]], [q.outputs[0]], {"qlayernorm": p}, n.name), [n, q]


def _lower_gelu(g: Graph, erf: Node, prod, cons, act_params, output_quantize):
    """Match the erf GELU around ``erf`` (see the module docstring)."""
    scaled = prod.get(erf.inputs[0])
    if scaled is None or scaled.op not in ("Div", "Mul") or _sole_user(cons, g, erf.inputs[0]) is not erf:
        return None
    c = _scalar(g, scaled.inputs[1])
    if c is None or not np.isclose(c if scaled.op == "Div" else 1.0 / c, np.sqrt(2.0), rtol=1e-4):
        return None
    xdq = prod.get(scaled.inputs[0])
    x = act_params(g, xdq)
    reshape = None  # DQ -> Reshape -> GELU (a token linear layer's output): the GELU runs before the reshape
    if x is None and xdq is not None and xdq.op in RESHAPES and all(i in g.constants for i in xdq.inputs[1:]):
        reshape, x = xdq, act_params(g, prod.get(xdq.inputs[0]))
    add = _sole_user(cons, g, erf.outputs[0])
    if x is None or add is None or add.op != "Add" or erf.attrs.get("keep_float"):
        return None
    one = [i for i in add.inputs if i != erf.outputs[0]]
    if len(one) != 1 or _scalar(g, one[0]) != 1.0:
        return None
    xt = scaled.inputs[0]
    m1 = _sole_user(cons, g, add.outputs[0])
    if m1 is None or m1.op != "Mul":
        return None
    other = [i for i in m1.inputs if i != add.outputs[0]]
    if len(other) != 1:
        return None
    if other[0] == xt:  # x * (1 + erf) -> * 0.5
        m2 = _sole_user(cons, g, m1.outputs[0])
        if m2 is None or m2.op != "Mul" or sorted(_scalar(g, i) or 0.0 for i in m2.inputs
                                                  if i != m1.outputs[0]) != [0.5]:
            return None
        half, last = None, m2
    else:  # (x * 0.5) * (1 + erf)
        half = prod.get(other[0])
        if half is None or half.op != "Mul" or _sole_user(cons, g, other[0]) is not m1 or xt not in half.inputs \
                or [_scalar(g, i) for i in half.inputs if i != xt] != [0.5]:
            return None
        last = m1
    oq = output_quantize(g, last, cons)
    if oq is None:
        return None
    q, sy, zy = oq
    p = choose_qgelu(x[1], x[2], sy, zy)
    removed = [scaled, erf, add, m1, q] + ([m2] if half is None else [half])
    if reshape is None:
        return Node("QGelu", [x[0]], [q.outputs[0]], {"qgelu": p}, last.name), removed
    t = g.fresh_name(f"{x[0]}/gelu")
    g.set_info(t, g.tensors[x[0]].shape, np.int8)
    g.nodes.insert(g.nodes.index(erf), Node("QGelu", [x[0]], [t], {"qgelu": p}, last.name))
    return Node(reshape.op, [t, *reshape.inputs[1:]], [q.outputs[0]], dict(reshape.attrs), f"{last.name}/reshape"), removed


LOWERINGS = {"Softmax": _lower_softmax, "LayerNormalization": _lower_layernorm, "Erf": _lower_gelu}


def lower_int_transformer(g: Graph, n: Node, prod, cons, act_params, output_quantize):
    """One lowering attempt at ``n`` (a Softmax, LayerNormalization or the Erf of a GELU): ``(new, removed)``."""
    return LOWERINGS[n.op](g, n, prod, cons, act_params, output_quantize)
