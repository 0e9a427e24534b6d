"""Planners of the float32 operators: conv2d (plain or fused with bias/residual/activation), dense, batched matmul,
elementwise activations, math functions and arithmetic (also int8/uint8/int32 where exact), pooling, softmax and
layer normalization."""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.pooling import pool_axes
from compiler.graph.ir import Node, TensorInfo
from compiler.backend.plans.oplan import OpPlan, UnsupportedOnTarget, check_f32, const_input, f32
from compiler.topi import (conv2d_direct, conv2d_gpu, conv2d_winograd, dense_float, elementwise, gemm, gemm_gpu,
                           layernorm, lrn, pool, reduce, softmax)
from compiler.te import TeError
from compiler.topi.injective import schedule_injective

UNARY = {"Relu": "relu", "Clip": "clip", "Sigmoid": "sigmoid", "HardSwish": "hardswish", "HardSigmoid": "hardsigmoid",
         "LeakyRelu": "leakyrelu", "Erf": "erf", "Tanh": "tanh", "Sqrt": "sqrt", "Exp": "exp", "Log": "log",
         "Neg": "neg", "Reciprocal": "reciprocal", "Abs": "abs", "Floor": "floor", "Ceil": "ceil", "Round": "round",
         "Sign": "sign", "Softplus": "softplus", "Softsign": "softsign", "Elu": "elu", "Selu": "selu", "Celu": "celu",
         "Gelu": "gelu", "Mish": "mish", "ThresholdedRelu": "thresholdedrelu", "Swish": "swish",
         "Sin": "sin", "Cos": "cos"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "PRelu": "prelu"}
REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
          "ReduceSumSquare": "sum_square", "ReduceL1": "l1", "ReduceL2": "l2", "ReduceLogSumExp": "log_sum_exp",
          "ReduceLogSum": "log_sum"}


def conv_spec(node: Node, infos) -> conv2d_direct.Conv2dSpec:
    """The float conv2d geometry of a Conv/FusedConv node (raises :class:`UnsupportedOnTarget`)."""
    check_f32(node, infos)
    a = node.attrs
    x = infos[0]
    if len(x.shape) != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): only 2-D convolutions (4-D NCHW input) are in the "
                                  f"library, got input shape {x.shape}")
    w = infos[1]
    if w is None or len(w.shape) != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): the weight must be a 4-D OIHW tensor")
    spec = conv2d_direct.Conv2dSpec(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3],
                                    tuple(int(v) for v in a.get("strides", (1, 1))),
                                    tuple(int(v) for v in a.get("pads", (0, 0, 0, 0))),
                                    tuple(int(v) for v in a.get("dilations", (1, 1))), int(a.get("group", 1)))
    try:
        spec.check()
    except Exception as exc:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): {exc}") from None
    return spec


def plan_conv(node: Node, infos, consts, target: str,
              knobs: "conv2d_direct.CpuConvKnobs | conv2d_gpu.GpuConvKnobs | conv2d_direct.DirectGpuKnobs | None"
              = None) -> OpPlan:
    """``knobs``: the schedule's knobs (a tuning log's choice: :class:`~compiler.topi.conv2d_direct.CpuConvKnobs`
    on llvm; on cuda :class:`~compiler.topi.conv2d_gpu.GpuConvKnobs` for one-group convs, else
    :class:`~compiler.topi.conv2d_direct.DirectGpuKnobs`), default the library's."""
    a = node.attrs
    w = const_input(consts, node.inputs[1], "weight", node).astype(np.float32)
    spec = conv_spec(node, [infos[0], w])
    if target != "cuda":
        want = conv2d_direct.CpuConvKnobs
    else:
        want = conv2d_gpu.GpuConvKnobs if conv2d_gpu.gpu_conv_ok(spec) else conv2d_direct.DirectGpuKnobs
    if knobs is not None and not isinstance(knobs, want):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): target {target!r} takes {want.__name__} knobs "
                                  f"for this conv (groups={spec.groups}), got {type(knobs).__name__}")
    bias = consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if len(node.inputs) > 2 and node.inputs[2] and bias is None:
        raise UnsupportedOnTarget(f"node {node.name!r}: the conv bias must be a constant initializer")
    residual = bool(a.get("residual", False))
    act, params = a.get("activation"), tuple(a.get("act_params", ()))
    if target == "cuda" and conv2d_gpu.gpu_conv_ok(spec):
        return _plan_gpu_conv(spec, knobs, w, bias, residual, act, params)
    if target == "llvm" and knobs is None:
        from compiler.backend.llvm.host import float_lanes

        knobs = conv2d_winograd.default_knobs(spec, float_lanes())
    if knobs is not None and target == "llvm":
        if knobs.algo == "winograd":
            return _plan_winograd(spec, knobs, w, bias, residual, act, params)
        spec = knobs.apply(spec)
    elif knobs is not None:  # cuda, a grouped conv: the knobs' channel block
        try:
            spec = knobs.apply(spec)
        except TeError as exc:
            raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): {exc}") from None
    else:
        if target == "llvm":  # the CPU layout choice (1x1 convs: pixels in the vector lanes where they divide)
            from compiler.backend.llvm.host import float_lanes

            spec = conv2d_direct.cpu_spec(spec, float_lanes())
    wp = conv2d_direct.pack_weight(spec, w)
    ob = spec.block
    bp = None if bias is None else f32(bias).reshape(-1)
    key = ("conv2d", spec, ob, bp is not None, residual, act, params, target, knobs)

    def make():
        op = conv2d_direct.conv2d(spec, bias=bp is not None, residual=residual, act=act, act_params=params)
        if target == "cuda":
            return op.inputs, op.out, lambda s: conv2d_direct.schedule_gpu(op, s, knobs)
        return op.inputs, op.out, lambda s: conv2d_direct.schedule_cpu(op, s, knobs)

    args = _conv_args(conv2d_direct.input_shape(spec), wp, bp, conv2d_direct.output_shape(spec) if residual else None)
    return OpPlan(key, make, args, (spec.n, spec.o, spec.oh, spec.ow), np.dtype(np.float32), spec.macs)


