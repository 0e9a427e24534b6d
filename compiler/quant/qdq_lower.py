"""Lower QDQ patterns to integer operators.

* ``DQ(x) -> Conv/Gemm/MatMul(DQ(w) | float w, bias) [-> Q -> DQ] [-> Relu/Clip] -> Q`` becomes
  ``QConv2D``/``QDense`` on int8 with an integer :class:`~jit_runtime.host_ops.requant.Requant` (relu and
  clip ranges fold into the epilogue). Zero points are exact: the activation zero point ``zx``
  folds into the bias (``b - zx * sum(w)``) and becomes the conv's ``pad_value`` (padding holds
  the real zero); the output zero point is ``Requant.zero_point``. Weight zero points are
  subtracted at compile time when the result fits int8.
* ``DQ(a) + DQ(b) [-> Relu] -> Q`` becomes ``QAdd``, ``DQ(a) * DQ(b) -> Q`` ``QMul``,
  ``DQ(x) -> GlobalAveragePool/AveragePool -> Q`` ``QGlobalAveragePool``/``QAveragePool`` and ``DQ -> unary op -> Q``
  (HardSwish, HardSigmoid, Sigmoid, ...) a 256-entry ``QLookup`` table
  (:mod:`jit_runtime.host_ops.int_elementwise`): integer, no float round trip.
* ``DQ(t) -> MaxPool/Flatten/Reshape/... -> Q`` with identical scale and zero point runs the
  op directly on the int8 tensor (with other parameters, after an identity ``QLookup`` requant) (these ops commute with monotone quantization; ``Relu`` only
  with zero point 0; a constant ``Pad`` pads with the quantized pad value). ``Concat`` moves int8
  data, requantizing inputs with other scales through identity ``QLookup`` tables.
A ``DQ -> BatchNormalization -> Q`` first becomes a depthwise 1x1 conv (:mod:`compiler.quant.qdq_batchnorm`);
Q and DQ nodes are moved across the ops they commute with (:mod:`compiler.quant.qdq_commute`).
Everything else keeps its QDQ float form and runs on the CPU. uint8 activations are first
rebased to int8 (:func:`compiler.quant.rebase.rebase_uint8`).
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.quant.act_matmul import lower_act_matmul
from compiler.quant.int_transformer_lower import INT_TRANSFORMER_OPS, lower_int_transformer
from compiler.quant.qdq_batchnorm import batchnorm_as_depthwise
from compiler.quant.qdq_commute import commute_qdq
from jit_runtime.host_ops.int_elementwise import choose_qadd, choose_qavgpool, choose_qgap, choose_qmul, lookup_table
from compiler.quant.requant_params import MULT_BITS, acc_bound, choose_requant, mult_bits_for

INT_PASSTHROUGH = {"MaxPool", "Relu", "Flatten", "Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze", "Resize"}
# ops that only move (or, MaxPool, select) elements: with other output Q parameters they run after a requant table
REQUANT_PASSTHROUGH = {"MaxPool", "Flatten", "Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze"}
ZERO_POINT_FREE = {"Relu"}  # ops that treat integer 0 as real zero (constant Pad is handled apart)
LOOKUP_OPS = {"HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "LeakyRelu", "Relu", "Clip", "Elu", "Softplus", "Exp"}


def _const(g: Graph, name: str):
    return g.constants.get(name) if name else None


def _dq_params(g: Graph, node: Node | None):
    """(int tensor, scale array, axis, zero point array) of a DequantizeLinear with constant params."""
    if node is None or node.op != "DequantizeLinear":
        return None
    scale = _const(g, node.inputs[1])
    zp = _const(g, node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else np.zeros((), np.int8)
    if scale is None or zp is None:
        return None
    return node.inputs[0], np.asarray(scale, np.float64), int(node.attrs.get("axis", 1)), np.asarray(zp)


def _act_params(g: Graph, node: Node | None):
    """(int8 tensor, scale, zero point) of a per-tensor DequantizeLinear of an int8 activation."""
    p = _dq_params(g, node)
    if p is None or p[1].size != 1 or p[3].size != 1:
        return None
    info = g.tensors.get(p[0])
    if info is None or info.dtype != np.int8 or p[0] in g.constants:
        return None
    return p[0], float(p[1].reshape(())), int(p[3].reshape(()))


def _operand_params(g: Graph, node: Node | None):
    """Like :func:`_act_params`, also accepting a per-tensor DQ of an int8/uint8 constant (uint8 constants are
    rebased to int8 with their zero point), for elementwise ops with a constant operand (``x + b``, ``x * s``)."""
    a = _act_params(g, node)
    if a is not None:
        return a
    p = _dq_params(g, node)
    if p is None or p[1].size != 1 or p[3].size != 1 or p[0] not in g.constants:
        return None
    c, zp, name = g.constants[p[0]], int(p[3].reshape(())), p[0]
    if c.dtype == np.uint8:
        name, zp = f"{p[0]}/int8", zp - 128
        if name not in g.constants:
            g.add_constant(name, (c.astype(np.int16) - 128).astype(np.int8))
    elif c.dtype != np.int8:
        return None
    return name, float(p[1].reshape(())), zp


def _q_params(g: Graph, node: Node):
    """(scale, zero point) of a per-tensor QuantizeLinear to int8."""
    if node.op != "QuantizeLinear" or len(node.inputs) < 3 or not node.inputs[2]:
        return None
    scale, zp = _const(g, node.inputs[1]), _const(g, node.inputs[2])
    if scale is None or zp is None or np.size(scale) != 1 or np.size(zp) != 1 or zp.dtype != np.int8:
        return None
    return float(np.asarray(scale).reshape(())), int(np.asarray(zp).reshape(()))


def _single_consumer(cons, name: str, g: Graph) -> Node | None:
    c = cons.get(name, [])
    return c[0] if len(c) == 1 and name not in g.outputs else None


def _output_quantize(g: Graph, n: Node, cons) -> tuple[Node, float, int] | None:
    """``(q, scale, zero point)`` when ``n``'s output goes only to a per-tensor int8 QuantizeLinear ``q``."""
    q = _single_consumer(cons, n.outputs[0], g)
    qp = None if q is None else _q_params(g, q)
    return None if qp is None else (q, *qp)


