"""Shapes first: fold what the input shapes decide to constants before the operator check.

Exporters compute reshape targets, anchor grids, position ids and attention masks at run time from
``Shape`` of an activation (``Shape -> Gather -> Concat -> Reshape``, ``Shape -> Range -> Expand``,
``ConstantOfShape``...). Once the input shapes are fixed (from the model or ``input_shapes``) all of
that is a constant. :func:`fold_shape_subgraphs` evaluates it on the ONNX model itself (onnx's
reference evaluator, one node at a time) before :func:`compiler.frontend.support.check_supported`
and before shape inference, so an operator that only computes constants is never refused and every
later step sees static shapes. Nodes that read a run-time value stay as they are.
"""
from __future__ import annotations

import warnings

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from compiler.frontend.validate import default_opset

#: Operators never folded: quantized weights stay DequantizeLinear(int8 constant) for the QDQ lowering,
#: random draws stay random, and control flow keeps its subgraphs.
NO_FOLD = frozenset({"DequantizeLinear", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                     "Bernoulli", "Multinomial", "If", "Loop", "Scan", "SequenceConstruct", "Optional"})
#: A folded value larger than this (elements) stays a node: folding is for shapes, grids and masks.
MAX_FOLD_ELEMENTS = 1 << 22
_MAX_ROUNDS = 16
_DEFAULT_DOMAINS = ("", "ai.onnx")


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, for every tensor whose every dimension shape inference can tell."""
    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # an invalid model: the validator reports it; fold only what is known without inference
        inferred = model
    out: dict[str, tuple[int, ...]] = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape") and all(d.HasField("dim_value")
                                                                              for d in tt.shape.dim):
            out[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    return out


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    for a in node.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
    try:
        from onnx.reference import ReferenceEvaluator

        return np.asarray(ReferenceEvaluator(node).run(None, {})[0])
    except Exception:  # sparse or malformed values: left to the importer, which names the problem
        return None


def _evaluate(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    feeds = {name: v for name, v in zip(node.input, inputs) if name}
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    except Exception:  # the node's own problem (bad attribute, bad shape): the validator names it later
        return None
    outs = [np.asarray(o) for o in outs]
    if any(o.dtype == object or o.size > MAX_FOLD_ELEMENTS for o in outs):
        return None
    return outs


def _shape_of(node: onnx.NodeProto, shape: tuple[int, ...]) -> list[np.ndarray] | None:
    if node.op_type == "Size":
        return [np.asarray(int(np.prod(shape, dtype=np.int64)), np.int64)]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if set(attrs) - {"start", "end"} or not all(isinstance(v, int) for v in attrs.values()):
        return None  # a malformed Shape: the validator names it
    dims = np.asarray(shape, np.int64)
    return [dims[attrs.get("start", 0): attrs.get("end", None)]]


def _fold_round(model: onnx.ModelProto, consts: dict[str, np.ndarray], opset: int) -> bool:
    shapes = _static_shapes(model)
    graph_outputs = {o.name for o in model.graph.output}
    kept: list[onnx.NodeProto] = []
    changed = False
    for node in model.graph.node:
        if node.domain not in _DEFAULT_DOMAINS or node.op_type in NO_FOLD or any(a.type in (
                onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            kept.append(node)
            continue
        outs: list[np.ndarray] | None = None
        if node.op_type == "Constant":  # already a constant: recorded so that its readers fold
            v = _constant_value(node)
            if v is not None and len(node.output) == 1:
                consts[node.output[0]] = v
            kept.append(node)
            continue
        if node.op_type in ("Shape", "Size") and len(node.input) == 1 and node.input[0] in shapes:
            outs = _shape_of(node, shapes[node.input[0]])
        elif [i for i in node.input if i] and all(i in consts for i in node.input if i):
            outs = _evaluate(node, [consts.get(i) if i else None for i in node.input], opset)
        if outs is None or len(outs) != len([o for o in node.output]):
            kept.append(node)
            continue
        changed = True
        for name, v in zip(node.output, outs):
            if not name:
                continue
            consts[name] = v  # a Constant node (an initializer would have to be a graph input before IR 4)
            kept.append(onnx.helper.make_node("Constant", [], [name], name=f"{node.name or name}/folded",
                                              value=numpy_helper.from_array(v, name)))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return changed


def fold_shape_subgraphs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` (its input shapes already fixed) in which every node computed from constants and
    from static shapes alone is replaced by its value (a ``Constant`` node).
    A model that cannot be read this far is returned unchanged for the validator to report on."""
    opset = default_opset(model)
    if opset is None:
        return model
    out = onnx.ModelProto.FromString(model.SerializeToString())
    try:
        consts = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    except Exception:  # unreadable initializers: the validator names them
        return model
    consts_before = set(consts)
    read_before = {i for n in out.graph.node for i in n.input}
    try:
        for _ in range(_MAX_ROUNDS):
            if not _fold_round(out, consts, opset):
                break
    except Exception:  # a malformed node (undefined constant types, odd attributes): the validator names it
        return model
    read = {i for n in out.graph.node for i in n.input} | {o.name for o in out.graph.output}
    nodes = [n for n in out.graph.node if n.op_type != "Constant" or any(o in read for o in n.output)]
    if len(nodes) != len(out.graph.node):  # Constant nodes only folded nodes read
        del out.graph.node[:]
        out.graph.node.extend(nodes)
    read |= {i.name for i in out.graph.input}
    # initializers only the folded nodes read (and folded values no node reads) are dropped
    dropped = {t.name for t in out.graph.initializer if t.name not in read and (t.name in read_before or
                                                                                t.name not in consts_before)}
    if dropped:
        kept = [t for t in out.graph.initializer if t.name not in dropped]
        del out.graph.initializer[:]
        out.graph.initializer.extend(kept)
    inits = {t.name for t in out.graph.initializer}
    vis = [vi for vi in out.graph.value_info if vi.name not in inits]  # stale: inference recomputes it
    if len(vis) != len(out.graph.value_info):
        del out.graph.value_info[:]
        out.graph.value_info.extend(vis)
    return out
