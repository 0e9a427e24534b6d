"""Graph node -> operator-library kernel: which TE op computes a node, with what arguments.

``plan_node(node, infos, constants, target)`` returns an :class:`OpPlan`: a cache ``key`` (op, shapes,
dtypes, attributes), ``make()`` building the TE op and its schedule for the target, and ``args(inputs)``
mapping the node's input arrays to the kernel's arguments (weights are packed once, at plan time).
Nodes no library op covers raise :class:`UnsupportedOnTarget` naming the op and what is allowed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from compiler.cpu.pooling import pool_axes
from compiler.graph.ir import Node, TensorInfo
from compiler.schedule import Schedule, create_schedule
from compiler import te
from compiler.te import Tensor
from compiler.topi import conv2d_direct, dense_float, elementwise, pool, quantize, softmax
from compiler.topi.injective import schedule_injective

UNARY = {"Relu": "relu", "Clip": "clip", "Sigmoid": "sigmoid", "HardSwish": "hardswish", "HardSigmoid": "hardsigmoid",
         "LeakyRelu": "leakyrelu"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
LIBRARY_OPS = frozenset({"Conv", "FusedConv", "QConv2D", "Gemm", "FusedDense", "MatMul", "MaxPool", "AveragePool",
                         "GlobalAveragePool", "Softmax", "QuantizeLinear", "DequantizeLinear", "QAdd", "QMul", "QLookup",
                         "PackActivation", "UnpackActivation", *UNARY, *BINARY})
# metadata-only reshapes: numpy views, no data moves
VIEW_OPS = frozenset({"Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze", "PackedSqueezeHW"})
# int8 pipeline glue between accelerator-style layers (layout packing, exact integer table/elementwise ops):
# run by the numpy reference kernels on every target
INT8_GLUE_OPS = frozenset({"FoldTaps", "PackedMaxPool", "QGlobalAveragePool", "QAveragePool", "RebaseUint8", "Repack"})


class UnsupportedOnTarget(ValueError):
    """A node that the operator library cannot compute for a CPU/GPU target."""


@dataclass
class OpPlan:
    key: tuple
    make: Callable[[], tuple[list[Tensor], Tensor, Callable[[Schedule], None]]]
    args: Callable[[Sequence[np.ndarray | None]], list[np.ndarray]]
    out_shape: tuple[int, ...] = ()
    out_dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))
    macs: int = 0


def _sched(stage_fn, op, target: str):
    def fn(s: Schedule) -> None:
        stage_fn(op, s, target)
    return fn


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _const(consts: dict, name: str, what: str, node: Node) -> np.ndarray:
    if name not in consts:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): the {what} must be a constant initializer")
    return np.asarray(consts[name])


def _check_f32(node: Node, infos: list[TensorInfo | None]) -> None:
    for i, t in enumerate(infos[:1]):
        if t is not None and t.dtype != np.float32:
            raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): input {i} is {t.dtype}; this target's "
                                      f"{node.op} takes float32 (int8 models run as QDQ, lowered to integer layers)")


# ------------------------------------------------------------------ conv / dense
def _conv(node: Node, infos, consts, target: str) -> OpPlan:
    _check_f32(node, infos)
    a = node.attrs
    x = infos[0]
    if len(x.shape) != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): only 2-D convolutions (4-D NCHW input) are in the "
                                  f"library, got input shape {x.shape}")
    w = _const(consts, node.inputs[1], "weight", node).astype(np.float32)
    bias = consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if len(node.inputs) > 2 and node.inputs[2] and bias is None:
        raise UnsupportedOnTarget(f"node {node.name!r}: the conv bias must be a constant initializer")
    residual = bool(a.get("residual", False))
    spec = conv2d_direct.Conv2dSpec(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3],
                                    tuple(int(v) for v in a.get("strides", (1, 1))),
                                    tuple(int(v) for v in a.get("pads", (0, 0, 0, 0))),
                                    tuple(int(v) for v in a.get("dilations", (1, 1))), int(a.get("group", 1)))
    try:
        spec.check()
    except Exception as exc:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): {exc}") from None
    act, params = a.get("activation"), tuple(a.get("act_params", ()))
    wp = conv2d_direct.pack_weight(spec, w)
    ob = spec.block
    bp = None if bias is None else _f32(bias).reshape(-1)
    key = ("conv2d", spec, ob, bp is not None, residual, act, params, target)

    def make():
        op = conv2d_direct.conv2d(spec, bias=bp is not None, residual=residual, act=act, act_params=params)
        sched = conv2d_direct.schedule_gpu if target == "cuda" else conv2d_direct.schedule_cpu
        return op.inputs, op.out, lambda s: sched(op, s)

    def args(ins):
        out = [_f32(ins[0]), wp]
        if bp is not None:
            out.append(bp)
        if residual:
            out.append(_f32(ins[3]).reshape(spec.n, spec.o // ob, ob, spec.oh, spec.ow))
        return out

    return OpPlan(key, make, args, (spec.n, spec.o, spec.oh, spec.ow), np.dtype(np.float32), spec.macs)


def _dense(node: Node, infos, consts, target: str) -> OpPlan:
    _check_f32(node, infos)
    a = node.attrs
    x = infos[0]
    if len(x.shape) != 2 or a.get("transA", 0):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): dense needs a 2-D, non-transposed input, got "
                                  f"{x.shape} transA={a.get('transA', 0)}")
    if float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): alpha/beta other than 1 are not in the library")
    w = _const(consts, node.inputs[1], "weight", node).astype(np.float32)
    w_mk = w if a.get("transB", 0) else w.T  # (M, K)
    if node.op == "MatMul":
        w_mk = w.T
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = _const(consts, node.inputs[2], "bias", node)
        if bias.size != w_mk.shape[0]:
            raise UnsupportedOnTarget(f"node {node.name!r}: the bias must have one value per output ({w_mk.shape[0]})")
    n, k, m = x.shape[0], x.shape[1], w_mk.shape[0]
    if w_mk.shape[1] != k:
        raise UnsupportedOnTarget(f"node {node.name!r}: input has K={k} but the weight {w.shape}")
    act, params = a.get("activation"), tuple(a.get("act_params", ()))
    wp = dense_float.pack_dense_weight(w_mk)
    bp = None if bias is None else _f32(bias).reshape(-1)
    key = ("dense", n, k, m, bp is not None, act, params, target)

    def make():
        op = dense_float.dense(n, k, m, bias=bp is not None, act=act, act_params=params)
        sched = dense_float.schedule_gpu if target == "cuda" else dense_float.schedule_cpu
        return op.inputs, op.out, lambda s: sched(op, s)

    def args(ins):
        return [_f32(ins[0]), wp] + ([bp] if bp is not None else [])

    return OpPlan(key, make, args, (n, m), np.dtype(np.float32), n * k * m)


def _qconv(node: Node, infos, consts, target: str) -> OpPlan:
    """``QConv2D``: int8 NCHW conv (any groups/stride/pad/dilation, ``pad_value`` borders) + the requant epilogue."""
    from compiler.topi import requant_int

    a = node.attrs
    x = infos[0]
    rq = a.get("requant")
    if rq is None or x.dtype != np.int8 or len(x.shape) != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} (QConv2D): needs a 4-D int8 input and a requant, got {x.dtype} "
                                  f"{x.shape}")
    w = _const(consts, node.inputs[1], "weight", node)
    if w.dtype != np.int8 or w.ndim != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} (QConv2D): the weight must be 4-D int8, got {w.dtype} {w.shape}")
    bias = consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    spec = conv2d_direct.Conv2dSpec(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3],
                                    tuple(int(v) for v in a["strides"]), tuple(int(v) for v in a["pads"]),
                                    tuple(int(v) for v in a.get("dilations", (1, 1))), int(a.get("group", 1)), "int8",
                                    int(a.get("pad_value", 0)))
    try:
        spec.check()
    except Exception as exc:
        raise UnsupportedOnTarget(f"node {node.name!r} (QConv2D): {exc}") from None
    wp = conv2d_direct.pack_weight(spec, w)
    params = requant_int.requant_params(rq, bias, spec.o)
    dt = requant_int.out_dtype(rq)
    key = ("qconv2d", spec, int(rq.pre_shift), int(rq.zero_point), int(rq.clip_low), int(rq.out_max), dt, target)

    def make():
        extra, fn, odt = requant_int.requant_stage(rq, spec.o)
        op = conv2d_direct.conv2d(spec, stage=(extra, fn, odt))
        sched = conv2d_direct.schedule_gpu if target == "cuda" else conv2d_direct.schedule_cpu
        return op.inputs, op.out, lambda s: sched(op, s)

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0]), wp, *params],
                  (spec.n, spec.o, spec.oh, spec.ow), np.dtype(dt), spec.macs)


# ------------------------------------------------------------------ elementwise
# uint8 has no TE dtype: uint8 elementwise ops compute in int16 (exact: results are cast back modulo 256)
_COMPUTE = {"uint8": "int16"}


def _unary(node: Node, infos, consts, target: str) -> OpPlan:
    x = infos[0]
    kind = UNARY[node.op]
    params = ()
    if node.op in ("Clip", "HardSigmoid", "LeakyRelu"):
        params = _clip_params(node, consts) if node.op == "Clip" else _act_params_attrs(node)
    dt = str(x.dtype)
    if dt not in ("float32", "int8", "uint8", "int32") or (dt != "float32" and kind not in ("relu", "clip")):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): dtype {dt} not supported (float32; relu/clip "
                                  f"also int8/uint8/int32)")
    cdt = _COMPUTE.get(dt, dt)
    shape = tuple(x.shape) or (1,)
    key = ("unary", kind, params, shape, cdt, target)

    def make():
        ins, y = elementwise.unary(shape, cdt, kind, params)
        return ins, y, lambda s: schedule_injective(s, y, target)

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0], dtype=cdt).reshape(shape)], tuple(x.shape),
                  np.dtype(dt))


def _clip_params(node: Node, consts) -> tuple:
    lo, hi = node.attrs.get("min"), node.attrs.get("max")
    if len(node.inputs) > 1 and node.inputs[1]:
        lo = float(np.asarray(_const(consts, node.inputs[1], "min", node)).reshape(()))
    if len(node.inputs) > 2 and node.inputs[2]:
        hi = float(np.asarray(_const(consts, node.inputs[2], "max", node)).reshape(()))
    return (None if lo is None else float(lo), None if hi is None else float(hi))


def _act_params_attrs(node: Node) -> tuple:
    a = node.attrs
    if node.op == "HardSigmoid":
        return (float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)))
    return (float(a.get("alpha", 0.01)),)


def _binary(node: Node, infos, consts, target: str) -> OpPlan:
    xa, xb = infos[0], infos[1]
    dt = str(xa.dtype)
    if xb.dtype != xa.dtype or dt not in ("float32", "int32", "int8", "uint8") or (dt != "float32" and node.op == "Div"):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): operands {xa.dtype}/{xb.dtype}; the library has "
                                  f"float32 (and int8/uint8/int32 Add/Sub/Mul, wrapping) with equal dtypes")
    cdt = _COMPUTE.get(dt, dt)
    sa, sb = tuple(xa.shape), tuple(xb.shape)
    op = BINARY[node.op]
    key = ("binary", op, sa, sb, cdt, target)
    out_shape = elementwise.broadcast_shape(sa, sb)

    def make():
        ins, y = elementwise.binary(sa, sb, cdt, op)
        return ins, y, lambda s: schedule_injective(s, y, target)

    def args(ins):
        return [np.ascontiguousarray(ins[0], dtype=cdt).reshape(sa or (1,)),
                np.ascontiguousarray(ins[1], dtype=cdt).reshape(sb or (1,))]

    return OpPlan(key, make, args, out_shape, np.dtype(dt))


# ------------------------------------------------------------------ pooling / softmax
def _pool(node: Node, infos, consts, target: str) -> OpPlan:
    x = infos[0]
    if node.op != "MaxPool" or str(x.dtype) not in ("int8", "uint8"):
        _check_f32(node, infos)
    cdt = _COMPUTE.get(str(x.dtype), str(x.dtype))
    a = node.attrs
    if len(x.shape) != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): only 2-D pooling (NCHW) is in the library")
    n, c, h, w = x.shape
    if node.op == "GlobalAveragePool":
        key = ("gap", tuple(x.shape), target)

        def make_gap():
            ins, y = pool.global_avg_pool(n, c, h, w)
            sched = pool.schedule_gpu if target == "cuda" else pool.schedule_cpu
            return ins, y, lambda s: sched(s, [y.op.inputs[0], y])

        return OpPlan(key, make_gap, lambda ins: [_f32(ins[0])], (n, c, 1, 1))
    if len(node.outputs) > 1 and node.outputs[1]:
        raise UnsupportedOnTarget(f"node {node.name!r}: MaxPool's Indices output is not in the library")
    if any(int(d) != 1 for d in a.get("dilations") or (1, 1)):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): dilated pooling is not in the library")
    ax = pool_axes(a, (h, w))
    spec = pool.PoolSpec(n, c, h, w, ax[0].k, ax[1].k, (ax[0].s, ax[1].s),
                         (ax[0].begin, ax[1].begin, ax[0].end, ax[1].end), ax[0].out, ax[1].out)
    include = bool(a.get("count_include_pad", 0))
    key = (node.op, spec, include, cdt, target)

    def make():
        if node.op == "MaxPool":
            ins, y = pool.max_pool(spec, cdt)
            stages = [y]
        else:
            ins, y = pool.avg_pool(spec, include)
            stages = [y.op.inputs[0], y]
        sched = pool.schedule_gpu if target == "cuda" else pool.schedule_cpu
        return ins, y, lambda s: sched(s, stages)

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0], dtype=cdt)], (n, c, spec.oh, spec.ow),
                  np.dtype(x.dtype))


def _softmax(node: Node, infos, consts, target: str) -> OpPlan:
    _check_f32(node, infos)
    x = infos[0]
    shape = tuple(x.shape)
    axis = int(node.attrs.get("axis", -1)) % len(shape)
    key = ("softmax", shape, axis, target)

    def make():
        ins, stages = softmax.softmax(shape, axis)
        sched = softmax.schedule_gpu if target == "cuda" else softmax.schedule_cpu
        return ins, stages[-1], lambda s: sched(s, stages)

    return OpPlan(key, make, lambda ins: [_f32(ins[0])], shape)


# ------------------------------------------------------------------ int8 glue: QAdd/QMul/QLookup, packing
def _qbinary(node: Node, infos, consts, target: str) -> OpPlan:
    from compiler.topi import qelementwise

    xa, xb = infos[0], infos[1]
    if xa.dtype != np.int8 or xb.dtype != np.int8:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): int8 operands required, got {xa.dtype}/{xb.dtype}")
    sa, sb = tuple(xa.shape) or (1,), tuple(xb.shape) or (1,)
    p = node.attrs["qadd" if node.op == "QAdd" else "qmul"]
    fn = qelementwise.qadd if node.op == "QAdd" else qelementwise.qmul
    key = (node.op, sa, sb, p, target)

    def make():
        ins, y = fn(sa, sb, p)
        return ins, y, lambda s: schedule_injective(s, y, target)

    def args(ins):
        return [np.ascontiguousarray(ins[0]).reshape(sa), np.ascontiguousarray(ins[1]).reshape(sb)]

    return OpPlan(key, make, args, elementwise.broadcast_shape(tuple(xa.shape), tuple(xb.shape)), np.dtype(np.int8))


def _qlookup(node: Node, infos, consts, target: str) -> OpPlan:
    from compiler.topi import qelementwise

    x = infos[0]
    table = np.ascontiguousarray(node.attrs["table"], dtype=np.int8).reshape(-1)
    if x.dtype != np.int8 or table.size != 256:
        raise UnsupportedOnTarget(f"node {node.name!r} (QLookup): an int8 input and a 256-entry table are required")
    shape = tuple(x.shape) or (1,)
    key = ("QLookup", shape, target)

    def make():
        ins, y = qelementwise.qlookup(shape)
        return ins, y, lambda s: schedule_injective(s, y, target, vector=False)  # a table read per element

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0]).reshape(shape), table], tuple(x.shape),
                  np.dtype(np.int8))


def _layout(node: Node, infos, consts, target: str) -> OpPlan:
    from compiler.topi import layout

    x = infos[0]
    dt = str(x.dtype)
    if dt not in ("float32", "int8", "int32"):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): dtype {dt}; allowed float32, int8, int32")
    shape = tuple(x.shape)
    a = node.attrs
    if node.op == "PackActivation":
        params = (int(a["batch"]), int(a["block"]))
        build = layout.pack
    else:
        params = (int(a["n"]), int(a["c"]))
        build = layout.unpack
    try:
        ins, y = build(shape, dt, *params)
    except te.TeError as exc:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): {exc}") from None
    key = (node.op, shape, dt, params, target)

    def make():
        ins, y = build(shape, dt, *params)
        return ins, y, lambda s: schedule_injective(s, y, target, vector=False)

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0])], tuple(y.shape), np.dtype(dt))


# ------------------------------------------------------------------ quantize / dequantize
def _qparams(node: Node, infos, consts, x_shape) -> tuple[int, bool, np.ndarray, np.ndarray]:
    axis = int(node.attrs.get("axis", 1))
    if int(node.attrs.get("block_size", 0)):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): blocked quantization is not in the library")
    scale = _const(consts, node.inputs[1], "scale", node).astype(np.float32).reshape(-1)
    zp = consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if len(node.inputs) > 2 and node.inputs[2] and zp is None:
        raise UnsupportedOnTarget(f"node {node.name!r}: the zero point must be a constant initializer")
    zpa = np.zeros(1, np.int32) if zp is None else np.asarray(zp).astype(np.int32).reshape(-1)
    per = scale.size > 1 or zpa.size > 1
    if per:
        nch = x_shape[axis % len(x_shape)]
        scale, zpa = np.broadcast_to(scale, (nch,)).copy(), np.broadcast_to(zpa, (nch,)).copy()
    return axis, per, np.ascontiguousarray(scale), np.ascontiguousarray(zpa)


def _quantize(node: Node, infos, consts, target: str) -> OpPlan:
    _check_f32(node, infos)
    x = infos[0]
    zp = consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    qdt = np.dtype(np.asarray(zp).dtype) if zp is not None else np.dtype(np.uint8)
    if qdt.name not in quantize.QDTYPES:
        raise UnsupportedOnTarget(f"node {node.name!r}: QuantizeLinear to {qdt}; allowed: {quantize.QDTYPES}")
    shape = tuple(x.shape) or (1,)
    axis, per, scale, zpa = _qparams(node, infos, consts, shape)
    key = ("quantize", shape, qdt.name, axis, per, target)

    def make():
        ins, y = quantize.quantize(shape, qdt.name, axis, per)
        return ins, y, lambda s: schedule_injective(s, y, target, vector=False)  # scalar rint: once per model

    return OpPlan(key, make, lambda ins: [_f32(ins[0]).reshape(shape), scale, zpa], tuple(x.shape), qdt)


def _dequantize(node: Node, infos, consts, target: str) -> OpPlan:
    x = infos[0]
    if x.dtype not in (np.int8, np.uint8, np.int32):
        raise UnsupportedOnTarget(f"node {node.name!r}: DequantizeLinear of {x.dtype}; allowed int8, uint8, int32")
    shape = tuple(x.shape) or (1,)
    axis, per, scale, zpa = _qparams(node, infos, consts, shape)
    qdt = "int32" if x.dtype != np.int8 else "int8"
    key = ("dequantize", shape, qdt, axis, per, target)

    def make():
        ins, y = quantize.dequantize(shape, qdt, axis, per)
        return ins, y, lambda s: schedule_injective(s, y, target)

    def args(ins):
        q = np.asarray(ins[0]).reshape(shape)
        return [np.ascontiguousarray(q if qdt == "int8" else q.astype(np.int32)), scale, zpa]

    return OpPlan(key, make, args, tuple(x.shape))


PLANNERS: dict[str, Callable[..., OpPlan]] = {
    "Conv": _conv, "FusedConv": _conv, "QConv2D": _qconv, "Gemm": _dense, "FusedDense": _dense, "MatMul": _dense,
    "MaxPool": _pool, "AveragePool": _pool, "GlobalAveragePool": _pool, "Softmax": _softmax,
    "QuantizeLinear": _quantize, "DequantizeLinear": _dequantize, "QAdd": _qbinary, "QMul": _qbinary,
    "QLookup": _qlookup, "PackActivation": _layout, "UnpackActivation": _layout,
    **{k: _unary for k in UNARY}, **{k: _binary for k in BINARY},
}


def plan_node(node: Node, infos: list[TensorInfo | None], consts: dict, target: str) -> OpPlan:
    """The library kernel plan of ``node`` for ``target`` (raises :class:`UnsupportedOnTarget`)."""
    planner = PLANNERS.get(node.op)
    if planner is None:
        raise UnsupportedOnTarget(f"node {node.name!r}: operator {node.op} is not in the operator library for target "
                                  f"{target!r}; library ops: {sorted(LIBRARY_OPS)}")
    return planner(node, infos, consts, target)


def build_schedule(plan: OpPlan) -> tuple[Schedule, list[Tensor]]:
    """The TE op of ``plan`` with its target schedule applied; returns (schedule, [args..., output])."""
    ins, out, sched = plan.make()
    s = create_schedule(out)
    sched(s)
    return s, list(ins) + [out]