def quantize_weight_per_channel(w: np.ndarray, axis: int):
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.abs(w).max(axis=red)
    # float32 scales, as a QDQ ONNX model stores them: the exported model is then bit-identical
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32).astype(np.float64)
    shape = [1] * w.ndim
    shape[axis] = -1
    return np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8), scale


def weight_out_axis(n: Node) -> int:
    """Output-channel axis of the weight of a Conv (OIHW), Gemm ((M, K) with transB, else (K, M)) or MatMul ((K, M))."""
    if n.op == "Conv":
        return 0
    if n.op == "Gemm":
        return 0 if n.attrs.get("transB", 0) else 1
    return 1


def quantize_bias(bias: np.ndarray, acc_scale: np.ndarray) -> np.ndarray:
    """Float bias -> int32 at the accumulator scale (rounded, saturated)."""
    return np.clip(np.rint(bias / acc_scale), -(2 ** 31), 2 ** 31 - 1).astype(np.int32)


def _weight(g: Graph, prod, name: str, out_axis: int):
    """(int8 weight, per-output-channel scale array, re-quantized?) from DQ(int8/uint8 const) or a float constant.

    Weight zero points are subtracted exactly when the result fits int8; otherwise (e.g. asymmetric uint8
    weights) the weights are re-quantized to symmetric per-channel int8, which is lossy and flagged."""
    p = _dq_params(g, prod.get(name))
    if p is not None:
        wq = _const(g, p[0])
        if wq is None or wq.dtype not in (np.int8, np.uint8):
            return None
        scale, zp = p[1].reshape(-1), p[3].reshape(-1).astype(np.int64)
        if (scale.size != 1 or zp.size != 1) and p[2] % wq.ndim != out_axis:
            return None
        if np.any(zp != 0) or wq.dtype != np.int8:  # subtract the weight zero point when the result fits int8
            shape = [1] * wq.ndim
            shape[out_axis] = -1
            wz = wq.astype(np.int64) - (zp.reshape(shape) if zp.size > 1 else zp.reshape(()))
            scale = np.broadcast_to(scale, (wq.shape[out_axis],)).astype(np.float64)
            if wz.min(initial=0) < -128 or wz.max(initial=0) > 127:  # e.g. uint8 weights: re-quantize (lossy)
                return (*quantize_weight_per_channel(wz * scale.reshape(shape), out_axis), True)
            wq = wz.astype(np.int8)
        return wq, np.broadcast_to(scale, (wq.shape[out_axis],)).astype(np.float64), False
    w = _const(g, name)
    if w is None or not np.issubdtype(w.dtype, np.floating):
        return None
    return (*quantize_weight_per_channel(w.astype(np.float64), out_axis), False)


