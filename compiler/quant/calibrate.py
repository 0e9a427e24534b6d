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

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from compiler.frontend.errors import ModelInputError
from compiler.graph.evaluate import evaluate_graph
from compiler.graph.ir import Graph, Node

QUANT_OPS = ("Conv", "Gemm", "MatMul")
CALIBRATION_METHODS = ("max", "percentile", "entropy")
# op types that ``keep_float`` accepts besides tensor names: their integer forms (QSoftmax, QLayerNorm, QGelu) are
# not used and their inputs get no Q/DQ for their sake
KEEP_FLOAT_OPS = ("Softmax", "LayerNormalization", "Gelu")
# quantized around (unless they produce a model output) so they lower to QSoftmax/QLayerNorm
INT_NONLINEAR_OPS = ("Softmax", "LayerNormalization")


@dataclass(frozen=True)
class Calibration:
    """Calibration data with the built-in PTQ's options (``build(..., calibration=Calibration(data, ...))``).

    ``method``: how an activation's int8 range ``t`` (scale ``t / 127``) is chosen from its calibration values:
    ``"max"`` (max |x|), ``"percentile"`` (the ``percentile``-th percentile of |x|), ``"entropy"`` (the clip
    threshold minimizing the KL divergence between the |x| histogram (2048 bins) and its 128-level quantized
    form, thresholds tried every 16 bins, as TensorRT calibrates). ``keep_float``: tensor names (no Q/DQ pair: every reader gets float32)
    and/or op types from :data:`KEEP_FLOAT_OPS` (those ops run in float on the host instead of their integer
    forms): mixed precision for tensors where int8 would break accuracy.
    """

    data: object
    method: str = "max"
    percentile: float = 99.99
    keep_float: tuple[str, ...] = ()

    def __post_init__(self):
        if self.method not in CALIBRATION_METHODS:
            raise ModelInputError(f"unknown calibration method {self.method!r}; allowed: {', '.join(CALIBRATION_METHODS)}")
        if not 50.0 < float(self.percentile) <= 100.0:
            raise ModelInputError(f"calibration percentile must be in (50, 100], got {self.percentile}")
        if isinstance(self.keep_float, str):
            object.__setattr__(self, "keep_float", (self.keep_float,))
        object.__setattr__(self, "keep_float", tuple(self.keep_float))


def _check_keep_float(g: Graph, keep: tuple[str, ...]) -> None:
    bad = [k for k in keep if k not in g.tensors and k not in KEEP_FLOAT_OPS]
    if bad:
        acts = [t for t in g.tensors if t not in g.constants]
        raise ModelInputError(f"keep_float names {bad}, which are neither tensors of the graph nor op types; allowed: "
                              f"the op types {', '.join(KEEP_FLOAT_OPS)} or activation tensor names (e.g. "
                              f"{', '.join(repr(t) for t in acts[:8])}{', ...' if len(acts) > 8 else ''})")


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


def _gelu_mul(prod, n: Node) -> bool:
    """The ``x * (1 + erf(x / sqrt 2))`` Mul of an erf GELU: the GELU is quantized as a whole (``QGelu``),
    not as a ``QMul`` of two int8 factors."""
    for i in n.inputs if n.op == "Mul" else ():
        add = prod.get(i)
        if add is not None and add.op == "Add" and any(prod.get(j) is not None and prod[j].op == "Erf"
                                                       for j in add.inputs):
            return True
    return False


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