def _conv_args(in_shape: tuple, wp: np.ndarray, bp: np.ndarray | None, res_shape: tuple | None):
    """A float conv plan's ``args(inputs)``: the data viewed as the kernel's ``in_shape``, the packed weight, the
    bias where given, and the fused residual (the node's fourth input) viewed as ``res_shape`` where given."""
    def args(ins):
        out = [f32(ins[0]).reshape(in_shape), wp]
        if bp is not None:
            out.append(bp)
        if res_shape is not None:
            out.append(f32(ins[3]).reshape(res_shape))
        return out
    return args


def _plan_gpu_conv(spec: conv2d_direct.Conv2dSpec, knobs: "conv2d_gpu.GpuConvKnobs | None", w: np.ndarray,
                   bias: np.ndarray | None, residual: bool, act: str | None, params: tuple) -> OpPlan:
    """A float conv2d on the GPU as the tiled implicit GEMM (:mod:`compiler.topi.conv2d_gpu`) with ``knobs``
    (default: :func:`~compiler.topi.conv2d_gpu.default_knobs`)."""
    knobs = knobs or conv2d_gpu.default_knobs(spec)
    knobs.check(spec)
    wp = conv2d_gpu.pack_weight(spec, w, knobs)
    bp = None if bias is None else f32(bias).reshape(-1)
    key = ("conv2d_gpu", spec, bp is not None, residual, act, params, knobs)

    def make():
        op = conv2d_gpu.conv2d(spec, knobs, bp is not None, residual, act, params)
        return op.inputs, op.out, lambda s: conv2d_gpu.schedule_gpu(op, s)

    args = _conv_args((spec.n, spec.c, spec.h, spec.w), wp, bp, conv2d_gpu.output_shape(spec) if residual else None)
    return OpPlan(key, make, args, (spec.n, spec.o, spec.oh, spec.ow), np.dtype(np.float32), spec.macs)


def _plan_winograd(spec: conv2d_direct.Conv2dSpec, knobs: conv2d_direct.CpuConvKnobs, w: np.ndarray,
                   bias: np.ndarray | None, residual: bool, act: str | None, params: tuple) -> OpPlan:
    """A float conv2d as the Winograd kernel (:mod:`compiler.topi.conv2d_winograd`) with ``knobs``."""
    conv2d_winograd.check_knobs(spec, knobs)
    wp = conv2d_winograd.pack_weight(spec, w, knobs.ob)
    bp = None if bias is None else f32(bias).reshape(-1)
    key = ("conv2d_winograd", spec, bp is not None, residual, act, params, knobs)

    def make():
        op = conv2d_winograd.op_for(spec, knobs, bp is not None, residual, act, params)
        return op.inputs, op.out, lambda s: conv2d_winograd.schedule_cpu(op, s, knobs)

    args = _conv_args((spec.n, spec.c, spec.h, spec.w), wp, bp,
                      conv2d_winograd.output_shape(spec, knobs.ob) if residual else None)
    return OpPlan(key, make, args, (spec.n, spec.o, spec.oh, spec.ow), np.dtype(np.float32), spec.macs)