def _bias_value(g: Graph, prod, name: str):
    if not name:
        return None
    dq = prod.get(name)
    if dq is not None and dq.op == "DequantizeLinear":
        q, s = _const(g, dq.inputs[0]), _const(g, dq.inputs[1])
        if q is None or s is None:
            return False
        zp = _const(g, dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] else 0
        return (q.astype(np.float64) - np.asarray(zp, np.float64)) * np.asarray(s, np.float64)
    b = _const(g, name)
    return False if b is None else b.astype(np.float64)


def _epilogue_chain(g: Graph, cons, start: str):
    """Follow ``[Q -> DQ] -> [Relu|Clip] -> Q`` after ``start``; returns (nodes, final Q, relu, lo, hi)."""
    chain: list[Node] = []
    cur = start
    relu, lo, hi = False, None, None
    nxt = _single_consumer(cons, cur, g)
    if nxt is not None and nxt.op == "QuantizeLinear":
        dq = _single_consumer(cons, nxt.outputs[0], g)
        act = _single_consumer(cons, dq.outputs[0], g) if dq is not None and dq.op == "DequantizeLinear" else None
        if act is not None and act.op in ("Relu", "Clip") and _q_params(g, nxt) is not None:
            chain += [nxt, dq]
            cur, nxt = dq.outputs[0], act
        else:
            return [], nxt, False, None, None
    if nxt is not None and nxt.op in ("Relu", "Clip"):
        if nxt.op == "Relu":
            relu = True
        else:
            lo_c = _const(g, nxt.inputs[1]) if len(nxt.inputs) > 1 and nxt.inputs[1] else nxt.attrs.get("min")
            hi_c = _const(g, nxt.inputs[2]) if len(nxt.inputs) > 2 and nxt.inputs[2] else nxt.attrs.get("max")
            if (len(nxt.inputs) > 1 and nxt.inputs[1] and lo_c is None) or (len(nxt.inputs) > 2 and nxt.inputs[2] and hi_c is None):
                return None
            lo = None if lo_c is None else float(np.asarray(lo_c))
            hi = None if hi_c is None else float(np.asarray(hi_c))
        chain.append(nxt)
        nxt = _single_consumer(cons, nxt.outputs[0], g)
    if nxt is None or nxt.op != "QuantizeLinear":
        return None
    return chain, nxt, relu, lo, hi


def _host(n: Node, why: str) -> None:
    n.attrs["host_reason"] = why
    return None


