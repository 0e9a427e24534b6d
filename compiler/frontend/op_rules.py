"""Per-operator rules checked at import: required attributes, their ranges, input counts and shapes.

Each rule takes a :class:`NodeView` and yields problem strings that name the node, the
operator, the attribute or input, and what is allowed. Rules cover what the compiler's
kernels and passes rely on beyond the ONNX schema (which ``onnx.checker`` enforces);
operators without a rule here get only the schema and shape-inference checks. The list
of accepted operators itself lives in :mod:`compiler.frontend.support`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import onnx

from compiler.frontend.support import attr_value

Shape = tuple[int | None, ...]


@dataclass
class NodeView:
    """One node with its attributes decoded and what is known about its inputs (shapes, constants)."""

    node: onnx.NodeProto
    label: str  # "node 'conv1' (Conv)"
    attrs: dict
    shapes: list[Shape | None]  # per input; None when unknown or the input is absent
    consts: list[np.ndarray | None]  # per input; the value when it is an initializer/Constant

    def has_input(self, i: int) -> bool:
        return len(self.node.input) > i and bool(self.node.input[i])

    def rank(self, i: int) -> int | None:
        s = self.shapes[i] if i < len(self.shapes) else None
        return None if s is None else len(s)

    def dim(self, i: int, d: int) -> int | None:
        s = self.shapes[i] if i < len(self.shapes) else None
        if s is None or not -len(s) <= d < len(s):
            return None
        return s[d]

    def attr(self, key: str) -> str:
        return f"{self.label}: attribute {key!r} = {self.attrs.get(key)!r}"

    def inp(self, i: int) -> str:
        name = self.node.input[i] if i < len(self.node.input) else ""
        return f"{self.label}: input {i} ({name!r})"


Rule = Callable[[NodeView], Iterator[str]]
RULES: dict[str, Rule] = {}


def rule(*ops: str):
    def deco(fn: Rule) -> Rule:
        for op in ops:
            RULES[op] = fn
        return fn
    return deco


# ---------------------------------------------------------------------------------- helpers
def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _ints(v: NodeView, key: str, n: int | None, lo: int, what: str) -> Iterator[str]:
    """Attribute ``key`` (if present) is a list of ``n`` integers >= ``lo``."""
    val = v.attrs.get(key)
    if val is None:
        return
    if not isinstance(val, list) or not all(_is_int(x) for x in val):
        yield f"{v.attr(key)}: must be a list of integers ({what})"
    elif n is not None and len(val) != n:
        yield f"{v.attr(key)}: must have {n} values ({what})"
    elif any(x < lo for x in val):
        yield f"{v.attr(key)}: every value must be >= {lo} ({what})"


def _choice(v: NodeView, key: str, allowed: tuple) -> Iterator[str]:
    if key in v.attrs and v.attrs[key] not in allowed:
        yield f"{v.attr(key)}: allowed values are {list(allowed)}"


def _finite(v: NodeView, key: str, lo: float | None = None) -> Iterator[str]:
    val = v.attrs.get(key)
    if val is None:
        return
    if not isinstance(val, (int, float)) or not math.isfinite(val):
        yield f"{v.attr(key)}: must be a finite number"
    elif lo is not None and val < lo:
        yield f"{v.attr(key)}: must be >= {lo}"


def _axis(v: NodeView, key: str, rank: int | None, default=None, extra: int = 0) -> Iterator[str]:
    """Attribute ``key`` is an axis of a rank-``rank`` tensor (``extra``: one more position allowed, as Flatten)."""
    val = v.attrs.get(key, default)
    if val is None or rank is None:
        return
    if not _is_int(val) or not -rank <= val < rank + extra:
        yield f"{v.attr(key)}: must be an integer axis in [{-rank}, {rank + extra - 1}] for a rank-{rank} input"


def _need_rank(v: NodeView, i: int, ranks: tuple[int, ...], what: str) -> Iterator[str]:
    r = v.rank(i)
    if r is not None and r not in ranks:
        yield f"{v.inp(i)} has shape {v.shapes[i]} (rank {r}); {v.node.op_type} needs rank {' or '.join(map(str, ranks))} ({what})"


def _window(v: NodeView, spatial: Shape, k: list[int]) -> Iterator[str]:
    """Output size of an N-D window op is at least 1 on every spatial axis."""
    if v.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return
    d = v.attrs.get("dilations", [1] * len(k))
    p = v.attrs.get("pads", [0] * (2 * len(k)))
    for a, size in enumerate(spatial):
        if size is None:
            continue
        span = (k[a] - 1) * d[a] + 1
        padded = size + (p[a] + p[a + len(k)] if v.attrs.get("auto_pad", "NOTSET") == "NOTSET" else 0)
        if padded < span:
            yield (f"{v.label}: the window {k} (dilations {d}) does not fit spatial axis {a} of size {size} "
                   f"with pads {p}: the output would be empty (need input + pads >= {span})")


def _window_attrs(v: NodeView, n: int | None) -> Iterator[str]:
    """Window attributes of an op with ``n`` spatial axes (``n`` None: lengths unchecked)."""
    per = f"{n}" if n is not None else "one per spatial axis:"
    yield from _ints(v, "kernel_shape", n, 1, f"{per} kernel sizes >= 1")
    yield from _ints(v, "strides", n, 1, f"{per} strides >= 1")
    yield from _ints(v, "dilations", n, 1, f"{per} dilations >= 1")
    yield from _ints(v, "pads", None if n is None else 2 * n, 0,
                     f"{2 * n if n is not None else 'two per spatial axis:'} pads >= 0: begins then ends")
    yield from _choice(v, "auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))


# ------------------------------------------------------------------------------------ rules
@rule("Conv")
def _conv(v: NodeView) -> Iterator[str]:
    x, w = v.shapes[0], (v.shapes[1] if len(v.shapes) > 1 else None)
    for i, s, what in ((0, x, "N, C, spatial..."), (1, w, "M, C/group, kernel...")):
        if s is not None and len(s) < 3:
            yield f"{v.inp(i)} has shape {s} (rank {len(s)}); Conv needs rank >= 3 ({what})"
            return
    if x is not None and w is not None and len(x) != len(w):
        yield (f"{v.label}: input {v.node.input[0]!r} {x} (rank {len(x)}) and weight {v.node.input[1]!r} {w} "
               f"(rank {len(w)}) must have the same rank")
        return
    n = len(w) - 2 if w is not None else (len(x) - 2 if x is not None else None)
    problems = list(_window_attrs(v, n))
    yield from problems
    g = v.attrs.get("group", 1)
    if not _is_int(g) or g < 1:
        yield f"{v.attr('group')}: must be an integer >= 1"
        return
    if w is not None:
        k = v.attrs.get("kernel_shape")
        if k is not None and not problems and list(k) != list(w[2:]):
            yield f"{v.attr('kernel_shape')}: must equal the weight's spatial shape {list(w[2:])} (weight shape {w})"
        if x is not None and None not in (x[1], w[1]) and x[1] != w[1] * g:
            yield (f"{v.label}: input channels {x[1]} (input {v.node.input[0]!r}, shape {x}) must equal weight "
                   f"channels {w[1]} x group {g} = {w[1] * g} (weight {v.node.input[1]!r}, shape {w})")
        if w[0] is not None and w[0] % g:
            yield f"{v.attr('group')}: must divide the {w[0]} output channels of weight {v.node.input[1]!r}"
        if v.has_input(2) and v.shapes[2] is not None and tuple(v.shapes[2]) != (w[0],):
            yield f"{v.inp(2)} (bias) has shape {v.shapes[2]}; it must be ({w[0]},), one value per output channel"
        if not problems and x is not None and None not in w[2:]:
            yield from _window(v, x[2:], list(k) if k is not None else list(w[2:]))


@rule("MaxPool", "AveragePool")
def _pool(v: NodeView) -> Iterator[str]:
    """Malformed pooling only: which ranks, attributes and outputs are implemented is ``support.OP_SPECS``'s."""
    x = v.shapes[0]
    if x is not None and len(x) < 3:
        yield f"{v.inp(0)} has shape {x} (rank {len(x)}); {v.node.op_type} needs rank >= 3 (N, C, spatial...)"
        return
    if "kernel_shape" not in v.attrs:
        yield f"{v.label}: required attribute 'kernel_shape' is missing (one kernel size >= 1 per spatial axis)"
        return
    k = v.attrs["kernel_shape"]
    n = len(x) - 2 if x is not None else (len(k) if isinstance(k, list) else None)
    problems = list(_window_attrs(v, n))
    yield from problems
    if not problems and x is not None:
        p = v.attrs.get("pads", [0] * (2 * n))
        if any(p[a] >= k[a % n] for a in range(2 * n)):
            yield f"{v.attr('pads')}: every pad must be smaller than the kernel {k}"
        yield from _window(v, x[2:], k)


