"""ONNX -> graph IR: version conversion, input shape fixing, shape inference, op lowering."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.frontend.errors import ModelInputError, UnsupportedOperatorError
from compiler.frontend.expand import (expand_attention, expand_group_norm, expand_qlinear, expand_reduce_mean,
                                      expand_rotary, expand_sum, explicit_pads, global_max_as_window, split_gemm_bias)
from compiler.frontend.pattern_fuse import fuse_decomposed_layernorm
from compiler.frontend.shape_fold import fold_shape_subgraphs
from compiler.frontend.support import OP_SPECS, SUPPORTED_OPS, attr_value, check_supported
from compiler.frontend.validate import check_structure, convert_opset, validate_model
from compiler.graph.ir import Graph, Node, TensorInfo

TARGET_OPSET = 13


def load_model(model: str | Path | onnx.ModelProto) -> onnx.ModelProto:
    """Load a model from a path or pass a ModelProto through, with clear errors."""
    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, (str, Path)):
        raise TypeError(f"model must be a path or onnx.ModelProto, got {type(model).__name__}")
    p = Path(model)
    if not p.is_file():
        raise FileNotFoundError(f"ONNX model file not found: {p}")
    try:
        return onnx.load(str(p))
    except Exception as exc:  # protobuf decode errors have many types
        raise ValueError(f"{p} is not a readable ONNX model: {exc}") from exc


def _fix_input_shapes(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]] | None) -> None:
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    names = [i.name for i in inputs]
    for k in (input_shapes or {}):
        if k not in names:
            raise ModelInputError(f"input_shapes names unknown input {k!r}; model inputs are {names}")
    for vi in inputs:
        dims = vi.type.tensor_type.shape.dim
        given = (input_shapes or {}).get(vi.name)
        if given is not None:
            if len(given) != len(dims):
                raise ModelInputError(f"input {vi.name!r} has rank {len(dims)}, input_shapes gives {tuple(given)}")
            for d, v in zip(dims, given):
                if d.HasField("dim_value") and d.dim_value != v:
                    raise ModelInputError(f"input {vi.name!r} dim is fixed to {d.dim_value} in the model, got {v}")
                d.Clear()
                d.dim_value = int(v)
        for d in dims:
            if not d.HasField("dim_value"):
                d.Clear()
                d.dim_value = 1  # symbolic dims (usually batch) default to 1; fixed 0-size dims stay 0


def _tensor_info(vi: onnx.ValueInfoProto) -> TensorInfo | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape") or tt.elem_type == 0:
        return None
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
    if any(d < 0 for d in dims):
        return None
    return TensorInfo(tuple(dims), onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))


def _ranks(proto: onnx.ModelProto) -> dict[str, int]:
    g = proto.graph
    out = {t.name: len(t.dims) for t in g.initializer}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.tensor_type.HasField("shape"):
            out[vi.name] = len(vi.type.tensor_type.shape.dim)
    return out


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: attr_value(a) for a in node.attribute}


def fold_with_input_shapes(model: onnx.ModelProto, input_shapes=None) -> onnx.ModelProto:
    """``model`` with its shape subgraphs folded to constants for the given input shapes
    (:mod:`compiler.frontend.shape_fold`; the inputs themselves are fixed later, by the import); unchanged
    when nothing folds or its inputs or ``input_shapes`` are at fault (the import reports that after the
    operator check)."""
    return fold_shape_subgraphs(model, lambda work: _fix_input_shapes(work, input_shapes))


def check_model_support(model: onnx.ModelProto, input_shapes=None) -> onnx.ModelProto:
    """Shapes first, then support: fold what the input shapes decide, then refuse what is left unsupported
    (:class:`UnsupportedOperatorError`). Returns the folded model."""
    folded = fold_with_input_shapes(model, input_shapes)
    check_supported(folded)
    return folded


def prepare_model(model: str | Path | onnx.ModelProto, input_shapes=None, *, checked: bool = False) -> onnx.ModelProto:
    """Load, fold shape subgraphs, check operator support, validate, convert to opset 13+, fix inputs,
    infer shapes. ``checked``: ``model`` is what :func:`check_model_support` returned (folded and checked
    already, as ``build`` does first), so those two steps are not repeated."""
    proto = load_model(model) if checked else check_model_support(load_model(model), input_shapes)
    check_structure(proto)
    proto = convert_opset(onnx.ModelProto.FromString(proto.SerializeToString()), TARGET_OPSET)
    _fix_input_shapes(proto, input_shapes)
    return validate_model(proto)


def onnx_to_graph(model: str | Path | onnx.ModelProto, input_shapes: dict | None = None, *,
                  checked: bool = False) -> Graph:
    """Import an ONNX model into the graph IR (QLinear ops expanded to DQ -> op -> Q); ``checked`` as in
    :func:`prepare_model`."""
    proto = prepare_model(model, input_shapes, checked=checked)
    fuse_decomposed_layernorm(proto, _ranks(proto))
    g = Graph(proto.graph.name or "model")
    for t in proto.graph.initializer:
        g.add_constant(t.name, numpy_helper.to_array(t))
    for vi in list(proto.graph.input) + list(proto.graph.value_info) + list(proto.graph.output):
        info = _tensor_info(vi)
        if info is not None and vi.name not in g.constants:
            g.tensors[vi.name] = info
    g.inputs = [i.name for i in proto.graph.input if i.name not in g.constants]
    g.outputs = [o.name for o in proto.graph.output]
    for i, n in enumerate(proto.graph.node):
        attrs = _attrs(n)
        name = n.name or f"{n.op_type}_{i}"
        if n.op_type == "Constant":
            g.add_constant(n.output[0], _constant_value(attrs))
            continue
        node = Node(n.op_type, list(n.input), list(n.output), attrs, name)
        if n.op_type in ("QLinearConv", "QLinearMatMul"):
            g.nodes.extend(expand_qlinear(g, node))
        elif n.op_type == "Gemm":
            g.nodes.extend(split_gemm_bias(g, node))
        elif n.op_type == "ReduceMean":
            g.nodes.extend(expand_reduce_mean(g, node))
        elif n.op_type == "Sum":
            g.nodes.extend(expand_sum(g, node))
        elif n.op_type in ("InstanceNormalization", "GroupNormalization"):
            g.nodes.extend(expand_group_norm(g, node))
        elif n.op_type == "Attention":
            g.nodes.extend(expand_attention(g, node))
        elif n.op_type == "RotaryEmbedding":
            g.nodes.extend(expand_rotary(g, node))
        elif n.op_type == "GlobalMaxPool":
            require_static_shape(g, node.inputs[0], node)
            g.nodes.append(global_max_as_window(g, node))
        else:
            g.nodes.append(node)
    drop_unused_optional_outputs(g)
    for node in g.nodes:
        if node.op in ("Conv", "MaxPool", "AveragePool", "ConvInteger"):
            require_static_shape(g, node.inputs[0], node)
            check_spatial_rank(g, node)
            explicit_pads(g, node)
        elif node.op == "ConvTranspose":
            require_static_shape(g, node.inputs[0], node)
            check_spatial_rank(g, node)
    complete_tensor_infos(g)
    return g


# operators whose outputs after the first are optional: an unread one is dropped so it is never computed
OPTIONAL_OUTPUTS = frozenset({"Dropout", "MaxPool", "BatchNormalization", "LayerNormalization"})


def drop_unused_optional_outputs(g: Graph) -> None:
    """Blank (``""``) the optional outputs that no node reads and that are not graph outputs."""
    read = {i for n in g.nodes for i in n.inputs if i} | set(g.outputs)
    for n in g.nodes:
        if n.op in OPTIONAL_OUTPUTS:
            n.outputs = [n.outputs[0]] + [o if o in read else "" for o in n.outputs[1:]]


def require_static_shape(g: Graph, name: str, n: Node) -> None:
    """Window operators need the static shape of their input; one computed from run-time values is refused, named."""
    if name not in g.tensors and name not in g.constants:
        raise ModelInputError(
            f"the shape of tensor {name!r} (input of node {n.name!r} ({n.op})) cannot be known at compile time: it "
            f"depends on values computed at run time (e.g. a Reshape whose target shape is a graph input or is read "
            f"from data). Allowed: shapes that follow from the input shapes (fix symbolic ones with input_shapes=...)")


def check_spatial_rank(g: Graph, n: Node) -> None:
    """Window operators on inputs with a spatial rank the kernels do not implement are refused, named."""
    info = g.tensors.get(n.inputs[0])
    allowed = OP_SPECS[n.op].spatial
    if info is not None and allowed is not None and len(info.shape) - 2 not in allowed:
        raise UnsupportedOperatorError({f"{n.op}({len(info.shape) - 2}-D)": [n.name]}, sorted(SUPPORTED_OPS))


def _constant_value(attrs: dict) -> np.ndarray:
    for key in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if key in attrs:
            v = attrs[key]
            return np.asarray(v, dtype=np.float32 if "float" in key else (np.int64 if "int" in key else None))
    raise ValueError(f"Constant node has no supported value attribute (got {sorted(attrs)})")


def complete_tensor_infos(g: Graph) -> None:
    """Fill missing shapes/dtypes by evaluating the graph on zeros (rarely needed). A shape that moves when the
    graph runs again on ones, sevens or 64s depends on the inputs' values (a Pad, Slice or Range sized by an input
    tensor): such tensors are listed in ``g.value_shaped`` and get no slot in the memory plan (their values are
    kept as the kernels return them); targets that compile kernels for static shapes refuse them. A probe the graph
    cannot run (token ids past a vocabulary, a Reshape to 64s) tells nothing and is skipped."""
    missing = [o for n in g.nodes for o in n.outputs if o and o not in g.tensors]
    if not missing:
        return
    from compiler.graph.evaluate import evaluate_graph

    def run(v: int) -> dict:
        return evaluate_graph(g, {i: np.full(g.tensors[i].shape, v, g.tensors[i].dtype) for i in g.inputs},
                              keep_all=True)
    values = run(0)
    for probe in (1, 7, 64):  # small enough that a ConstantOfShape or Range sized by it stays small
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                again = run(probe)
        except Exception:  # noqa: BLE001 - any kernel may refuse these values; the probe then says nothing
            continue
        g.value_shaped |= {name for name in missing if np.shape(values[name]) != np.shape(again[name])}
    for name in missing:
        v = values[name]
        g.tensors[name] = TensorInfo(v.shape, v.dtype)