def _lower_one(g: Graph, n: Node, prod, cons, mult_bits: int = MULT_BITS) -> tuple[Node, list[Node]] | None:
    x = _act_params(g, prod.get(n.inputs[0]))
    if x is None and not any(getattr(prod.get(i), "op", None) == "DequantizeLinear" for i in n.inputs[:2]):
        return _host(n, "float layer: its inputs are not quantized (no DequantizeLinear)" + (
            "; quantize_dynamic leaves activation x activation MatMuls in float" if n.op == "MatMul" else ""))
    if x is None:
        return _host(n, "input is not a per-tensor int8/uint8 DequantizeLinear with constant scale and zero point")
    if n.op == "Conv":
        if len(g.tensors[n.inputs[0]].shape) != 4:
            return _host(n, "only 2-D convolutions (NCHW) are lowered")
    elif n.op == "Gemm":
        if n.attrs.get("transA", 0) or n.attrs.get("alpha", 1.0) != 1.0 or n.attrs.get("beta", 1.0) != 1.0:
            return _host(n, "Gemm with transA, alpha != 1 or beta != 1")
    elif n.inputs[1] not in g.constants and _act_params(g, prod.get(n.inputs[1])) is not None:
        res = lower_act_matmul(g, n, prod, cons, _act_params, _epilogue_chain, _q_params, mult_bits)
        return _host(n, res) if isinstance(res, str) else res  # two activations: QMatMul (compiler.quant.act_matmul)
    elif len(g.tensors[n.inputs[0]].shape) != 2:
        return _host(n, "MatMul input is not 2-D")
    out_axis = weight_out_axis(n)
    wt = _weight(g, prod, n.inputs[1], out_axis)
    if wt is None:
        return _host(n, "weight is not a constant (DequantizeLinear of int8/uint8 with per-tensor or per-output-channel "
                        "scale and a zero point that keeps it int8, or float)")
    wq, w_scale, requantized = wt
    if out_axis == 1:  # (K, M) -> (M, K)
        wq = np.ascontiguousarray(wq.T)
    ep = _epilogue_chain(g, cons, n.outputs[0])
    if ep is None:
        return _host(n, "output is not followed by [Relu|Clip ->] QuantizeLinear (single consumer)")
    chain, q, relu, lo, hi = ep
    qp = _q_params(g, q)
    if qp is None:
        return _host(n, "output QuantizeLinear is not per-tensor int8/uint8 with constant scale and zero point")
    (in_scale, in_zp), (out_scale, out_zp) = x[1:], qp
    acc_scale = in_scale * w_scale
    bias = _bias_value(g, prod, n.inputs[2] if len(n.inputs) > 2 else "")
    if bias is False:
        return _host(n, "bias is not constant")
    b_int = None
    if bias is not None:
        bias = np.broadcast_to(np.asarray(bias).reshape(-1), (wq.shape[0],))
        b_int = quantize_bias(bias, acc_scale)
    if in_zp:  # sum(w * (x - zx)) = sum(w * x) - zx * sum(w): the zero point folds into the bias
        fold = -in_zp * wq.astype(np.int64).reshape(wq.shape[0], -1).sum(axis=1)
        b_int = np.clip(fold + (0 if b_int is None else b_int.astype(np.int64)), -(2 ** 31), 2 ** 31 - 1).astype(np.int32)
    out_min = -128 if lo is None else max(-128, int(np.rint(lo / out_scale)) + out_zp)
    out_max = 127 if hi is None else min(127, int(np.rint(hi / out_scale)) + out_zp)
    rq = choose_requant(acc_scale / out_scale, acc_bound(wq, b_int), relu=relu, out_min=out_min, out_max=out_max,
                        mult_bits=mult_bits)
    if out_zp:
        rq = replace(rq, zero_point=out_zp)
    w_name = g.add_constant(g.fresh_name(f"{n.name}/wq"), wq)
    inputs = [x[0], w_name, g.add_constant(g.fresh_name(f"{n.name}/bq"), b_int) if b_int is not None else ""]
    attrs = {"requant": rq, "in_scale": in_scale, "w_scale": w_scale, "out_scale": out_scale,
             "in_zero_point": in_zp, "out_zero_point": out_zp}
    if requantized:
        attrs["weights_requantized"] = "weight zero point leaves int8: weights re-quantized to symmetric int8 (lossy)"
    if n.op == "Conv":
        attrs.update({k: n.attrs[k] for k in ("strides", "pads", "dilations")}, group=int(n.attrs.get("group", 1)))
        if in_zp and any(n.attrs["pads"]):
            attrs["pad_value"] = in_zp  # the border holds the real zero
        op = "QConv2D"
    else:
        op = "QDense"
    return Node(op, inputs, [q.outputs[0]], attrs, n.name), [n, *chain, q]