@rule("GlobalAveragePool", "GlobalMaxPool")
def _gap(v: NodeView) -> Iterator[str]:
    yield from _need_rank(v, 0, (3, 4, 5), "N, C, spatial...")


@rule("Gemm")
def _gemm(v: NodeView) -> Iterator[str]:
    yield from _choice(v, "transA", (0, 1))
    yield from _choice(v, "transB", (0, 1))
    yield from _finite(v, "alpha")
    yield from _finite(v, "beta")
    yield from _need_rank(v, 0, (2,), "a matrix")
    yield from _need_rank(v, 1, (2,), "a matrix")
    a, b = v.shapes[0], v.shapes[1] if len(v.shapes) > 1 else None
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return
    ka = a[0] if v.attrs.get("transA", 0) else a[1]
    kb = b[1] if v.attrs.get("transB", 0) else b[0]
    if None not in (ka, kb) and ka != kb:
        yield (f"{v.label}: inner dimensions differ: input {v.node.input[0]!r} {a} (transA={v.attrs.get('transA', 0)}) "
               f"gives K={ka}, input {v.node.input[1]!r} {b} (transB={v.attrs.get('transB', 0)}) gives K={kb}")
    if v.has_input(2) and v.shapes[2] is not None:
        m = a[1] if v.attrs.get("transA", 0) else a[0]
        n = b[0] if v.attrs.get("transB", 0) else b[1]
        c, out = v.shapes[2], (m or 1, n or 1)
        try:
            fits = np.broadcast_shapes(tuple(1 if d is None else d for d in c), out) == out
        except ValueError:
            fits = False
        if not fits:
            yield f"{v.inp(2)} (C) has shape {c}; it must broadcast to the output shape ({m}, {n})"


