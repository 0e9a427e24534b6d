"""Exporter-decomposed operators recognized as one op at import.

Exporters that predate opset 17 (and some that do not) write LayerNorm as
``m = ReduceMean(x); d = Sub(x, m); v = ReduceMean(Pow(d, 2) | Mul(d, d)); y = Div(d, Sqrt(Add(v, eps)))``
followed by ``Mul(y, gamma)`` and ``Add(., beta)``. :func:`fuse_decomposed_layernorm` rewrites each such
chain over trailing axes into one ``LayerNormalization`` node (``axis`` = the first reduced axis,
``epsilon`` = the added constant), so it runs as one kernel (and one op to quantize around). Chains
whose intermediate values are read elsewhere, whose axes are not the trailing ones, or whose constants
are not scalars stay as they are.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def _axes(node: onnx.NodeProto, consts: dict) -> list[int] | None:
    for a in node.attribute:
        if a.name == "axes":
            return list(a.ints)
    if len(node.input) > 1 and node.input[1]:
        v = consts.get(node.input[1])
        return None if v is None else [int(i) for i in np.ravel(v)]
    return None


def _keepdims(node: onnx.NodeProto) -> int:
    return next((int(a.i) for a in node.attribute if a.name == "keepdims"), 1)


def _scalar(v: np.ndarray | None) -> float | None:
    return None if v is None or np.size(v) != 1 or v.dtype.kind != "f" else float(np.ravel(v)[0])


def fuse_decomposed_layernorm(model: onnx.ModelProto, ranks: dict[str, int]) -> int:
    """Rewrite decomposed LayerNorms of ``model`` in place (``ranks``: tensor name -> rank); returns how many."""
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.output and any(a.name == "value" for a in n.attribute):
            consts[n.output[0]] = numpy_helper.to_array(next(a for a in n.attribute if a.name == "value").t)
    prod = {o: n for n in g.node for o in n.output}
    cons: dict[str, list[onnx.NodeProto]] = {}
    for n in g.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}

    def only(name: str, op: str) -> onnx.NodeProto | None:
        c = cons.get(name, [])
        return c[0] if len(c) == 1 and c[0].op_type == op and name not in outputs else None

    fused, drop = 0, set()
    for div in list(g.node):
        if div.op_type != "Div" or id(div) in drop:
            continue
        d, sq = div.input
        sqrt, sub = prod.get(sq), prod.get(d)
        if sqrt is None or sqrt.op_type != "Sqrt" or sub is None or sub.op_type != "Sub":
            continue
        add_eps = prod.get(sqrt.input[0])
        if add_eps is None or add_eps.op_type != "Add":
            continue
        var_name, eps_name = add_eps.input if add_eps.input[1] in consts else add_eps.input[::-1]
        eps, var = _scalar(consts.get(eps_name)), prod.get(var_name)
        if eps is None or var is None or var.op_type != "ReduceMean":
            continue
        sqr = prod.get(var.input[0])
        if sqr is None or not ((sqr.op_type == "Pow" and _scalar(consts.get(sqr.input[1])) == 2.0
                                and sqr.input[0] == d) or (sqr.op_type == "Mul" and list(sqr.input) == [d, d])):
            continue
        x, m = sub.input
        mean = prod.get(m)
        if mean is None or mean.op_type != "ReduceMean" or mean.input[0] != x or x not in ranks:
            continue
        rank = ranks[x]
        ax_m, ax_v = _axes(mean, consts), _axes(var, consts)
        if ax_m is None or ax_v is None or _keepdims(mean) != 1 or _keepdims(var) != 1:
            continue
        ax = sorted({a % rank for a in ax_m})
        if ax != sorted({a % rank for a in ax_v}) or not ax or ax != list(range(ax[0], rank)):
            continue
        # d is read by the square and the Div only; every other intermediate by its one successor
        if {id(c) for c in cons.get(d, [])} != {id(sqr), id(div)} or d in outputs:
            continue
        if not (only(m, "Sub") and only(sqr.output[0], "ReduceMean") and only(var.output[0], "Add")
                and only(add_eps.output[0], "Sqrt") and only(sq, "Div")):
            continue
        out, chain = div.output[0], [mean, sub, sqr, var, add_eps, sqrt, div]
        scale = bias = ""
        mul = only(out, "Mul")
        if mul is not None:
            other = mul.input[1] if mul.input[0] == out else mul.input[0]
            v = consts.get(other)
            if v is not None and v.ndim <= len(ax):
                scale, out = other, mul.output[0]
                chain.append(mul)
                add = only(out, "Add")
                if add is not None:
                    other = add.input[1] if add.input[0] == out else add.input[0]
                    b = consts.get(other)
                    if b is not None and b.ndim <= len(ax):
                        bias, out = other, add.output[0]
                        chain.append(add)
        if not scale:
            scale = f"{div.output[0]}/ln_scale"
            g.initializer.append(numpy_helper.from_array(np.ones((), np.float32), scale))
        ln = onnx.helper.make_node("LayerNormalization", [x, scale] + ([bias] if bias else []), [out],
                                   name=f"{div.name or out}/layernorm", axis=ax[0], epsilon=eps)
        pos = list(g.node).index(chain[-1])
        g.node.insert(pos + 1, ln)
        drop.update(id(c) for c in chain)
        fused += 1
    if fused:
        kept = [n for n in g.node if id(n) not in drop]
        del g.node[:]
        g.node.extend(kept)
    return fused