def _clamp_chain(g: Graph, cons, start: str):
    """``[Relu] -> Q`` after ``start``: (removed nodes, Q node, relu)."""
    nxt = _single_consumer(cons, start, g)
    chain, relu = [], False
    if nxt is not None and nxt.op == "Relu":
        chain.append(nxt)
        relu = True
        nxt = _single_consumer(cons, nxt.outputs[0], g)
    if nxt is None or nxt.op != "QuantizeLinear" or _q_params(g, nxt) is None:
        return None
    return chain, nxt, relu


def _lower_add(g: Graph, n: Node, prod, cons) -> tuple[Node, list[Node]] | None:
    a, b = (_operand_params(g, prod.get(i)) for i in n.inputs[:2])
    if a is None or b is None or a[0] in g.constants and b[0] in g.constants:
        return None
    if np.broadcast_shapes(g.tensors[a[0]].shape, g.tensors[b[0]].shape) != g.tensors[n.outputs[0]].shape:
        return None
    ch = _clamp_chain(g, cons, n.outputs[0])
    if ch is None:
        return None
    chain, q, relu = ch
    sy, zy = _q_params(g, q)
    p = choose_qadd(a[1], a[2], b[1], b[2], sy, zy, out_min=zy if relu else -128)
    attrs = {"qadd": p, "in_scales": (a[1], b[1]), "out_scale": sy}
    return Node("QAdd", [a[0], b[0]], [q.outputs[0]], attrs, n.name), [n, *chain, q]


def _lower_mul(g: Graph, n: Node, prod, cons) -> tuple[Node, list[Node]] | None:
    a, b = (_operand_params(g, prod.get(i)) for i in n.inputs[:2])
    oq = _output_quantize(g, n, cons)
    if a is None or b is None or oq is None:
        return None
    q, sy, zy = oq
    if a[0] in g.constants and b[0] in g.constants:
        return None
    sa, sb = g.tensors[a[0]].shape, g.tensors[b[0]].shape
    if np.broadcast_shapes(sa, sb) != g.tensors[n.outputs[0]].shape:
        return None
    p = choose_qmul(a[1], a[2], b[1], b[2], sy, zy)
    return Node("QMul", [a[0], b[0]], [q.outputs[0]], {"qmul": p}, n.name), [n, q]


def _lower_unary(g: Graph, n: Node, prod, cons) -> tuple[Node, list[Node]] | None:
    """``DQ -> unary op -> Q``: a 256-entry table built with the CPU kernel of the op."""
    from jit_runtime.host_ops.kernels import KERNELS  # the float kernels define the op once

    x = _act_params(g, prod.get(n.inputs[0]))
    oq = _output_quantize(g, n, cons)
    if x is None or oq is None or n.op not in KERNELS:
        return None
    q, sy, zy = oq
    extra = [_const(g, i) if i else None for i in n.inputs[1:]]
    if any(i and e is None for i, e in zip(n.inputs[1:], extra)):
        return None
    table = lookup_table(lambda v: KERNELS[n.op](n.attrs, v, *extra), x[1], x[2], sy, zy)
    return Node("QLookup", [x[0]], [q.outputs[0]], {"table": table, "fn": n.op}, n.name), [n, q]


