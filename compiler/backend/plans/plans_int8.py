"""Planners of the integer operators of lowered QDQ graphs: QConv2D (int8 conv + requant), QuantizeLinear /
DequantizeLinear, QAdd / QMul / QLookup, and the blocked-layout Pack/UnpackActivation."""
from __future__ import annotations

import numpy as np

from compiler import te
from compiler.graph.ir import Node
from compiler.backend.plans.oplan import OpPlan, UnsupportedOnTarget, check_f32, const_input, f32
from compiler.topi import conv2d_direct, conv2d_gpu, elementwise, quantize
from compiler.topi.injective import PARALLEL_MIN, schedule_injective


def plan_qconv(node: Node, infos, consts, target: str) -> OpPlan:
    """``QConv2D``: int8 NCHW conv (any groups/stride/pad/dilation, ``pad_value`` borders) + the requant epilogue."""
    from compiler.topi import requant_int

    a = node.attrs
    x = infos[0]
    rq = a.get("requant")
    if rq is None or x.dtype != np.int8 or len(x.shape) != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} (QConv2D): needs a 4-D int8 input and a requant, got {x.dtype} "
                                  f"{x.shape}")
    w = const_input(consts, node.inputs[1], "weight", node)
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
    params = requant_int.requant_params(rq, bias, spec.o)
    dt = requant_int.out_dtype(rq)
    key, make, wp = int8_conv_kernel(spec, w, rq, target)
    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0]), wp, *params],
                  (spec.n, spec.o, spec.oh, spec.ow), np.dtype(dt), spec.macs)


def int8_conv_kernel(spec: conv2d_direct.Conv2dSpec, w: np.ndarray | None, rq, target: str) -> tuple:
    """``(key, make, packed weight)`` of an int8 conv + requant kernel on ``target``: cuda's tiled implicit GEMM
    (:mod:`compiler.topi.conv2d_gpu`) where it applies, else the direct conv (its GPU or CPU schedule); the packed
    weight is None where ``w`` is."""
    from compiler.topi import requant_int

    scal = (int(rq.pre_shift), int(rq.zero_point), int(rq.clip_low), int(rq.out_max), requant_int.out_dtype(rq))
    if target == "cuda" and conv2d_gpu.gpu_conv_ok(spec):
        knobs = conv2d_gpu.default_knobs(spec)

        def make_gpu():
            op = conv2d_gpu.conv2d(spec, knobs, stage=requant_int.requant_stage(rq, spec.o))
            return op.inputs, op.out, lambda s: conv2d_gpu.schedule_gpu(op, s)

        wp = None if w is None else conv2d_gpu.pack_weight(spec, w, knobs)
        return ("qconv2d_gpu", spec, *scal, knobs), make_gpu, wp

    def make():
        op = conv2d_direct.conv2d(spec, stage=requant_int.requant_stage(rq, spec.o))
        sched = conv2d_direct.schedule_gpu if target == "cuda" else conv2d_direct.schedule_cpu
        return op.inputs, op.out, lambda s: sched(op, s)

    return ("qconv2d", spec, *scal, target), make, None if w is None else conv2d_direct.pack_weight(spec, w)


def plan_qdense(node: Node, infos, consts, target: str) -> OpPlan:
    """``QDense`` (int8 (N, K) x (M, K) + requant) as a 1x1 convolution over a 1x1 image."""
    from compiler.topi import requant_int

    x = infos[0]
    rq = node.attrs.get("requant")
    w = const_input(consts, node.inputs[1], "weight", node)
    if rq is None or x.dtype != np.int8 or len(x.shape) != 2 or w.dtype != np.int8 or w.ndim != 2 \
            or w.shape[1] != x.shape[1]:
        raise UnsupportedOnTarget(f"node {node.name!r} (QDense): needs int8 (N, K) x (M, K) and a requant, got "
                                  f"{x.dtype} {x.shape} x {w.dtype} {w.shape}")
    bias = consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    n, k = x.shape
    m = w.shape[0]
    spec = conv2d_direct.Conv2dSpec(n, k, 1, 1, m, 1, 1, dtype="int8")
    params = requant_int.requant_params(rq, bias, m)
    dt = requant_int.out_dtype(rq)
    key, make, wp = int8_conv_kernel(spec, w.reshape(m, k, 1, 1), rq, target)

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0]).reshape(n, k, 1, 1), wp, *params], (n, m),
                  np.dtype(dt), n * k * m)