def _check_gemm_knobs(node: Node, target: str, knobs) -> None:
    """UnsupportedOnTarget where ``knobs`` are not the GEMM knob class of ``target`` (cuda: GpuConvKnobs, llvm:
    CpuGemmKnobs)."""
    want = {"cuda": conv2d_gpu.GpuConvKnobs, "llvm": gemm.CpuGemmKnobs}.get(target)
    if knobs is not None and (want is None or not isinstance(knobs, want)):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): GEMM knobs apply to targets 'cuda' (GpuConvKnobs) "
                                  f"and 'llvm' (CpuGemmKnobs), got {type(knobs).__name__} for {target!r}")


def plan_dense(node: Node, infos, consts, target: str,
               knobs: "conv2d_gpu.GpuConvKnobs | gemm.CpuGemmKnobs | None" = None) -> OpPlan:
    """``knobs``: the GEMM schedule's knobs (a tuning log's choice: cuda's tiled GEMM, the llvm target's
    :class:`~compiler.topi.gemm.CpuGemmKnobs`), for a product that runs as a GEMM (at least
    :data:`GEMM_MIN_ROWS` rows, or two activations)."""
    check_f32(node, infos)
    a = node.attrs
    x = infos[0]
    _check_gemm_knobs(node, target, knobs)
    if node.op == "MatMul" and (node.inputs[1] not in consts or np.ndim(consts[node.inputs[1]]) != 2):
        return plan_batch_matmul(node, infos, consts, target, knobs)  # two activations (attention): a batched product
    lead = tuple(x.shape[:-1])  # MatMul: (..., K) @ (K, M) is a dense over the flattened leading axes
    if node.op == "MatMul" and len(x.shape) > 2:
        x = TensorInfo((int(np.prod(lead)), x.shape[-1]), x.dtype)
    if len(x.shape) != 2 or a.get("transA", 0):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): dense needs a 2-D, non-transposed input, got "
                                  f"{x.shape} transA={a.get('transA', 0)}")
    if float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): alpha/beta other than 1 are not in the library")
    w = const_input(consts, node.inputs[1], "weight", node).astype(np.float32)
    w_mk = w if a.get("transB", 0) else w.T  # (M, K)
    if node.op == "MatMul":
        w_mk = w.T
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = const_input(consts, node.inputs[2], "bias", node)
        if bias.size != w_mk.shape[0]:
            raise UnsupportedOnTarget(f"node {node.name!r}: the bias must have one value per output ({w_mk.shape[0]})")
    n, k, m = x.shape[0], x.shape[1], w_mk.shape[0]
    if w_mk.shape[1] != k:
        raise UnsupportedOnTarget(f"node {node.name!r}: input has K={k} but the weight {w.shape}")
    act, params = a.get("activation"), tuple(a.get("act_params", ()))
    bp = None if bias is None else f32(bias).reshape(-1)
    out_shape = lead + (m,) if node.op == "MatMul" else (n, m)
    if n >= GEMM_MIN_ROWS:  # many rows (a transformer's tokens): the tiled GEMM on W^T
        w_km = f32(w_mk.T)
        key, make = _gemm_kernel((n, k), (k, m), target, knobs, bias=bp is not None, act=act, act_params=params)
        return OpPlan(key, make, lambda ins: [f32(ins[0]).reshape(n, k), w_km] + ([bp] if bp is not None else []),
                      out_shape, np.dtype(np.float32), n * k * m)
    if knobs is not None:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): GEMM knobs apply to products of at least "
                                  f"{GEMM_MIN_ROWS} rows; this dense has {n} (the one-row schedule has no knobs)")
    wp = dense_float.pack_dense_weight(w_mk)
    key = ("dense", n, k, m, bp is not None, act, params, target)

    def make():
        op = dense_float.dense(n, k, m, bias=bp is not None, act=act, act_params=params)
        sched = dense_float.schedule_gpu if target == "cuda" else dense_float.schedule_cpu
        return op.inputs, op.out, lambda s: sched(op, s)

    def args(ins):
        return [f32(ins[0]).reshape(n, k), wp] + ([bp] if bp is not None else [])

    return OpPlan(key, make, args, out_shape, np.dtype(np.float32), n * k * m)


GEMM_MIN_ROWS = 4  # dense layers of at least this many rows run as gemm (the one-row classifier: dense_float)


