"""Import rules of the transformer / detector / segmentation operators (registered into ``op_rules.RULES``).

Shapes and constants the kernels of :mod:`jit_runtime.host_ops.transformer_kernels` rely on, checked where the
model enters, each problem naming the node, the input or attribute and what is allowed.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from compiler.frontend.op_rules import NodeView, Shape, _axis, _finite, _ints, _is_int, rule


def _broadcasts_to(small: Shape, big: Shape) -> bool:
    """``small`` broadcasts (numpy rules, one way) to ``big``; unknown dims pass."""
    if len(small) > len(big):
        return False
    return all(s is None or b is None or s in (1, b) for s, b in zip(small[::-1], big[::-1]))


def _mutual(shapes: list[Shape | None]) -> bool:
    known = [s for s in shapes if s is not None]
    r = max((len(s) for s in known), default=0)
    for k in range(1, r + 1):
        dims = {s[-k] for s in known if len(s) >= k and s[-k] is not None} - {1}
        if len(dims) > 1:
            return False
    return True


@rule("Where", "Equal", "And", "Pow", "Min", "Max", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Or", "Xor",
      "Mod", "Mean", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift")
def _broadcast(v: NodeView) -> Iterator[str]:
    if not _mutual(list(v.shapes)):
        yield (f"{v.label}: input shapes {[tuple(s) if s is not None else None for s in v.shapes]} do not broadcast "
               f"together (numpy rules: each axis equal or 1)")


@rule("LayerNormalization", "RMSNormalization")
def _layer_norm(v: NodeView) -> Iterator[str]:
    r = v.rank(0)
    yield from _axis(v, "axis", r, -1)
    yield from _finite(v, "epsilon", 0.0)
    ax = v.attrs.get("axis", -1)
    x = v.shapes[0]
    if x is None or not _is_int(ax) or not -len(x) <= ax < len(x):
        return
    norm = tuple(x[ax % len(x):])
    for i, what in ((1, "scale"), (2, "bias")):
        s = v.shapes[i] if i < len(v.shapes) else None
        if s is not None and not _broadcasts_to(tuple(s), norm):
            yield f"{v.inp(i)} ({what}) has shape {tuple(s)}; it must broadcast to the normalized shape {norm}"


@rule("GatherElements")
def _gather_elements(v: NodeView) -> Iterator[str]:
    yield from _axis(v, "axis", v.rank(0), 0)
    x, i = v.shapes[0], v.shapes[1]
    ax = v.attrs.get("axis", 0)
    if x is None or i is None:
        return
    if len(x) != len(i):
        yield f"{v.label}: indices {tuple(i)} must have the rank of the data {tuple(x)}"
        return
    if not _is_int(ax) or not -len(x) <= ax < len(x):
        return
    ax %= len(x)
    for d, (a, b) in enumerate(zip(i, x)):
        if d != ax and a is not None and b is not None and a > b:
            yield f"{v.label}: indices {tuple(i)} exceed the data {tuple(x)} on axis {d} (allowed: <= the data's size)"
    idx = v.consts[1]
    n = x[ax]
    if idx is not None and n is not None and idx.size and (idx.min() < -n or idx.max() >= n):
        yield f"{v.inp(1)} (indices) holds values outside [{-n}, {n - 1}] for axis {ax} of size {n}"


@rule("GatherND")
def _gather_nd(v: NodeView) -> Iterator[str]:
    b = v.attrs.get("batch_dims", 0)
    x, i = v.shapes[0], v.shapes[1]
    if not _is_int(b) or b < 0:
        yield f"{v.attr('batch_dims')}: must be an integer >= 0"
        return
    if x is None or i is None:
        return
    if b >= min(len(x), len(i)):
        yield f"{v.attr('batch_dims')}: must be smaller than the ranks of data {tuple(x)} and indices {tuple(i)}"
        return
    k = i[-1]
    if k is not None and not 1 <= k <= len(x) - b:
        yield f"{v.label}: the last axis of indices {tuple(i)} must be in 1..{len(x) - b} (rank of data minus batch_dims)"
        return
    if any(p is not None and q is not None and p != q for p, q in zip(x[:b], i[:b])):
        yield f"{v.label}: the {b} batch axes of data {tuple(x)} and indices {tuple(i)} must be equal"
    idx = v.consts[1]
    if idx is not None and k is not None and idx.size and all(d is not None for d in x[b:b + k]):
        dims = np.asarray(x[b:b + k], np.int64)
        if np.any(idx < -dims) or np.any(idx >= dims):
            yield f"{v.inp(1)} (indices) holds values outside the data's dims {tuple(dims)}"


@rule("Expand")
def _expand(v: NodeView) -> Iterator[str]:
    shape, x = v.consts[1], v.shapes[0]
    if shape is None or x is None:
        return
    want = [int(s) for s in np.ravel(shape)]
    if any(s < 0 for s in want) or not _mutual([tuple(x), tuple(want)]):
        yield f"{v.inp(1)} (shape) = {want} does not broadcast with input {v.node.input[0]!r} {tuple(x)}"


@rule("Range")
def _range(v: NodeView) -> Iterator[str]:
    for i, what in enumerate(("start", "limit", "delta")):
        s = v.shapes[i]
        if s is not None and len(s) != 0:
            yield f"{v.inp(i)} ({what}) has shape {tuple(s)}; it must be a scalar"
    d = v.consts[2]
    if d is not None and np.size(d) == 1 and float(np.ravel(d)[0]) == 0:
        yield f"{v.inp(2)} (delta) is 0; it must be non-zero"


def _conv_like(v: NodeView, transpose: bool) -> Iterator[str]:
    x, w = v.shapes[0], v.shapes[1]
    n = None if w is None else len(w) - 2
    yield from _ints(v, "kernel_shape", n, 1, "one kernel size >= 1 per spatial axis")
    yield from _ints(v, "strides", n, 1, "one stride >= 1 per spatial axis")
    yield from _ints(v, "dilations", n, 1, "one dilation >= 1 per spatial axis")
    yield from _ints(v, "pads", None if n is None else 2 * n, 0, "begin and end pad >= 0 per spatial axis")
    if transpose:
        yield from _ints(v, "output_padding", n, 0, "one value >= 0 per spatial axis")
        yield from _ints(v, "output_shape", None, 1, "output sizes >= 1")
    g = v.attrs.get("group", 1)
    if not _is_int(g) or g < 1:
        yield f"{v.attr('group')}: must be an integer >= 1"
        return
    if x is None or w is None:
        return
    if len(x) < 3 or len(x) != len(w):
        yield f"{v.label}: input {tuple(x)} and weight {tuple(w)} must have the same rank >= 3"
        return
    k = v.attrs.get("kernel_shape")
    if k is not None and list(k) != list(w[2:]):
        yield f"{v.attr('kernel_shape')}: must equal the weight's spatial shape {list(w[2:])}"
    if transpose:
        if x[1] is not None and w[0] is not None and (x[1] != w[0] or x[1] % g):
            yield (f"{v.label}: input channels {x[1]} must equal the weight's first axis {w[0]} and be a multiple of "
                   f"group {g}")
        n_out = None if w[1] is None else w[1] * g
        op, s, d = v.attrs.get("output_padding"), v.attrs.get("strides"), v.attrs.get("dilations")
        if isinstance(op, list) and all(_is_int(a) for a in op):
            for a, p in enumerate(op):
                lim = max((s or [1] * len(op))[a] if a < len(s or op) else 1,
                          (d or [1] * len(op))[a] if a < len(d or op) else 1)
                if p >= lim:
                    yield f"{v.attr('output_padding')}: each value must be smaller than its stride or dilation"
                    break
        yield from _transpose_size(v, x, w)
    else:
        n_out = w[0]
        if x[1] is not None and w[1] is not None and x[1] != w[1] * g:
            yield f"{v.label}: input channels {x[1]} must equal weight {tuple(w)} axis 1 x group {g}"
        if w[0] is not None and w[0] % g:
            yield f"{v.attr('group')}: must divide the {w[0]} output channels"
    if len(v.shapes) > 2 and v.shapes[2] is not None and transpose and n_out is not None:
        if tuple(v.shapes[2]) != (n_out,):
            yield f"{v.inp(2)} (bias) has shape {tuple(v.shapes[2])}; it must be ({n_out},), one per output channel"


def _transpose_size(v: NodeView, x: Shape, w: Shape) -> Iterator[str]:
    from jit_runtime.host_ops.transformer_kernels import conv_transpose_geometry

    if any(d is None for d in list(x[2:]) + list(w)):
        return
    try:
        k, s, d, op, _start, size = conv_transpose_geometry(v.attrs, list(x[2:]), list(w))
    except (TypeError, ValueError, IndexError):
        return  # malformed attributes: named by the attribute checks above
    if len(size) != len(x) - 2 or any(z < 1 for z in size):
        yield f"{v.label}: the output spatial shape {size} must have one size >= 1 per spatial axis"


@rule("ConvTranspose")
def _conv_transpose(v: NodeView) -> Iterator[str]:
    yield from _conv_like(v, transpose=True)


@rule("ConvInteger")
def _conv_integer(v: NodeView) -> Iterator[str]:
    yield from _conv_like(v, transpose=False)
    w = v.shapes[1]
    for i, what, n in ((2, "input zero point", 1), (3, "weight zero point", None if w is None else w[0])):
        s = v.shapes[i] if i < len(v.shapes) else None
        if s is not None and not (len(s) == 0 or tuple(s) == (1,) or (n is not None and tuple(s) == (n,))):
            yield f"{v.inp(i)} ({what}) has shape {tuple(s)}; allowed: a scalar" + (
                f" or ({n},), one per output channel" if i == 3 else "")


@rule("MatMulInteger")
def _matmul_integer(v: NodeView) -> Iterator[str]:
    a, b = v.shapes[0], v.shapes[1]
    for i, what, n in ((2, "A zero point", None if a is None or len(a) < 2 else a[-2]),
                       (3, "B zero point", None if b is None or len(b) < 1 else b[-1])):
        s = v.shapes[i] if i < len(v.shapes) else None
        if s is not None and not (len(s) == 0 or tuple(s) == (1,) or (n is not None and tuple(s) == (n,))):
            yield f"{v.inp(i)} ({what}) has shape {tuple(s)}; allowed: a scalar or one value per " + (
                "row of A" if i == 2 else "column of B")


@rule("DepthToSpace", "SpaceToDepth")
def _block_rearrange(v: NodeView) -> Iterator[str]:
    b, x = v.attrs.get("blocksize"), v.shapes[0]
    if not _is_int(b) or b < 1:
        yield f"{v.attr('blocksize')}: required, an integer >= 1"
    elif x is not None and len(x) != 4:
        yield f"{v.label}: input {tuple(x)} must be 4-D (N, C, H, W)"
    elif x is not None and v.node.op_type == "DepthToSpace" and x[1] is not None and x[1] % (b * b):
        yield f"{v.label}: channels {x[1]} must be a multiple of blocksize^2 = {b * b}"
    elif x is not None and v.node.op_type == "SpaceToDepth" and any(d is not None and d % b for d in x[2:]):
        yield f"{v.label}: height and width {tuple(x[2:])} must be multiples of blocksize {b}"


@rule("Trilu")
def _trilu(v: NodeView) -> Iterator[str]:
    r = v.rank(0)
    if r is not None and r < 2:
        yield f"{v.label}: input must have rank >= 2 (a batch of matrices), got rank {r}"


@rule("ScatterElements", "OneHot")
def _axis_attr(v: NodeView) -> Iterator[str]:
    r = v.rank(0)
    yield from _axis(v, "axis", None if r is None else r + (v.node.op_type == "OneHot"), -1)


@rule("TopK")
def _top_k(v: NodeView) -> Iterator[str]:
    yield from _axis_attr(v)
    k, x = v.consts[1], v.shapes[0]
    ax = v.attrs.get("axis", -1)
    if k is None or x is None or not _is_int(ax) or not -len(x) <= ax < len(x):
        return
    kv = int(np.ravel(k)[0])
    n = x[ax]
    if kv < 0 or (n is not None and kv > n):
        yield f"{v.inp(1)} (k) = {kv}; allowed 0..{n} (the size of axis {ax})"


@rule("CumSum", "CumProd")
def _cum_sum(v: NodeView) -> Iterator[str]:
    ax, r = v.consts[1], v.rank(0)
    if ax is not None and r is not None and (np.size(ax) != 1 or not -r <= int(np.ravel(ax)[0]) < r):
        yield f"{v.inp(1)} (axis) = {np.ravel(ax).tolist()}; it must be one axis in [{-r}, {r - 1}]"



@rule("InstanceNormalization", "GroupNormalization")
def _group_norm(v: NodeView) -> Iterator[str]:
    x = v.shapes[0]
    yield from _finite(v, "epsilon", 0.0)
    if x is not None and len(x) < 3:
        yield f"{v.label}: input {tuple(x)} must be (N, C, D1, ...): rank >= 3"
        return
    c = None if x is None else x[1]
    g = c if v.node.op_type == "InstanceNormalization" else v.attrs.get("num_groups")
    if v.node.op_type == "GroupNormalization":
        if not _is_int(g) or g < 1:
            yield f"{v.attr('num_groups')}: required, an integer >= 1"
            return
        if c is not None and c % g:
            yield f"{v.attr('num_groups')}: must divide the {c} channels"
            return
    for i, what in ((1, "scale"), (2, "bias")):
        s = v.shapes[i] if i < len(v.shapes) else None
        if s is not None and c is not None and tuple(s) != (c,):
            yield f"{v.inp(i)} ({what}) has shape {tuple(s)}; it must be ({c},), one value per channel"


@rule("Einsum")
def _einsum(v: NodeView) -> Iterator[str]:
    eq = v.attrs.get("equation")
    if not isinstance(eq, str) or not eq.strip():
        yield f"{v.label}: required attribute 'equation' is missing"
        return
    terms = eq.replace(" ", "").split("->")[0].split(",")
    if len(terms) != len(v.node.input):
        yield f"{v.attr('equation')}: names {len(terms)} operand(s), the node has {len(v.node.input)} input(s)"
        return
    for i, (t, s) in enumerate(zip(terms, v.shapes)):
        letters = t.replace("...", "")
        if not all(ch.isalpha() for ch in letters):
            yield f"{v.attr('equation')}: operand {i} term {t!r} must be letters (and '...')"
        elif s is not None and ("..." not in t and len(letters) != len(s) or "..." in t and len(letters) > len(s)):
            yield f"{v.attr('equation')}: term {t!r} does not fit input {i} of shape {tuple(s)}"


@rule("NonMaxSuppression")
def _nms(v: NodeView) -> Iterator[str]:
    b, s = v.shapes[0], v.shapes[1]
    if b is not None and (len(b) != 3 or b[2] not in (None, 4)):
        yield f"{v.inp(0)} (boxes) has shape {tuple(b)}; it must be (batch, boxes, 4)"
    elif s is not None and (len(s) != 3 or (b is not None and (s[0], s[2]) != (b[0], b[1]))):
        yield f"{v.inp(1)} (scores) has shape {tuple(s)}; it must be (batch, classes, boxes) matching the boxes"


@rule("EyeLike")
def _eye_like(v: NodeView) -> Iterator[str]:
    r = v.rank(0)
    if r is not None and r != 2:
        yield f"{v.label}: input must be 2-D, got rank {r}"


@rule("Attention")
def _attention(v: NodeView) -> Iterator[str]:
    q, k = v.shapes[0], v.shapes[1]
    hq, hkv = v.attrs.get("q_num_heads"), v.attrs.get("kv_num_heads")
    if q is not None and len(q) not in (3, 4):
        yield f"{v.label}: Q {tuple(q)} must be 3-D (batch, seq, hidden) or 4-D (batch, heads, seq, size)"
        return
    if q is not None and len(q) == 3 and not (_is_int(hq) and _is_int(hkv) and hq > 0 and hkv > 0):
        yield f"{v.label}: 3-D Q, K, V need the attributes q_num_heads and kv_num_heads (integers >= 1)"
        return
    if q is not None and k is not None and len(q) == 4 and len(k) == 4:
        hq, hkv = q[1], k[1]
    if _is_int(hq) and _is_int(hkv) and hkv > 0 and hq % hkv:
        yield f"{v.label}: {hq} query heads must be a multiple of the {hkv} key/value heads"
    if v.has_input(4) != v.has_input(5):
        yield f"{v.label}: past_key and past_value must be given together"


@rule("RotaryEmbedding")
def _rotary(v: NodeView) -> Iterator[str]:
    x = v.shapes[0]
    if x is not None and len(x) == 3 and not (_is_int(v.attrs.get("num_heads")) and v.attrs["num_heads"] > 0):
        yield f"{v.label}: a 3-D input needs the attribute num_heads (an integer >= 1)"
    elif x is not None and len(x) not in (3, 4):
        yield f"{v.label}: input {tuple(x)} must be 3-D (batch, seq, hidden) or 4-D (batch, heads, seq, size)"
