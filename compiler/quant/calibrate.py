"""Built-in post-training quantization of float graphs.

Calibration runs the float graph on user data and records max |x| per activation tensor;
activations get symmetric per-tensor int8 scales (``max|x| / 127``). The pass inserts
``QuantizeLinear -> DequantizeLinear`` pairs around every Conv/Gemm/MatMul (after a following
Relu/Clip, so they fold) and around residual ``Add``s, squeeze-excite ``Mul``s, ``GlobalAveragePool``s and unary
activations (so they lower to integer host ops), leaving float weights and biases in place: :func:`lower_qdq` then
quantizes weights per output channel (symmetric int8) and biases to int32 at
``in_scale * w_scale``, exactly as for ORT-made QDQ models.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from compiler.frontend.errors import ModelInputError
from compiler.graph.evaluate import evaluate_graph
from compiler.graph.ir import Graph, Node

QUANT_OPS = ("Conv", "Gemm", "MatMul")


def _act_matmul(g: Graph, n: Node) -> bool:
    """A MatMul of two activations (attention's scores and context): both operands get Q/DQ."""
    return (n.op == "MatMul" and n.inputs[0] not in g.constants and n.inputs[1] not in g.constants
            and all(i in g.tensors and g.tensors[i].dtype.kind == "f" and len(g.tensors[i].shape) >= 2
                    for i in n.inputs[:2]))


def _quantizable(g: Graph, n: Node) -> bool:
    if _act_matmul(g, n):
        return True
    if n.op not in QUANT_OPS or n.inputs[1] not in g.constants:
        return False
    if n.op == "Gemm":
        return not n.attrs.get("transA", 0) and n.attrs.get("alpha", 1.0) == 1.0 and n.attrs.get("beta", 1.0) == 1.0
    if n.op == "MatMul":
        return len(g.tensors[n.inputs[0]].shape) == 2 and g.constants[n.inputs[1]].ndim == 2
    return len(g.tensors[n.inputs[0]].shape) == 4


UNARY_INT_OPS = ("HardSwish", "HardSigmoid", "Sigmoid", "LeakyRelu")


def _residual_add(g: Graph, n: Node) -> bool:
    """Ops quantized around so that they lower to integer host ops: an ``Add`` of two same-shaped
    activations (``QAdd``), a ``Mul`` of two activations (the squeeze-excite gate, ``QMul``),
    ``GlobalAveragePool``/``AveragePool`` and unary activations (``QLookup`` tables)."""
    if n.op in ("GlobalAveragePool", "AveragePool"):
        return len(g.tensors[n.inputs[0]].shape) == 4
    if n.op in UNARY_INT_OPS:
        return all(not i or i in g.constants for i in n.inputs[1:])
    if n.op not in ("Add", "Mul") or len(n.inputs) != 2 or not all(i and i not in g.constants for i in n.inputs):
        return False
    return n.op == "Mul" or g.tensors[n.inputs[0]].shape == g.tensors[n.inputs[1]].shape


def _output_tensor(g: Graph, n: Node, cons) -> str:
    """The tensor to quantize after ``n``: the output of a sole Relu/Clip consumer if any."""
    users = cons.get(n.outputs[0], [])
    if len(users) == 1 and n.outputs[0] not in g.outputs and users[0].op in ("Relu", "Clip"):
        act = users[0]
        if all(not i or i in g.constants for i in act.inputs[1:]):
            return act.outputs[0]
    return n.outputs[0]


def calibration_batches(g: Graph, data) -> list[dict[str, np.ndarray]]:
    """Normalize calibration data: a feed dict, a list of feed dicts, or an array for a 1-input model."""
    if isinstance(data, Mapping):
        data = [data]
    if isinstance(data, np.ndarray):
        if len(g.inputs) != 1:
            raise ModelInputError(f"an array calibration set needs a 1-input model; inputs are {g.inputs}; pass feed dicts")
        name = g.inputs[0]
        n = g.tensors[name].shape[0]
        if data.shape[1:] != g.tensors[name].shape[1:] or len(data) == 0:
            raise ModelInputError(f"calibration array shape {data.shape} does not fit input {name!r} {g.tensors[name].shape}")
        if len(data) % n == 0:
            data = [{name: data[i:i + n]} for i in range(0, len(data), n)]
        else:  # one batch of another size: fine for batch-agnostic graphs (no hard-coded Reshape)
            data = [{name: data}]
    batches = [dict(b) for b in data]
    if not batches:
        raise ModelInputError("calibration set is empty")
    for b in batches:
        missing = set(g.inputs) - set(b)
        if missing:
            raise ModelInputError(f"calibration feed lacks inputs {sorted(missing)}")
        for name, v in b.items():
            a = np.asarray(v)
            if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
                raise ModelInputError(f"calibration data for input {name!r} holds {int(np.sum(~np.isfinite(a)))} "
                                      f"NaN/Inf value(s); calibration data must be finite")
    return batches


def calibrate_ranges(g: Graph, tensors: Iterable[str], batches: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """max |value| of each named tensor over the calibration batches."""
    tensors = list(tensors)
    amax = {t: 0.0 for t in tensors}
    for feed in batches:
        vals = evaluate_graph(g, {k: np.asarray(v, np.float32) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
                                  for k, v in feed.items()}, keep_all=True)  # token ids stay integers
        for t in tensors:
            amax[t] = max(amax[t], float(np.abs(vals[t]).max()))
    return amax


def insert_qdq(g: Graph, calibration) -> int:
    """Insert symmetric int8 Q/DQ pairs around quantizable ops; returns how many ops were covered."""
    cons = g.consumers()
    targets = [n for n in g.nodes if _quantizable(g, n)]
    if not targets:
        return 0
    adds = [n for n in g.nodes if _residual_add(g, n)]
    act_in = {n.inputs[0] for n in targets} | {i for n in adds for i in n.inputs[:1 if n.op in UNARY_INT_OPS else 2]}
    act_in |= {n.inputs[1] for n in targets if _act_matmul(g, n)}
    act_out = {_output_tensor(g, n, cons) for n in targets + adds}
    forced: dict[str, str] = {}  # graph outputs keep their name: producer -> raw -> Q -> DQ -> name
    for t in sorted(act_out & set(g.outputs)):
        raw = g.fresh_name(f"{t}/float")
        g.tensors[raw] = g.tensors[t]
        for n in g.nodes:
            n.outputs = [raw if o == t else o for o in n.outputs]
            n.inputs = [raw if i == t else i for i in n.inputs]
        act_out = (act_out - {t}) | {raw}
        act_in = {raw if i == t else i for i in act_in}
        forced[raw] = t
    cons = g.consumers()
    amax = calibrate_ranges(g, act_in | act_out, calibration_batches(g, calibration))
    dq_of: dict[str, str] = {}
    new_nodes: list[Node] = []

    def qdq(t: str) -> str:
        if t not in dq_of:
            s = g.add_constant(g.fresh_name(f"{t}/scale"), np.float32(amax[t] / 127.0 if amax[t] > 0 else 1.0))
            z = g.add_constant(g.fresh_name(f"{t}/zp"), np.int8(0))
            q, dq = g.fresh_name(f"{t}/q"), forced.get(t) or g.fresh_name(f"{t}/dq")
            g.set_info(q, g.tensors[t].shape, np.int8)
            g.set_info(dq, g.tensors[t].shape, np.float32)
            new_nodes.extend([Node("QuantizeLinear", [t, s, z], [q], {}, f"{t}/quantize"),
                              Node("DequantizeLinear", [q, s, z], [dq], {}, f"{t}/dequantize")])
            dq_of[t] = dq
        return dq_of[t]

    # graph inputs first so their QDQ nodes precede every user
    for t in g.inputs:
        if t in act_in:
            qdq(t)
    for n in g.nodes:
        if n in targets and n.inputs[0] not in dq_of.values():
            n.inputs[0] = qdq(n.inputs[0])
        if n in targets and _act_matmul(g, n) and n.inputs[1] not in dq_of.values():
            n.inputs[1] = qdq(n.inputs[1])
        if n in adds:
            k = 1 if n.op in UNARY_INT_OPS or n.op in ("GlobalAveragePool", "AveragePool") else 2
            n.inputs = [i if j >= k or i in dq_of.values() else qdq(i) for j, i in enumerate(n.inputs)]
        new_nodes.append(n)
        for o in n.outputs:
            if o in act_out:
                dq = qdq(o)
                for c in cons.get(o, []):
                    c.inputs = [dq if i == o else i for i in c.inputs]
    g.nodes = new_nodes
    g.toposort()
    return len(targets)