def _lower_avgpool(g: Graph, n: Node, prod, cons) -> tuple[Node, list[Node]] | None:
    from jit_runtime.host_ops.kernels import pool_pads  # the one pool padding rule (ceil_mode included)

    x = _act_params(g, prod.get(n.inputs[0]))
    oq = _output_quantize(g, n, cons)
    if x is None or oq is None:
        return None
    q, sy, zy = oq
    shape = g.tensors[x[0]].shape
    if len(shape) != 4 or any(int(d) != 1 for d in n.attrs.get("dilations", (1, 1))):
        return None
    kh, kw, sh, sw, t, l, b, r = pool_pads(n.attrs, shape[2], shape[3])
    p = choose_qavgpool(x[1], x[2], sy, zy, shape[2], shape[3], (kh, kw), (sh, sw), (t, l, b, r),
                        bool(n.attrs.get("count_include_pad", 0)))
    if p.mult.shape != tuple(g.tensors[q.outputs[0]].shape[2:]):
        return None
    return Node("QAveragePool", [x[0]], [q.outputs[0]], {"qavgpool": p}, n.name), [n, q]


def _lower_gap(g: Graph, n: Node, prod, cons) -> tuple[Node, list[Node]] | None:
    x = _act_params(g, prod.get(n.inputs[0]))
    oq = _output_quantize(g, n, cons)
    if x is None or oq is None:
        return None
    q, sy, zy = oq
    shape = g.tensors[x[0]].shape
    if len(shape) < 3:
        return None
    p = choose_qgap(x[1], x[2], sy, zy, int(np.prod(shape[2:])))
    return Node("QGlobalAveragePool", [x[0]], [q.outputs[0]], {"qgap": p}, n.name), [n, q]