def _gemm_kernel(sa: tuple, sb: tuple, target: str, knobs: "conv2d_gpu.GpuConvKnobs | gemm.CpuGemmKnobs | None" = None,
                 **epilogue) -> tuple:
    """``(key, make)`` of :func:`compiler.topi.gemm.gemm` for operands ``sa`` @ ``sb`` on ``target`` (llvm: tiles
    for this CPU's vector width, of ``knobs``' size; cuda: :func:`compiler.topi.gemm_gpu.gemm`, shared-memory
    tiles), for an :class:`OpPlan` whose arguments and output the caller gives."""
    if target == "cuda":
        knobs = knobs or gemm_gpu.default_knobs(sa, sb)

        def make_gpu():
            op = gemm_gpu.gemm(sa, sb, knobs, **epilogue)
            return op.inputs, op.out, lambda s: gemm_gpu.schedule_gpu(op, s)

        return ("gemm_gpu", sa, sb, tuple(sorted(epilogue.items())), knobs), make_gpu
    from compiler.backend.llvm.host import float_lanes

    lanes = float_lanes()
    m, k, n, batch = gemm.product_dims(sa, sb)
    knobs = knobs or gemm.default_cpu_knobs(m, k, n, int(np.prod(batch)), lanes)
    try:
        knobs.check(k)
    except TeError as exc:
        raise UnsupportedOnTarget(f"{sa} @ {sb}: {exc}") from None
    key = ("gemm", sa, sb, tuple(sorted(epilogue.items())), lanes, target, knobs)  # fields 1-3 as the cuda key's

    def make():
        op = gemm.gemm(sa, sb, lanes, knobs=knobs, **epilogue)
        return op.inputs, op.out, lambda s: gemm.schedule_cpu(op, s)

    return key, make


def plan_batch_matmul(node: Node, infos, consts, target: str,
                      knobs: "conv2d_gpu.GpuConvKnobs | gemm.CpuGemmKnobs | None" = None) -> OpPlan:
    """ONNX MatMul of float32 operands as numpy's ``matmul``: batched over the leading axes (broadcast), a 1-D
    operand a row (left) or a column (right) whose axis the result drops; the second operand an activation or a
    constant that is not a 2-D weight."""
    _check_gemm_knobs(node, target, knobs)
    xa, xb = infos[0], infos[1]
    if xb is None:
        xb = TensorInfo(np.shape(consts[node.inputs[1]]), np.asarray(consts[node.inputs[1]]).dtype)
    if xb.dtype != np.float32:
        raise UnsupportedOnTarget(f"node {node.name!r} (MatMul): operands {xa.dtype}/{xb.dtype}; the library "
                                  f"multiplies float32 operands")
    sa, sb = tuple(xa.shape), tuple(xb.shape)
    if not sa or not sb:
        raise UnsupportedOnTarget(f"node {node.name!r} (MatMul): scalar operand {sa} @ {sb}; MatMul takes >= 1-D")
    drop = ((-2,) if len(sa) == 1 else ()) + ((-1,) if len(sb) == 1 else ())  # result axes of 1-D operands
    sa, sb = ((1,) + sa if len(sa) == 1 else sa), (sb + (1,) if len(sb) == 1 else sb)
    try:
        batch = elementwise.broadcast_shape(sa[:-2], sb[:-2])
    except TeError:
        raise UnsupportedOnTarget(f"node {node.name!r} (MatMul): batch axes of {sa} and {sb} do not broadcast") from None
    if sa[-1] != sb[-2]:
        raise UnsupportedOnTarget(f"node {node.name!r} (MatMul): {sa} @ {sb}: inner sizes {sa[-1]} and {sb[-2]} differ")
    kernel_shape = batch + (sa[-2], sb[-1])
    out_shape = tuple(d for i, d in enumerate(kernel_shape) if i - len(kernel_shape) not in drop)
    key, make = _gemm_kernel(sa, sb, target, knobs)
    return OpPlan(key, make, lambda ins: [f32(ins[0]).reshape(sa), f32(ins[1]).reshape(sb)], out_shape,
                  np.dtype(np.float32), int(np.prod(kernel_shape)) * sa[-1])


