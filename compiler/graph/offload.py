"""Where the work runs: MACs per node, the accelerator's share, and why MAC-heavy layers stay on the host.

``node_macs`` counts real multiply-accumulates (no block padding) from the graph's static shapes, so
the fraction is comparable across configs. ``host_fallbacks`` lists the MAC-doing nodes left on the
host with a reason (``attrs["host_reason"]`` when a pass recorded one); ``build`` warns once with it.
"""
from __future__ import annotations

import warnings

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.graph.partition import node_target

MAC_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "QConv2D", "QDense", "AccelConv2D", "AccelDense",
                     "QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger"})


class HostFallbackWarning(UserWarning):
    """Some MAC-doing layers of a model run on the host instead of the accelerator."""


class LossyWeightsWarning(UserWarning):
    """Some layers' weights could not be used as given (a weight zero point leaves int8) and were re-quantized."""


def node_macs(g: Graph, n: Node) -> int:
    """Real multiply-accumulates of one node (0 for ops without a reduction over weights)."""
    if n.op not in MAC_OPS or not n.outputs or n.outputs[0] not in g.tensors:
        return 0
    n_bytes = int(n.attrs.get("int32_bytes", 1))  # an int32 result stored as bytes: the layer's MACs run that often
    if n_bytes > 1 or n.attrs.get("digit_columns"):  # (and zero-point digit columns): count the model's MACs once
        return _macs(g, n) // n_bytes * (_k(g, n) - int(n.attrs.get("digit_columns", 0))) // max(1, _k(g, n))
    return _macs(g, n)


def _k(g: Graph, n: Node) -> int:
    """The reduction length of a dense layer's weight rows, block padding excluded (1 for other ops)."""
    if n.op == "AccelDense":
        return int(n.attrs["orig_weight_shape"][1])
    if n.op == "QDense":
        return int(g.tensors[n.inputs[1]].shape[1])
    return 1


def _macs(g: Graph, n: Node) -> int:
    out = int(np.prod(g.tensors[n.outputs[0]].shape, dtype=np.int64))
    if n.op == "AccelConv2D":
        o, cg, kh, kw = n.attrs["orig_weight_shape"]
        n_out = out // (g.tensors[n.outputs[0]].shape[1] * g.tensors[n.outputs[0]].shape[-1]) * o
        return int(n_out * cg * kh * kw)
    if n.op == "AccelDense":
        m, k = n.attrs["orig_weight_shape"]
        rows = g.tensors[n.outputs[0]].shape[0] * g.tensors[n.outputs[0]].shape[2]
        return int(rows * m * k)
    w = g.tensors.get(n.inputs[1] if len(n.inputs) > 1 else "")
    if w is None:
        return 0
    if n.op in ("Conv", "QConv2D", "ConvInteger", "ConvTranspose"):
        return int(out * np.prod(w.shape[1:], dtype=np.int64))
    if n.op == "QDense":
        return int(out * w.shape[1])
    if n.op in ("Gemm",):
        return int(out * (w.shape[1] if n.attrs.get("transB", 0) else w.shape[0]))
    return int(out * w.shape[-2]) if len(w.shape) >= 2 else int(out)


def mac_split(g: Graph) -> tuple[int, int]:
    """(accelerator MACs, host MACs) of a compiled graph."""
    acc = host = 0
    for n in g.nodes:
        m = node_macs(g, n)
        if node_target(n) == "accel":
            acc += m
        else:
            host += m
    return acc, host


def host_fallbacks(g: Graph) -> list[tuple[str, str, str]]:
    """(node name, op, reason) of every MAC-doing node left on the host."""
    out = []
    for n in g.nodes:
        if n.op in MAC_OPS and node_target(n) != "accel" and node_macs(g, n):
            out.append((n.name, n.op, n.attrs.get("host_reason", _default_reason(n))))
    return out


def _default_reason(n: Node) -> str:
    if n.op in ("QConv2D", "QDense"):
        return "integer layer outside the accelerator's conv/dense forms"
    return "float layer: not in a quantized (QDQ) pattern the compiler lowers"


def warn_lossy_weights(g: Graph, stacklevel: int = 3) -> list[str]:
    """Warn once when layers run with re-quantized (not bit-exact) weights."""
    names = [n.name for n in g.nodes if n.attrs.get("weights_requantized")]
    if names:
        shown = ", ".join(names[:8]) + (f", ... {len(names) - 8} more" if len(names) > 8 else "")
        warnings.warn(f"{g.name}: {len(names)} layer(s) have weight zero points that leave int8 (e.g. asymmetric uint8 "
                      f"weights); their weights were re-quantized to symmetric int8, so results are close to but not "
                      f"bit-exact with the model's QDQ semantics: {shown}", LossyWeightsWarning, stacklevel=stacklevel)
    return names


def warn_host_fallbacks(g: Graph, stacklevel: int = 3) -> list[tuple[str, str, str]]:
    """Warn once (one message for the whole model) when MAC-doing layers fall back to the host."""
    fb = host_fallbacks(g)
    if fb:
        acc, host = mac_split(g)
        frac = acc / (acc + host) if acc + host else 0.0
        shown = "; ".join(f"{name} ({op}): {why}" for name, op, why in fb[:8])
        more = f"; ... {len(fb) - 8} more" if len(fb) > 8 else ""
        warnings.warn(f"{g.name}: {len(fb)} layer(s) run on the host, accelerator MAC fraction {frac:.3f}: {shown}{more}",
                      HostFallbackWarning, stacklevel=stacklevel)
    return fb


def float_host_ops_between_accel(g: Graph) -> list[str]:
    """Host nodes touching a float tensor that lie on a path from one accelerator node to another."""
    prod = g.producers()
    cons = g.consumers()
    accel = [n for n in g.nodes if node_target(n) == "accel"]

    def reach(starts, step) -> set[int]:
        seen: set[int] = set()
        todo = list(starts)
        while todo:
            n = todo.pop()
            for m in step(n):
                if id(m) not in seen:
                    seen.add(id(m))
                    todo.append(m)
        return seen

    after = reach(accel, lambda n: [c for o in n.outputs for c in cons.get(o, [])])
    before = reach(accel, lambda n: [prod[i] for i in n.inputs if i in prod])
    out = []
    for n in g.nodes:
        if node_target(n) == "accel" or id(n) not in after or id(n) not in before:
            continue
        names = [t for t in list(n.inputs) + list(n.outputs) if t and t not in g.constants and t in g.tensors]
        if any(np.issubdtype(g.tensors[t].dtype, np.floating) for t in names):
            out.append(n.name)
    return out