def plan_qbinary(node: Node, infos, consts, target: str) -> OpPlan:
    from compiler.topi import qelementwise

    xa, xb = infos[0], infos[1]
    if xa.dtype != np.int8 or xb.dtype != np.int8:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): int8 operands required, got {xa.dtype}/{xb.dtype}")
    sa, sb = tuple(xa.shape) or (1,), tuple(xb.shape) or (1,)
    if sa == sb:  # elementwise on equal shapes: one flat axis (fused axes index through divisions: lane gathers)
        sa = sb = (int(np.prod(sa)),)
    p = node.attrs["qadd" if node.op == "QAdd" else "qmul"]
    fn = qelementwise.qadd if node.op == "QAdd" else qelementwise.qmul
    key = (node.op, sa, sb, p, target)

    def make():
        ins, y = fn(sa, sb, p)
        return ins, y, lambda s: schedule_injective(s, y, target)

    def args(ins):
        return [np.ascontiguousarray(ins[0]).reshape(sa), np.ascontiguousarray(ins[1]).reshape(sb)]

    return OpPlan(key, make, args, elementwise.broadcast_shape(tuple(xa.shape), tuple(xb.shape)), np.dtype(np.int8))


def plan_qlookup(node: Node, infos, consts, target: str) -> OpPlan:
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


def plan_layout(node: Node, infos, consts, target: str) -> OpPlan:
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
        if target == "llvm" and node.op == "PackActivation" and len(shape) == 4:
            return ins, y, lambda s: layout.schedule_pack_cpu(s, y)
        return ins, y, lambda s: schedule_injective(s, y, target, vector=False)

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0])], tuple(y.shape), np.dtype(dt))


def plan_packed_maxpool(node: Node, infos, consts, target: str) -> OpPlan:
    """``PackedMaxPool``: ONNX MaxPool (pads, strides, ceil_mode; no dilation) over axes 2, 3 of the packed int8 layout
    ``(N/B, C/BI, H, W, B, BI)``; the BI channels of a pixel are one vector (no unpacking)."""
    from jit_runtime.host_ops.pooling import pool_pads

    x = infos[0]
    a = node.attrs
    if x.dtype != np.int8 or len(x.shape) != 6 or tuple(a.get("dilations", (1, 1))) != (1, 1):
        raise UnsupportedOnTarget(f"node {node.name!r} (PackedMaxPool): needs a 6-D packed int8 input and no dilation, "
                                  f"got {x.dtype} {x.shape}")
    shape = tuple(int(v) for v in x.shape)
    kh, kw, sh, sw, t, l, b, r = pool_pads(a, shape[2], shape[3])
    oh, ow = (shape[2] + t + b - kh) // sh + 1, (shape[3] + l + r - kw) // sw + 1
    key = ("PackedMaxPool", shape, (kh, kw, sh, sw, t, l), target)

    def make():
        data = te.placeholder(shape, "int8", "data")
        ky, kx = te.reduce_axis(kh, "ky"), te.reduce_axis(kw, "kx")
        low = te.const(-128, "int8")
        hp, wp = max(shape[2] + t + b, (oh - 1) * sh + kh), max(shape[3] + l + r, (ow - 1) * sw + kw)
        pad = te.compute((shape[0], shape[1], hp, wp, shape[4], shape[5]), lambda nb, cb, iy, ix, bb, bi: te.select(
            (iy >= t) & (iy < shape[2] + t) & (ix >= l) & (ix < shape[3] + l), data[nb, cb, iy - t, ix - l, bb, bi],
            low), name="pad", dtype="int8")  # -128 borders: the taps below read in bounds, unguarded
        y = te.compute((shape[0], shape[1], oh, ow, shape[4], shape[5]), lambda nb, cb, yy, xx, bb, bi: te.max_(
            pad[nb, cb, yy * sh + ky, xx * sw + kx, bb, bi], axis=[ky, kx]), name="packed_max_pool", dtype="int8")

        def sched(s):
            from compiler.topi import pool

            if target == "cuda":
                schedule_injective(s, pad, target)
                pool.schedule_gpu(s, [y])
                return
            sp = s[pad]
            sp.vectorize(sp.leaf_iter_vars[-1])
            st = s[y]
            nb, cb, yy, xx, bb, bi = (a for a in st.leaf_iter_vars if a.kind == "data")
            st.reorder(nb, cb, yy, xx, bb, ky, kx, bi)  # the BI channels innermost: one vector max per tap
            if int(np.prod(y.shape)) * kh * kw >= PARALLEL_MIN:  # the float32 pools' threshold (pool.schedule_cpu)
                st.parallel(st.fuse(nb, cb))
            st.vectorize(bi)
        return [data], y, sched

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0])], (shape[0], shape[1], oh, ow, shape[4],
                                                                         shape[5]), np.dtype(np.int8))