def plan_layernorm(node: Node, infos, consts, target: str) -> OpPlan:
    """ONNX LayerNormalization (its first output) over axes ``axis..rank-1``, with a constant scale and bias; and
    RMSNormalization (a constant scale, no bias)."""
    check_f32(node, infos)
    if len([o for o in node.outputs if o]) > 1:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): the library computes the first output "
                                  f"only; the mean and inverse deviation outputs are used here")
    shape = tuple(infos[0].shape)
    axis = int(node.attrs.get("axis", -1))
    if not -len(shape) <= axis < len(shape):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): axis {axis} out of range for rank {len(shape)}")
    axis %= len(shape)
    norm = shape[axis:]
    rows, n = int(np.prod(shape[:axis])), int(np.prod(norm))

    def per_value(k: int, what: str) -> np.ndarray:
        v = const_input(consts, node.inputs[k], what, node).astype(np.float32)
        try:
            return f32(np.broadcast_to(v, norm).reshape(n))
        except ValueError:
            raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): the {what} {v.shape} does not "
                                      f"broadcast to the normalized shape {norm}") from None
    scale = per_value(1, "scale")
    bias = per_value(2, "bias") if len(node.inputs) > 2 and node.inputs[2] else None
    eps = float(np.float32(node.attrs.get("epsilon", 1e-5)))
    if node.op == "RMSNormalization":
        def make_rms():
            ins, stages = layernorm.rms_norm(rows, n, eps)
            sched = layernorm.schedule_gpu if target == "cuda" else layernorm.schedule_rms_cpu
            return ins, stages[-1], lambda s: sched(s, stages)

        return OpPlan(("rms_norm", rows, n, eps, target), make_rms, lambda ins: [f32(ins[0]).reshape(rows, n), scale],
                      shape)
    key = ("layer_norm", rows, n, eps, bias is not None, target)

    def make():
        ins, stages = layernorm.layer_norm(rows, n, eps, bias is not None)
        sched = layernorm.schedule_gpu if target == "cuda" else layernorm.schedule_cpu
        return ins, stages[-1], lambda s: sched(s, stages)

    return OpPlan(key, make, lambda ins: [f32(ins[0]).reshape(rows, n), scale] + ([bias] if bias is not None else []),
                  shape)


# uint8 has no TE dtype: uint8 elementwise ops compute in int16 (exact: results are cast back modulo 256)
_COMPUTE = {"uint8": "int16"}


def plan_unary(node: Node, infos, consts, target: str, kind: str | None = None, params: tuple = ()) -> OpPlan:
    """An elementwise activation or math function (``kind``, ``params``: given by :func:`plan_pow`, else from the
    node)."""
    x = infos[0]
    if kind is None:
        kind = UNARY[node.op]
        if node.op == "Gelu" and node.attrs.get("approximate", "none") == "tanh":
            kind = "gelu_tanh"
        if node.op == "Clip":
            params = _clip_params(node, consts)
        elif node.op in _ACT_PARAMS:
            params = _act_params_attrs(node)
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
        lo = float(np.asarray(const_input(consts, node.inputs[1], "min", node)).reshape(()))
    if len(node.inputs) > 2 and node.inputs[2]:
        hi = float(np.asarray(const_input(consts, node.inputs[2], "max", node)).reshape(()))
    return (None if lo is None else float(lo), None if hi is None else float(hi))


# the activations with attributes: (name, ONNX default) of each parameter, in the TE activation's order
_ACT_PARAMS = {"HardSigmoid": (("alpha", 0.2), ("beta", 0.5)), "LeakyRelu": (("alpha", 0.01),),
               "Elu": (("alpha", 1.0),), "Celu": (("alpha", 1.0),), "ThresholdedRelu": (("alpha", 1.0),),
               "Swish": (("alpha", 1.0),),
               "Selu": (("alpha", 1.6732632423543772), ("gamma", 1.0507009873554805))}


def _act_params_attrs(node: Node) -> tuple:
    return tuple(float(node.attrs.get(k, d)) for k, d in _ACT_PARAMS[node.op])


def plan_pow(node: Node, infos, consts, target: str) -> OpPlan:
    """``x ** y`` (float32): a constant scalar exponent folds into the kernel (small integers as products), else the
    elementwise binary form with broadcasting."""
    y = consts.get(node.inputs[1])
    if y is not None and np.size(y) == 1 and str(infos[0].dtype) == "float32":
        return plan_unary(node, infos, consts, target, "pow", (float(np.float32(np.ravel(y)[0])),))
    if y is not None:
        infos = [infos[0], TensorInfo(np.shape(y), np.asarray(y).dtype)]
    if any(str(t.dtype) != "float32" for t in infos):
        raise UnsupportedOnTarget(f"node {node.name!r} (Pow): operands {infos[0].dtype}/{infos[1].dtype}; the library "
                                  f"raises float32 to float32 powers")
    return plan_binary(node, infos, consts, target)