def entropy_threshold(absvals: np.ndarray, bins: int = 2048, levels: int = 128) -> float:
    """The clip threshold of |x| minimizing KL(P || Q): P the histogram clipped at the threshold (outliers
    added to its last bin), Q the histogram below the threshold (outliers not added) merged into ``levels``
    bins and spread back over P's non-empty bins, smoothed where it is empty (TensorRT's entropy calibration)."""
    amax = float(absvals.max()) if absvals.size else 0.0
    if amax == 0.0:
        return 0.0
    hist, edges = np.histogram(absvals, bins=bins, range=(0.0, amax))
    hist = hist.astype(np.float64)
    best, best_kl = bins, np.inf
    for i in range(levels, bins + 1, 16):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        nz = p > 0
        starts = np.linspace(0, i, levels + 1).astype(np.int64)[:-1]
        sums = np.add.reduceat(hist[:i], starts)  # each merged bin's mass, spread over its non-empty bins
        cnts = np.add.reduceat(nz.astype(np.float64), starts)
        per = np.divide(sums, cnts, out=np.zeros(levels), where=cnts > 0)
        q = np.where(nz, np.repeat(per, np.diff(np.append(starts, i))), 0.0)
        if q.sum() <= 0:
            continue
        ps, qs = p[nz] / p.sum(), q[nz] / q.sum()
        qs = np.maximum(qs, 1e-4 / nz.sum())  # smoothed: P's clipped-outlier bin may be empty in Q
        kl = float(np.sum(ps * np.log(ps / qs)))
        if kl < best_kl:
            best, best_kl = i, kl
    return float(edges[best])


def calibrate_ranges(g: Graph, tensors: Iterable[str], batches: list[dict[str, np.ndarray]], method: str = "max",
                     percentile: float = 99.99) -> dict[str, float]:
    """The int8 range of each named tensor over the calibration batches (see :class:`Calibration`)."""
    tensors = list(tensors)
    amax = {t: 0.0 for t in tensors}
    seen: dict[str, list[np.ndarray]] = {t: [] for t in tensors}
    for feed in batches:
        vals = evaluate_graph(g, {k: np.asarray(v, np.float32) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
                                  for k, v in feed.items()}, keep_all=True)  # token ids stay integers
        for t in tensors:
            amax[t] = max(amax[t], float(np.abs(vals[t]).max()))
            if method != "max":
                seen[t].append(np.abs(np.asarray(vals[t], np.float32)).ravel())
    if method == "percentile":
        return {t: float(np.percentile(np.concatenate(seen[t]), percentile)) or amax[t] for t in tensors}
    if method == "entropy":
        return {t: entropy_threshold(np.concatenate(seen[t])) or amax[t] for t in tensors}
    return amax


INT_FORM_TOLERANCE = 0.05  # relative L2 error of an integer Softmax/LayerNorm's output beyond which it stays float


def int_form_errors(g: Graph, nodes: list[Node], amax: dict[str, float], batches) -> dict[Node, float]:
    """Relative L2 error ``|y_int - y| / |y|`` of each Softmax/LayerNormalization's integer form (int8 input and
    output at the calibrated scales, :mod:`jit_runtime.host_ops.int_transformer`) against float32 on the
    calibration batches. A masked attention's Softmax input (-1e4 or the float minimum on padding) leaves no int8
    steps for the real scores: its error is large, and the PTQ keeps it in float."""
    from jit_runtime.host_ops.int_transformer import choose_qlayernorm, choose_qsoftmax, qlayernorm, qsoftmax

    def scale(t: str, default: float) -> float:
        return amax[t] / 127.0 if amax.get(t, 0.0) > 0 else default

    num = {n: 0.0 for n in nodes}
    den = {n: 0.0 for n in nodes}
    for feed in batches if nodes else ():
        vals = evaluate_graph(g, {k: np.asarray(v, np.float32) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
                                  for k, v in feed.items()}, keep_all=True)
        for n in nodes:
            x, y = np.asarray(vals[n.inputs[0]], np.float64), np.asarray(vals[n.outputs[0]], np.float64)
            sx, sy = scale(n.inputs[0], 1.0), scale(n.outputs[0], 1.0 / 127.0)
            q = np.clip(np.rint(x / sx), -128, 127).astype(np.int8)
            if n.op == "Softmax":
                yi = qsoftmax(q, choose_qsoftmax(sx, sy, 0, int(n.attrs.get("axis", -1)) % x.ndim - x.ndim))
            elif int(n.attrs.get("axis", -1)) % x.ndim == x.ndim - 1:
                gamma = np.broadcast_to(np.asarray(g.constants[n.inputs[1]], np.float64).ravel(), (x.shape[-1],))
                beta = g.constants[n.inputs[2]] if len(n.inputs) > 2 and n.inputs[2] else None
                yi = qlayernorm(q, choose_qlayernorm(sx, 0, gamma, beta, float(n.attrs.get("epsilon", 1e-5)), sy, 0))
            else:
                continue  # not lowered to QLayerNorm: nothing to check
            num[n] += float(np.sum((yi * sy - y) ** 2))
            den[n] += float(np.sum(y ** 2))
    return {n: float(np.sqrt(num[n] / den[n])) if den[n] > 0 else 0.0 for n in nodes}