def plan_qgap(node: Node, infos, consts, target: str) -> OpPlan:
    """``QGlobalAveragePool`` of an int8 tensor (packed ``(N/B, C/BI, H, W, B, BI)``: over H, W; else NC...: over the
    spatial axes) as one reduction and rescale (llvm: the sum vectorized over a packed pixel's channels; cuda: a
    thread per output); the numpy kernel runs the rest."""
    from compiler.topi import qelementwise

    x = infos[0]
    packed = bool(node.attrs.get("packed"))
    shape = tuple(int(v) for v in x.shape)
    if x.dtype != np.int8 or len(shape) < 3 or (packed and len(shape) != 6):
        raise UnsupportedOnTarget(f"node {node.name!r} (QGlobalAveragePool): an int8 input of 3 or more axes (6 "
                                  f"packed), got {x.dtype} {shape}")
    axes = (2, 3) if packed else tuple(range(2, len(shape)))
    front, count = int(np.prod(shape[:axes[0]])), int(np.prod([shape[k] for k in axes]))
    back = int(np.prod(shape[axes[-1] + 1:]))
    p = node.attrs["qgap"]
    try:
        qelementwise.check_qgap(count, p)
    except te.TeError as exc:
        raise UnsupportedOnTarget(f"node {node.name!r} (QGlobalAveragePool): {exc}") from None
    key = ("QGlobalAveragePool", (front, count, back), p, target)

    def make():
        from compiler.topi.injective import schedule_data_gpu

        ins, y = qelementwise.qgap(front, count, back, p)
        if target == "cuda":
            return ins, y, lambda s: schedule_data_gpu(s, [y.op.inputs[0], y])
        return ins, y, lambda s: qelementwise.schedule_qgap_cpu(s, y)

    out_shape = tuple(1 if k in axes else d for k, d in enumerate(shape))
    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0]).reshape(front, count, back)], out_shape,
                  np.dtype(np.int8))


def _qparams(node: Node, infos, consts, x_shape) -> tuple[int, bool, np.ndarray, np.ndarray]:
    axis = int(node.attrs.get("axis", 1))
    if int(node.attrs.get("block_size", 0)):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): blocked quantization is not in the library")
    scale = const_input(consts, node.inputs[1], "scale", node).astype(np.float32).reshape(-1)
    zp = consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if len(node.inputs) > 2 and node.inputs[2] and zp is None:
        raise UnsupportedOnTarget(f"node {node.name!r}: the zero point must be a constant initializer")
    zpa = np.zeros(1, np.int32) if zp is None else np.asarray(zp).astype(np.int32).reshape(-1)
    per = scale.size > 1 or zpa.size > 1
    if per:
        nch = x_shape[axis % len(x_shape)]
        scale, zpa = np.broadcast_to(scale, (nch,)).copy(), np.broadcast_to(zpa, (nch,)).copy()
    return axis, per, np.ascontiguousarray(scale), np.ascontiguousarray(zpa)


def plan_quantize(node: Node, infos, consts, target: str) -> OpPlan:
    check_f32(node, infos)
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

    return OpPlan(key, make, lambda ins: [f32(ins[0]).reshape(shape), scale, zpa], tuple(x.shape), qdt)


def plan_dequantize(node: Node, infos, consts, target: str) -> OpPlan:
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


PLANNERS = {"QConv2D": plan_qconv, "QDense": plan_qdense, "QuantizeLinear": plan_quantize, "DequantizeLinear": plan_dequantize,
            "QAdd": plan_qbinary, "QMul": plan_qbinary, "QLookup": plan_qlookup, "PackActivation": plan_layout,
            "UnpackActivation": plan_layout, "PackedMaxPool": plan_packed_maxpool}
# numpy glue ops (plans.NUMPY_GLUE_OPS) that get a compiled kernel on llvm where their planner takes the node
COMPILED_GLUE = {"QGlobalAveragePool": plan_qgap}
