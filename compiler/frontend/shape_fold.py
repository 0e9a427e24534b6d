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


#: Initializers up to this many elements take part in folding (shape tensors, scalars, small tables); larger
#: ones (weights) are left out of the working copy, so shape inference and copying stay cheap on big models.
SMALL_CONSTANT = 1 << 16


def _skeleton(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A light copy for folding: small initializers kept (and returned as arrays), large ones become typed
    graph inputs (their shapes still known to inference, their data never copied)."""
    g = model.graph
    sk = onnx.ModelProto()
    sk.ir_version = model.ir_version
    sk.opset_import.extend(model.opset_import)
    sg = sk.graph
    sg.name = g.name
    sg.node.extend(g.node)
    sg.input.extend(g.input)
    sg.output.extend(g.output)
    sg.value_info.extend(g.value_info)
    inputs = {i.name for i in g.input}
    consts = {}
    for t in g.initializer:
        if int(np.prod(t.dims, dtype=np.int64)) <= SMALL_CONSTANT:
            sg.initializer.append(t)
            consts[t.name] = numpy_helper.to_array(t)
        elif t.name not in inputs:
            sg.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return sk, consts


def fold_shape_subgraphs(model: onnx.ModelProto, fix_inputs=None) -> onnx.ModelProto:
    """``model`` with every node computed from (small) constants and static shapes alone replaced by its value
    (a ``Constant`` node); the model itself when nothing folds. ``fix_inputs(proto)`` fixes the input shapes
    of the working copy (symbolic dims, ``input_shapes``) and may raise to leave the model unchanged. A model
    that cannot be read this far is returned unchanged for the validator to report on."""
    opset = default_opset(model)
    if opset is None:
        return model
    try:
        work, consts = _skeleton(model)
        if fix_inputs is not None:
            fix_inputs(work)
    except Exception:  # unreadable initializers or inputs: the validator (or the input check) names them
        return model
    folded_any = False
    try:
        for _ in range(_MAX_ROUNDS):
            if not _fold_round(work, consts, opset):
                break
            folded_any = True
    except Exception:  # a malformed node (undefined constant types, odd attributes): the validator names it
        return model
    if not folded_any:
        return model
    read = {i for n in work.graph.node for i in n.input} | {o.name for o in model.graph.output}
    nodes = [n for n in work.graph.node if n.op_type != "Constant" or any(o in read for o in n.output)]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    read |= {i for n in nodes for i in n.input} | {i.name for i in model.graph.input}
    read_before = {i for n in model.graph.node for i in n.input}
    # initializers only the folded nodes read are dropped; stale value_info of folded tensors too
    kept = [t for t in out.graph.initializer if t.name in read or t.name not in read_before]
    if len(kept) != len(out.graph.initializer):
        del out.graph.initializer[:]
        out.graph.initializer.extend(kept)
    produced = {o for n in nodes if n.op_type == "Constant" for o in n.output}
    vis = [vi for vi in out.graph.value_info if vi.name not in produced]
    if len(vis) != len(out.graph.value_info):
        del out.graph.value_info[:]
        out.graph.value_info.extend(vis)
    return out