def insert_qdq(g: Graph, calibration) -> int:
    """Insert symmetric int8 Q/DQ pairs around quantizable ops; returns how many ops were covered.
    ``calibration``: the data (see :func:`calibration_batches`) or a :class:`Calibration` with options."""
    opts = calibration if isinstance(calibration, Calibration) else Calibration(calibration)
    _check_keep_float(g, opts.keep_float)
    keep_ops = set(opts.keep_float) & set(KEEP_FLOAT_OPS)
    for n in g.nodes:  # the integer forms' lowering skips these (the GELU is matched at its Erf)
        if n.op in keep_ops or (n.op == "Erf" and "Gelu" in keep_ops):
            n.attrs["keep_float"] = True
    cons = g.consumers()
    targets = [n for n in g.nodes if _quantizable(g, n)]
    if not targets:
        return 0
    prod = g.producers()
    adds = [n for n in g.nodes if (_residual_add(g, n) and not _gelu_mul(prod, n)) or
            (n.op in INT_NONLINEAR_OPS and n.op not in keep_ops and n.outputs[0] not in g.outputs
             and all(not i or i in g.constants for i in n.inputs[1:]))]  # a model's output keeps float precision

    def inputs_to_quantize() -> set[str]:
        ins = {n.inputs[0] for n in targets} | {i for n in adds for i in n.inputs[:1 if n.op in UNARY_INT_OPS
                                                                                or n.op in INT_NONLINEAR_OPS else 2]}
        return (ins | {n.inputs[1] for n in targets if _act_matmul(g, n)}) - set(opts.keep_float)

    act_in = inputs_to_quantize()
    act_out = {_output_tensor(g, n, cons) for n in targets + adds} - set(opts.keep_float)
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
    batches = calibration_batches(g, opts.data)
    amax = calibrate_ranges(g, act_in | act_out, batches, opts.method, opts.percentile)
    # Softmax/LayerNorm whose integer form would lose accuracy on the calibration data stay float (mixed precision)
    for n, err in int_form_errors(g, [n for n in adds if n.op in INT_NONLINEAR_OPS], amax, batches).items():
        if err > INT_FORM_TOLERANCE:
            n.attrs["keep_float"] = True
            n.attrs["keep_float_reason"] = f"int8 form's relative error {err:.3g} > {INT_FORM_TOLERANCE} on calibration data"
            adds.remove(n)
    act_in = inputs_to_quantize()
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
        if n in targets and n.inputs[0] not in dq_of.values() and n.inputs[0] in act_in:
            n.inputs[0] = qdq(n.inputs[0])
        if n in targets and _act_matmul(g, n) and n.inputs[1] not in dq_of.values() and n.inputs[1] in act_in:
            n.inputs[1] = qdq(n.inputs[1])
        if n in adds:
            k = 1 if n.op in UNARY_INT_OPS or n.op in ("GlobalAveragePool", "AveragePool", *INT_NONLINEAR_OPS) else 2
            n.inputs = [i if j >= k or i in dq_of.values() or i not in act_in else qdq(i) for j, i in enumerate(n.inputs)]
        new_nodes.append(n)
        for o in n.outputs:
            if o in act_out:
                dq = qdq(o)
                for c in cons.get(o, []):
                    c.inputs = [dq if i == o else i for i in c.inputs]
    g.nodes = new_nodes
    g.toposort()
    return len(targets)