def plan_reduce(node: Node, infos, consts, target: str) -> OpPlan:
    """ONNX ReduceSum/Mean/Max/Min/SumSquare/L1/L2/LogSumExp of float32 over constant axes."""
    from jit_runtime.host_ops.math_kernels import reduce_axes

    check_f32(node, infos)
    shape = tuple(infos[0].shape)
    axes_in = None
    if len(node.inputs) > 1 and node.inputs[1]:
        axes_in = const_input(consts, node.inputs[1], "axes", node)
    axes = reduce_axes(node.attrs, len(shape), axes_in)
    keep = bool(node.attrs.get("keepdims", 1))
    out_shape = shape if axes is None else tuple(
        (1 if a in axes else d) for a, d in enumerate(shape) if keep or a not in axes)
    if axes is None or not shape:  # nothing reduced (empty axes with noop_with_empty_axes, or a scalar)
        axes = ()
    if any(shape[a] == 0 for a in axes):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): reduces an empty axis of {shape}")
    kind = REDUCE[node.op]
    key = ("reduce", kind, shape, axes, target)
    if not axes:
        kind, key = None, ("copy", shape, target)

    def make():
        if kind is None:
            ins, y = elementwise.unary(shape or (1,), "float32", None)
            return ins, y, lambda s: schedule_injective(s, y, target)
        ins, stages = reduce.reduce(shape, axes, kind)
        sched = reduce.schedule_gpu if target == "cuda" else reduce.schedule_cpu
        return ins, stages[-1], lambda s: sched(s, stages)

    return OpPlan(key, make, lambda ins: [f32(ins[0]).reshape(shape or (1,))], out_shape)


def plan_min_max(node: Node, infos, consts, target: str) -> OpPlan:
    """ONNX ``Min`` / ``Max`` / ``Mean`` of any number of float32 operands, numpy broadcasting."""
    return plan_sum(node, infos, consts, target, op=node.op.lower())


def plan_binary(node: Node, infos, consts, target: str) -> OpPlan:
    xa, xb = infos[0], infos[1]
    dt = str(xa.dtype)
    if xb.dtype != xa.dtype or dt not in ("float32", "int32", "int8", "uint8") or (
            dt != "float32" and node.op in ("Div", "PRelu")):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): operands {xa.dtype}/{xb.dtype}; the library has "
                                  f"float32 (and int8/uint8/int32 Add/Sub/Mul, wrapping) with equal dtypes")
    cdt = _COMPUTE.get(dt, dt)
    sa, sb = tuple(xa.shape), tuple(xb.shape)
    op = BINARY.get(node.op) or {"Pow": "pow"}[node.op]
    key = ("binary", op, sa, sb, cdt, target)
    out_shape = elementwise.broadcast_shape(sa, sb)

    def make():
        ins, y = elementwise.binary(sa, sb, cdt, op)
        return ins, y, lambda s: schedule_injective(s, y, target)

    def args(ins):
        return [np.ascontiguousarray(ins[0], dtype=cdt).reshape(sa or (1,)),
                np.ascontiguousarray(ins[1], dtype=cdt).reshape(sb or (1,))]

    return OpPlan(key, make, args, out_shape, np.dtype(dt))


