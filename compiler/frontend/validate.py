"""Model validation at the door: every problem of an ONNX model found before any compilation work.

Three steps, each collecting all the problems it can before raising one :class:`ModelError`:

1. :func:`check_structure` on the model as loaded: supported opset, graph inputs with numeric
   tensor types, readable and finite initializers, every node input produced earlier (or a
   graph input / initializer), no tensor produced twice, every graph output produced; then
   ``onnx.checker`` (operator schemas: attribute types, input counts).
2. :func:`convert_opset`: the ONNX version converter, its failures reported as ``ModelError``.
3. :func:`validate_model` on the converted model with fixed input shapes: strict shape
   inference with type checks, then the per-operator rules of :mod:`compiler.frontend.op_rules`
   (required attributes, ranges, shapes of initializers against their operators).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference, version_converter

from compiler.frontend.errors import ModelError
from compiler.frontend import op_rules_modern  # noqa: F401  (registers the newer operators' rules)
from compiler.frontend.op_rules import RULES, NodeView, decode_attrs

#: Opsets of the default domain the frontend accepts (older ones are converted up, see onnx_import).
MIN_OPSET = 7
MAX_OPSET = onnx.defs.onnx_opset_version()
_DEFAULT_DOMAINS = ("", "ai.onnx")
_FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                          onnx.TensorProto.BFLOAT16})
_MAX_CHECKER_LINES = 3


def _label(node: onnx.NodeProto, i: int) -> str:
    return f"node {node.name or f'#{i}'!r} ({node.op_type})"


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's opset of the default ONNX domain, or None if it imports none."""
    for o in model.opset_import:
        if o.domain in _DEFAULT_DOMAINS:
            return int(o.version)
    return None


def _short(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return " ".join(lines[:_MAX_CHECKER_LINES]) or type(exc).__name__


def _initializer_problems(graph: onnx.GraphProto) -> tuple[list[str], set[str]]:
    problems, names = [], set()
    for t in graph.initializer:
        if t.name in names:
            problems.append(f"initializer {t.name!r} is defined twice")
        names.add(t.name)
        if any(d < 0 for d in t.dims):
            problems.append(f"initializer {t.name!r} has negative dimensions {list(t.dims)}")
            continue
        try:
            a = numpy_helper.to_array(t)
        except Exception as exc:  # wrong raw_data size, unknown data_type: many exception types
            problems.append(f"initializer {t.name!r} (dims {list(t.dims)}, data_type {t.data_type}) cannot be read: "
                            f"{_short(exc)}")
            continue
        if t.data_type in _FLOAT_TYPES and a.size and not np.all(np.isfinite(a.astype(np.float64))):
            problems.append(f"initializer {t.name!r} holds {int(np.sum(~np.isfinite(a.astype(np.float64))))} NaN/Inf "
                            f"value(s); weights must be finite")
    return problems, names


def _with_output_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose shape-less graph outputs (allowed by runtimes, not by the checker) carry inferred shapes,
    or an unknown-rank placeholder where inference cannot tell (a shape computed at run time, or a node whose
    error the later checks name): the checker then judges the nodes, not the missing output shapes."""
    missing = [vi.name for vi in model.graph.output if not vi.type.tensor_type.HasField("shape")]
    if not missing:
        return model
    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True)
        found = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)
                 if vi.type.tensor_type.HasField("shape")}
    except Exception:  # the node checks report what is wrong
        found = {}
    probe = onnx.ModelProto.FromString(model.SerializeToString())
    for vi in probe.graph.output:
        if vi.type.tensor_type.HasField("shape"):
            continue
        if vi.name in found:
            vi.type.CopyFrom(found[vi.name].type)
        else:
            vi.type.tensor_type.shape.SetInParent()
    return probe


def check_structure(model: onnx.ModelProto, origin: str = "model") -> None:
    """Graph-level checks of a model as loaded; raises :class:`ModelError` listing every problem."""
    problems: list[str] = []
    opset = default_opset(model)
    if opset is not None and not MIN_OPSET <= opset <= MAX_OPSET:
        problems.append(f"opset {opset} of the default ONNX domain is not supported; allowed: {MIN_OPSET}..{MAX_OPSET}")
    graph = model.graph
    init_problems, defined = _initializer_problems(graph)
    problems += init_problems
    for vi in graph.input:
        if vi.name in defined:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or tt.elem_type == 0:
            problems.append(f"graph input {vi.name!r} has no tensor element type; allowed: a numeric tensor")
        elif tt.elem_type not in onnx.TensorProto.DataType.values():
            problems.append(f"graph input {vi.name!r} has element type {tt.elem_type}, not an ONNX tensor type")
        defined.add(vi.name)
    if not graph.node:
        problems.append("the graph has no nodes")
    for i, node in enumerate(graph.node):
        for k, name in enumerate(node.input):
            if name and name not in defined:
                problems.append(f"{_label(node, i)}: input {k} {name!r} is not a graph input, an initializer or the "
                                f"output of an earlier node")
        for name in node.output:
            if name and name in defined:
                problems.append(f"{_label(node, i)}: output {name!r} is already defined (each tensor has one producer)")
            defined.add(name)
    for vi in graph.output:
        if vi.name not in defined:
            problems.append(f"graph output {vi.name!r} is not produced by any node, input or initializer")
    if not problems:
        try:
            onnx.checker.check_model(_with_output_shapes(model))
        except Exception as exc:  # ValidationError, or protobuf/type errors from odd fields
            problems.append(f"onnx.checker: {_short(exc)}")
    if problems:
        raise ModelError(problems, origin)


def convert_opset(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """``model`` converted to opset ``target`` of the default domain (unchanged when already there or newer)."""
    opset = default_opset(model)
    if opset is None or opset >= target:
        return model
    try:
        return version_converter.convert_version(model, target)
    except Exception as exc:  # the converter raises RuntimeError, ValidationError, IndexError...
        raise ModelError([f"converting opset {opset} to {target} failed: {_short(exc)}"]) from None


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...]]:
    out: dict[str, tuple[int | None, ...]] = {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    for t in g.initializer:
        out[t.name] = tuple(int(d) for d in t.dims)
    return out


def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    consts[node.output[0]] = numpy_helper.to_array(a.t)
    return consts


def node_views(model: onnx.ModelProto) -> list[NodeView]:
    """A :class:`NodeView` per node of a shape-inferred model."""
    shapes, consts = _shapes(model), _constants(model)
    views = []
    for i, node in enumerate(model.graph.node):
        ins = list(node.input)
        views.append(NodeView(node, _label(node, i), decode_attrs(node),
                              [shapes.get(n) if n else None for n in ins],
                              [consts.get(n) if n else None for n in ins]))
    return views


def validate_model(model: onnx.ModelProto, origin: str = "model") -> onnx.ModelProto:
    """Strict shape inference and per-operator rules; returns the shape-inferred model.

    Raises :class:`ModelError` listing the inference failure (if any) and every rule violation.
    """
    problems: list[str] = []
    try:
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:  # InferenceError, or a ValidationError from type checks
        problems.append(f"shape inference: {_short(exc)}")
        try:
            inferred = shape_inference.infer_shapes(model, data_prop=True)
        except Exception:
            inferred = model
    for view in node_views(inferred):
        check = RULES.get(view.node.op_type)
        if check is not None and view.node.domain in _DEFAULT_DOMAINS:
            problems.extend(check(view))
    if problems:
        raise ModelError(problems, origin)
    return inferred