@rule("Flatten")
def _flatten(v: NodeView) -> Iterator[str]:
    yield from _axis(v, "axis", v.rank(0), 1, extra=1)


@rule("Softmax", "LogSoftmax", "ArgMax", "ArgMin")
def _softmax(v: NodeView) -> Iterator[str]:
    yield from _axis(v, "axis", v.rank(0), -1)


@rule("Concat")
def _concat(v: NodeView) -> Iterator[str]:
    if "axis" not in v.attrs:
        yield f"{v.label}: required attribute 'axis' is missing"
        return
    yield from _axis(v, "axis", v.rank(0))


@rule("Gather")
def _gather(v: NodeView) -> Iterator[str]:
    yield from _axis(v, "axis", v.rank(0), 0)
    idx, x = (v.consts[1] if len(v.consts) > 1 else None), v.shapes[0]
    ax = v.attrs.get("axis", 0)
    if idx is not None and x is not None and _is_int(ax) and -len(x) <= ax < len(x) and x[ax] is not None:
        n = x[ax]
        if idx.size and (idx.min() < -n or idx.max() >= n):
            yield f"{v.inp(1)} (indices) holds values outside [{-n}, {n - 1}] for axis {ax} of size {n}"


@rule("Transpose")
def _transpose(v: NodeView) -> Iterator[str]:
    perm, r = v.attrs.get("perm"), v.rank(0)
    if perm is not None and r is not None and sorted(perm) != list(range(r)):
        yield f"{v.attr('perm')}: must be a permutation of 0..{r - 1} for a rank-{r} input"


@rule("LeakyRelu", "HardSigmoid", "HardSwish", "Dropout", "Relu", "Sigmoid", "Identity", "PRelu")
def _elementwise(v: NodeView) -> Iterator[str]:
    for key in ("alpha", "beta"):
        yield from _finite(v, key)