def plan_pool(node: Node, infos, consts, target: str,
              knobs: "pool.CpuPoolKnobs | pool.PoolGpuKnobs | None" = None) -> OpPlan:
    """MaxPool (float32, int8, uint8), AveragePool, GlobalAveragePool. ``knobs``: a tuning log's choice, default
    the library's: the cuda schedule's :class:`~compiler.topi.pool.PoolGpuKnobs`, or on llvm the float32 MaxPool
    row schedule's :class:`~compiler.topi.pool.CpuPoolKnobs`."""
    want = {"cuda": pool.PoolGpuKnobs, "llvm": pool.CpuPoolKnobs}.get(target)
    if knobs is not None and (want is None or not isinstance(knobs, want)):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): pooling knobs apply to targets 'cuda' "
                                  f"(PoolGpuKnobs) and 'llvm' (CpuPoolKnobs), got {type(knobs).__name__} for "
                                  f"{target!r}")
    if isinstance(knobs, pool.CpuPoolKnobs) and node.op != "MaxPool":
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): the llvm target's pooling knobs apply to float32 "
                                  f"MaxPools whose rows take pixel vectors")
    if isinstance(knobs, pool.PoolGpuKnobs):
        try:
            knobs.check()
        except TeError as exc:
            raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): {exc}") from None
    x = infos[0]
    if node.op != "MaxPool" or str(x.dtype) not in ("int8", "uint8"):
        check_f32(node, infos)
    cdt = _COMPUTE.get(str(x.dtype), str(x.dtype))
    a = node.attrs
    if node.op == "GlobalAveragePool" and len(x.shape) >= 3 and len(x.shape) != 4:  # 1-D, 3-D, ...: pool (N, C, S, 1)
        n, c = x.shape[:2]
        s = int(np.prod(x.shape[2:]))
        flat = plan_pool(node, [TensorInfo((n, c, s, 1), x.dtype)], consts, target, knobs)
        out = tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2)
        return OpPlan(flat.key, flat.make, lambda ins: flat.args([f32(ins[0]).reshape(n, c, s, 1)]), out,
                      flat.out_dtype, flat.macs)
    if len(x.shape) != 4:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): only 2-D pooling (NCHW) is in the library")
    n, c, h, w = x.shape
    if node.op == "GlobalAveragePool" and target == "llvm":
        key = ("gap_cpu", tuple(x.shape), target)

        def make_gap_cpu():
            ins, y, part = pool.global_avg_pool_cpu(n, c, h * w)
            return ins, y, lambda s: pool.schedule_gap_cpu(s, y, part)

        return OpPlan(key, make_gap_cpu, lambda ins: [f32(ins[0]).reshape(n, c, h * w)], (n, c, 1, 1))
    tuned = (knobs,) if isinstance(knobs, pool.PoolGpuKnobs) else ()  # the untuned plan's key stays as it was
    if node.op == "GlobalAveragePool":
        key = ("gap", tuple(x.shape), target) + tuned

        def make_gap():
            ins, y = pool.global_avg_pool(n, c, h, w)
            if target == "cuda":
                return ins, y, lambda s: pool.schedule_gpu(s, [y.op.inputs[0], y], knobs)
            return ins, y, lambda s: pool.schedule_cpu(s, [y.op.inputs[0], y])

        return OpPlan(key, make_gap, lambda ins: [f32(ins[0])], (n, c, 1, 1))
    if len(node.outputs) > 1 and node.outputs[1]:
        raise UnsupportedOnTarget(f"node {node.name!r}: MaxPool's Indices output is not in the library")
    if any(int(d) != 1 for d in a.get("dilations") or (1, 1)):
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): dilated pooling is not in the library")
    ax = pool_axes(a, (h, w))
    spec = pool.PoolSpec(n, c, h, w, ax[0].k, ax[1].k, (ax[0].s, ax[1].s),
                         (ax[0].begin, ax[1].begin, ax[0].end, ax[1].end), ax[0].out, ax[1].out)
    include = bool(a.get("count_include_pad", 0))
    key = (node.op, spec, include, cdt, target) + tuned

    rows = None
    if node.op == "MaxPool" and cdt == "float32" and target == "llvm":
        from compiler.backend.llvm.host import float_lanes

        rows = pool.default_pool_knobs(spec, float_lanes())
    if isinstance(knobs, pool.CpuPoolKnobs):
        if rows is None:
            raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): pooling knobs apply to float32 MaxPools "
                                      f"whose rows take pixel vectors; this pool runs the plain schedule")
        try:
            knobs.check(spec)
        except TeError as exc:
            raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): {exc}") from None
        rows = knobs
    if rows is not None:  # pixels in the vector lanes over a padded plane per channel (the select per tap ran 4x ORT)
        key = key + (rows,)

    def make():
        if rows is not None:
            ins, y, pad, window = pool.max_pool_rows(spec, rows.xt, rows.yt)
            return ins, y, lambda s: pool.schedule_rows_cpu(s, y, pad, window, rows)
        ins, y, stages = pool.float_pool(node.op, spec, include, cdt)
        if target == "cuda":
            return ins, y, lambda s: pool.schedule_gpu(s, stages, knobs)
        return ins, y, lambda s: pool.schedule_cpu(s, stages)

    return OpPlan(key, make, lambda ins: [np.ascontiguousarray(ins[0], dtype=cdt)], (n, c, spec.oh, spec.ow),
                  np.dtype(x.dtype))


def plan_softmax(node: Node, infos, consts, target: str) -> OpPlan:
    """Softmax or SafeSoftmax (``topi/softmax``; safe: all -inf rows give zeros) or LogSoftmax (``topi/reduce``)
    over one axis."""
    check_f32(node, infos)
    x = infos[0]
    shape = tuple(x.shape)
    if not shape:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): needs an input of rank >= 1")
    axis = int(node.attrs.get("axis", -1)) % len(shape)
    lib, op = (reduce, reduce.log_softmax) if node.op == "LogSoftmax" else (softmax, softmax.softmax)
    extra = {"safe": True} if node.op == "SafeSoftmax" else {}
    key = (node.op, shape, axis, target)

    def make():
        ins, stages = op(shape, axis, **extra)
        sched = lib.schedule_gpu if target == "cuda" else lib.schedule_cpu
        return ins, stages[-1], lambda s: sched(s, stages)

    return OpPlan(key, make, lambda ins: [f32(ins[0])], shape)