def _lower_passthrough(g: Graph, n: Node, prod, cons) -> tuple[Node, list[Node]] | None:
    x = _act_params(g, prod.get(n.inputs[0]))
    q = _single_consumer(cons, n.outputs[0], g)
    if x is None or q is None:
        return None
    qp = _q_params(g, q)
    if qp is None:
        return None
    inputs = [x[0]] + n.inputs[1:]
    if not np.isclose(qp[0], x[1], rtol=1e-7, atol=0) or qp[1] != x[2]:
        if n.op not in REQUANT_PASSTHROUGH:
            return None
        # other output parameters: requantize first (an identity QLookup: exactly Q(DQ(x))), then move data
        t = g.fresh_name(f"{x[0]}/requant")
        g.set_info(t, g.tensors[x[0]].shape, np.int8)
        table = lookup_table(lambda v: v, x[1], x[2], qp[0], qp[1])
        g.nodes.insert(g.nodes.index(n), Node("QLookup", [x[0]], [t], {"table": table, "fn": "Identity"},
                                              f"{n.name}/requant"))
        return Node(n.op, [t] + n.inputs[1:], [q.outputs[0]], dict(n.attrs), n.name), [n, q]
    if n.op == "Pad" and n.attrs.get("mode", "constant") == "constant":
        if len(n.inputs) < 2 or not n.inputs[1]:
            return None  # opset < 11 (pads as an attribute): stays float
        value = _const(g, n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else np.zeros(())
        if value is None:
            return None
        qv = int(np.clip(np.rint(float(np.asarray(value).reshape(())) / x[1]) + x[2], -128, 127))  # Q(pad value)
        inputs = [x[0], n.inputs[1], g.add_constant(g.fresh_name(f"{n.name}/qpad"), np.int8(qv)), *n.inputs[3:]]
    elif x[2] and n.op in ZERO_POINT_FREE:
        return None
    return Node(n.op, inputs, [q.outputs[0]], dict(n.attrs), n.name), [n, q]


def _lower_concat(g: Graph, n: Node, prod, cons) -> tuple[Node, list[Node]] | None:
    """``Concat`` of DQ inputs -> Q: inputs whose (scale, zero point) differ from the output's are requantized
    by an identity ``QLookup`` table first; the concat itself moves int8 data."""
    xs = [_act_params(g, prod.get(i)) for i in n.inputs]
    oq = _output_quantize(g, n, cons)
    if any(x is None for x in xs) or oq is None:
        return None
    q, sy, zy = oq
    ins, extra = [], []
    for x in xs:
        if np.isclose(x[1], sy, rtol=1e-7, atol=0) and x[2] == zy:
            ins.append(x[0])
            continue
        t = g.fresh_name(f"{x[0]}/requant")
        g.set_info(t, g.tensors[x[0]].shape, np.int8)
        table = lookup_table(lambda v: v, x[1], x[2], sy, zy)
        extra.append(Node("QLookup", [x[0]], [t], {"table": table, "fn": "Identity"}, f"{n.name}/{t}"))
        ins.append(t)
    g.nodes[g.nodes.index(n):g.nodes.index(n)] = extra
    return Node("Concat", ins, [q.outputs[0]], dict(n.attrs), n.name), [n, q]


def _fold_int_relus(g: Graph) -> int:
    """``QAdd -> Relu`` (an int8 Relu left by a ``Q -> DQ -> Relu -> Q`` chain, zero point 0): the Relu becomes
    the QAdd's lower clip."""
    prod, cons = g.producers(), g.consumers()
    folded = 0
    for n in list(g.nodes):
        src = prod.get(n.inputs[0]) if n.op == "Relu" else None
        if src is None or src.op != "QAdd" or len(cons.get(n.inputs[0], [])) != 1 or n.inputs[0] in g.outputs:
            continue
        p = src.attrs["qadd"]
        if p.out_zp != 0 or g.tensors[n.inputs[0]].dtype != np.int8:
            continue
        src.attrs["qadd"] = replace(p, out_min=max(p.out_min, 0))
        src.outputs[0] = n.outputs[0]
        g.nodes.remove(n)
        folded += 1
    return folded


def lower_qdq(g: Graph, config=None) -> int:
    """Rewrite QDQ patterns in place; returns the number of nodes lowered to integer form.

    ``config`` (an ``isa.HwConfig``) picks the accelerator layers' requant parameters: 31-bit multipliers for
    the fused REQUANT op where the config has it (and for None), the multi-pass ones (pre-shift, 15-bit
    multiplier, shift <= 31) elsewhere.
    """
    batchnorm_as_depthwise(g)  # DQ -> BatchNormalization -> Q: a depthwise 1x1 conv
    commute_qdq(g)  # exact moves that expose the patterns below (DQ under MaxPool, Q over Reshape/Squeeze)
    count = 0
    lower_mac = partial(_lower_one, mult_bits=mult_bits_for(config))
    for kinds, fn in ((("Conv", "Gemm", "MatMul"), lower_mac), (tuple(INT_PASSTHROUGH | {"Pad"}), _lower_passthrough),
                      (("Add",), _lower_add), (("Mul",), _lower_mul), (("GlobalAveragePool",), _lower_gap),
                      (("Concat",), _lower_concat), (("AveragePool",), _lower_avgpool),
                      (tuple(LOOKUP_OPS), _lower_unary),
                      (INT_TRANSFORMER_OPS, partial(lower_int_transformer, act_params=_act_params,
                                                    output_quantize=_output_quantize))):
        changed = True
        while changed:
            changed = False
            prod, cons = g.producers(), g.consumers()
            for n in list(g.nodes):
                if n.op not in kinds:
                    continue
                res = fn(g, n, prod, cons)
                if res is None:
                    continue
                new, removed = res
                ids = {id(r) for r in removed}
                pos = g.nodes.index(n)
                g.nodes = [m for m in g.nodes[:pos] if id(m) not in ids] + [new] + [m for m in g.nodes[pos:] if id(m) not in ids]
                count += 1
                changed = True
                break
    g.remove_dead()
    count += _fold_int_relus(g)
    g.toposort()
    g.remove_dead()
    return count