@rule("BatchNormalization")
def _bn(v: NodeView) -> Iterator[str]:
    yield from _finite(v, "epsilon", 0.0)
    yield from _need_rank(v, 0, (2, 3, 4), "N, C, ...")
    c = v.dim(0, 1)
    for i, what in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")):
        s = v.shapes[i] if i < len(v.shapes) else None
        if c is not None and s is not None and tuple(s) != (c,):
            yield f"{v.inp(i)} ({what}) has shape {s}; it must be ({c},), one value per channel"


@rule("QuantizeLinear", "DequantizeLinear")
def _qdq(v: NodeView) -> Iterator[str]:
    """Scale (and zero point) shapes: per tensor (one value, axis unused), per axis (1-D) or blocked
    (``block_size`` > 0: the input's rank, ceil(size / block_size) along ``axis``)."""
    x, ax = v.shapes[0], v.attrs.get("axis", 1)
    block = v.attrs.get("block_size", 0)
    scale_shape = v.shapes[1] if len(v.shapes) > 1 else None
    size = int(np.prod(scale_shape)) if scale_shape is not None and None not in scale_shape else None
    per_tensor = scale_shape is not None and (len(scale_shape) == 0 or size == 1) and not block
    if not _is_int(block) or block < 0:
        yield f"{v.attr('block_size')}: must be an integer >= 0 (0: per tensor / per axis)"
        return
    if not per_tensor:
        problems = list(_axis(v, "axis", v.rank(0), 1))
        yield from problems
        if problems:
            return
    n = x[ax] if x is not None and not per_tensor and -len(x) <= ax < len(x) else None
    if scale_shape is not None:
        if size == 0:
            yield f"{v.inp(1)} (scale) is empty; allowed: a scalar (per tensor), 1-D (per axis) or blocked"
        elif block:
            if x is not None and len(scale_shape) != len(x):
                yield (f"{v.inp(1)} (scale) has shape {scale_shape}; blocked quantization (block_size {block}) needs "
                       f"the input's rank {len(x)}")
            elif x is not None and None not in x and None not in scale_shape:
                a = ax % len(x)
                want = tuple(-(-d // block) if i == a else d for i, d in enumerate(x))
                if tuple(scale_shape) != want:
                    yield (f"{v.inp(1)} (scale) has shape {scale_shape}; blocks of {block} along axis {ax} of input "
                           f"{v.node.input[0]!r} {x} need {want}")
        elif len(scale_shape) > 1:
            yield (f"{v.inp(1)} (scale) has shape {scale_shape}; allowed: a scalar (per tensor) or 1-D (per axis), "
                   f"or the input's rank with attribute block_size (blocked)")
        elif len(scale_shape) == 1 and None not in (size, n) and size not in (1, n):
            yield (f"{v.inp(1)} (scale) has {size} values; per-axis scales need one per element of axis {ax} "
                   f"({n}) of input {v.node.input[0]!r} {x}")
        zp = v.shapes[2] if len(v.shapes) > 2 and v.has_input(2) else None
        if zp is not None and None not in zp and tuple(zp) != tuple(scale_shape) \
                and not (int(np.prod(zp)) == 1 and size == 1):
            yield f"{v.inp(2)} (zero point) has shape {zp}; it must match the scale's shape {scale_shape}"
    scale = v.consts[1] if len(v.consts) > 1 else None
    if scale is not None and scale.size:
        sc = scale.astype(np.float64) if scale.dtype.kind != "b" else None
        if sc is None or not np.all(np.isfinite(sc)) or np.any(sc <= 0):
            yield f"{v.inp(1)} (scale) must be finite and > 0, got values in [{scale.min()}, {scale.max()}]"


@rule("Reshape")
def _reshape(v: NodeView) -> Iterator[str]:
    shape, x = (v.consts[1] if len(v.consts) > 1 else None), v.shapes[0]
    if shape is None or x is None or None in x:
        return
    want = [int(d) for d in np.asarray(shape).reshape(-1)]
    allowzero = v.attrs.get("allowzero", 0)
    dims = [x[i] if d == 0 and not allowzero and i < len(x) else d for i, d in enumerate(want)]
    size = int(np.prod(x))
    if sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims):
        yield f"{v.inp(1)} (shape) = {want}: at most one -1, other values >= 0"
        return
    known = int(np.prod([d for d in dims if d != -1]))
    if (-1 in dims and (known == 0 or size % known)) or (-1 not in dims and known != size):
        yield f"{v.inp(1)} (shape) = {want} does not hold the {size} elements of input {v.node.input[0]!r} {x}"


@rule("Cast")
def _cast(v: NodeView) -> Iterator[str]:
    """``to`` is present and names an ONNX tensor type; which types are implemented is ``support.TENSOR_TYPES``'s."""
    to = v.attrs.get("to")
    if to is None:
        yield f"{v.label}: required attribute 'to' is missing"
    elif not _is_int(to) or to == onnx.TensorProto.UNDEFINED or to not in onnx.TensorProto.DataType.values():
        yield f"{v.attr('to')}: must be an ONNX TensorProto data type (e.g. {onnx.TensorProto.FLOAT} = FLOAT)"


@rule("Pad")
def _pad(v: NodeView) -> Iterator[str]:
    pads, r = (v.consts[1] if len(v.consts) > 1 else None), v.rank(0)
    if pads is None:
        pads = np.asarray(v.attrs["pads"]) if "pads" in v.attrs else None
    if v.has_input(3):  # opset 18's axes: pads then hold a begin and an end per listed axis
        axes = v.consts[3] if len(v.consts) > 3 else None
        if axes is None or r is None:
            return
        bad = [int(a) for a in np.ravel(axes) if not -r <= int(a) < r]
        if bad:
            yield f"{v.inp(3)} (axes) = {np.ravel(axes).tolist()}: out of range for a rank-{r} input"
        r = np.size(axes)
        if pads is not None and (pads.ndim != 1 or pads.size != 2 * r):
            yield f"{v.label}: pads has {pads.size} values; {r} axes need {2 * r} (begins then ends)"
        return
    if pads is not None and r is not None and (pads.ndim != 1 or pads.size != 2 * r):
        yield f"{v.label}: pads has {pads.size} values; a rank-{r} input needs {2 * r} (begins then ends)"


@rule("Clip")
def _clip(v: NodeView) -> Iterator[str]:
    lo = v.consts[1] if len(v.consts) > 1 else None
    hi = v.consts[2] if len(v.consts) > 2 else None
    for i, c in ((1, lo), (2, hi)):
        if c is not None and c.size != 1:
            yield f"{v.inp(i)} must be a scalar, got shape {c.shape}"
        elif c is None and i < len(v.shapes) and v.shapes[i] is not None and any(d != 1 for d in v.shapes[i]):
            yield f"{v.inp(i)} must be a scalar, got shape {tuple(v.shapes[i])}"
    if lo is not None and hi is not None and lo.size == 1 and hi.size == 1 and float(lo.ravel()[0]) > float(hi.ravel()[0]):
        yield f"{v.label}: min {lo.ravel()[0]} > max {hi.ravel()[0]}"


@rule("Constant")
def _constant(v: NodeView) -> Iterator[str]:
    keys = ("value", "value_float", "value_int", "value_floats", "value_ints")
    if not any(k in v.attrs for k in keys):
        yield f"{v.label}: needs one of the attributes {list(keys)}, got {sorted(v.attrs)}"


def decode_attrs(node: onnx.NodeProto) -> dict:
    """Attributes as Python values (strings decoded, tensors as arrays)."""
    return {a.name: attr_value(a) for a in node.attribute}


@rule("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
      "ReduceLogSumExp", "ReduceLogSum")
def _reduce_mean(v: NodeView) -> Iterator[str]:
    x = v.shapes[0]
    if x is None:
        return
    if "axes" in v.attrs:
        axes = list(v.attrs["axes"])
    elif v.has_input(1):
        if v.consts[1] is None:
            return  # run-time axes: a host kernel
        axes = [int(a) for a in np.ravel(v.consts[1])]
    else:
        axes = []
    bad = [a for a in axes if not -len(x) <= a < len(x)]
    if bad:
        yield f"{v.label}: axes {axes} out of range for input rank {len(x)} (allowed -{len(x)}..{len(x) - 1})"
    elif len({a % len(x) for a in axes}) != len(axes):
        yield f"{v.label}: axes {axes} repeat an axis"