def plan_batchnorm(node: Node, infos, consts, target: str) -> OpPlan:
    """Inference BatchNormalization that no Conv absorbed (e.g. pre-activation blocks): a per-channel affine."""
    check_f32(node, infos)
    shape = tuple(infos[0].shape)
    if len(shape) < 2:
        raise UnsupportedOnTarget(f"node {node.name!r} (BatchNormalization): input must be (N, C, ...), got {shape}")
    gamma, beta, mean, var = (const_input(consts, node.inputs[k], what, node).astype(np.float64).reshape(-1)
                              for k, what in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "variance")))
    k = gamma / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
    scale, shift = f32(k), f32(beta - mean * k)
    key = ("channel_affine", shape, target)

    def make():
        ins, y = elementwise.channel_affine(shape)
        return ins, y, lambda s: schedule_injective(s, y, target)

    return OpPlan(key, make, lambda ins: [f32(ins[0]), scale, shift], shape)


def plan_sum(node: Node, infos, consts, target: str, op: str = "add") -> OpPlan:
    """ONNX ``Sum`` (``op="add"``), ``Min`` or ``Max`` of any number of float32 operands (numpy broadcasting)."""
    infos = [t if t is not None else TensorInfo(np.shape(consts[i]), np.asarray(consts[i]).dtype)
             for t, i in zip(infos, node.inputs)]
    dts = sorted({str(t.dtype) for t in infos})
    if dts != ["float32"]:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): operand dtypes {dts}; the library takes float32 "
                                  f"operands")
    dt = "float32"
    shapes = [tuple(t.shape) for t in infos]
    try:
        out_shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise UnsupportedOnTarget(f"node {node.name!r} (Sum): shapes {shapes} do not broadcast") from None
    key = ("sum", op, tuple(shapes), dt, target)

    def make():
        ins, y = elementwise.sum_n(shapes, dt, op)
        return ins, y, lambda s: schedule_injective(s, y, target)

    def args(ins):
        return [np.ascontiguousarray(a, dtype=dt).reshape(sh or (1,)) for a, sh in zip(ins, shapes)]

    return OpPlan(key, make, args, out_shape, np.dtype(dt))


def plan_lrn(node: Node, infos, consts, target: str) -> OpPlan:
    """ONNX ``LRN`` across channels (float32)."""
    check_f32(node, infos)
    shape = tuple(infos[0].shape)
    a = node.attrs
    if "size" not in a or int(a["size"]) < 1:
        raise UnsupportedOnTarget(f"node {node.name!r} (LRN): attribute size (>= 1) is required, got {a.get('size')}")
    if len(shape) < 3:
        raise UnsupportedOnTarget(f"node {node.name!r} (LRN): input must be (N, C, D1, ...), got {shape}")
    params = (int(a["size"]), float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75)), float(a.get("bias", 1.0)))
    if params[3] <= 0:
        raise UnsupportedOnTarget(f"node {node.name!r} (LRN): bias must be > 0 (the base of the power), got {params[3]}")
    key = ("lrn", shape, params, target)

    def make():
        ins, stages = lrn.lrn(shape, *params)
        sched = pool.schedule_gpu if target == "cuda" else pool.schedule_cpu
        return ins, stages[-1], lambda s: sched(s, stages)

    return OpPlan(key, make, lambda ins: [f32(ins[0])], shape)


PLANNERS = {"Conv": plan_conv, "FusedConv": plan_conv, "Gemm": plan_dense, "FusedDense": plan_dense, "MatMul": plan_dense,
            "MaxPool": plan_pool, "AveragePool": plan_pool, "GlobalAveragePool": plan_pool, "Softmax": plan_softmax, "SafeSoftmax": plan_softmax,
            "BatchNormalization": plan_batchnorm, "Sum": plan_sum, "LRN": plan_lrn, "LayerNormalization": plan_layernorm,
            "RMSNormalization": plan_layernorm,
            **{k: plan_unary for k in UNARY}, **{k: plan_binary for k in BINARY}, "Pow": plan_pow,
            **{k: plan_reduce for k in REDUCE}, "LogSoftmax": plan_softmax, "Min": plan_min_max,
            "Max": plan_min_max, "Mean": plan_min_max}
