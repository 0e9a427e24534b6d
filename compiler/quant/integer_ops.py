"""onnxruntime's ``quantize_dynamic`` layers on the accelerator: ``MatMulInteger`` and ``ConvInteger``.

``quantize_dynamic`` quantizes each activation at run time (``DynamicQuantizeLinear``: uint8, scale and zero point
from the tensor's range) and writes ``MatMulInteger(x, W, x_zp, W_zp)`` / ``ConvInteger(...)``, whose int32 result
``sum (x - x_zp)(W - W_zp)`` is then scaled in float on the host (``Cast -> Mul``). :func:`lower_integer_ops`
rewrites each one with a constant weight into an accelerator ``QDense``/``QConv2D`` whose int32 accumulators
are EXACTLY the ONNX definition:

* ``x`` is rebased to int8 (``x - 128``, zero point ``x_zp - 128``, host ``RebaseUint8``); ``W - W_zp`` is folded
  into the int8 weight at build time (refused, named, when it leaves int8);
* the run-time zero point becomes a per-channel bias ``-x_zp * sum(W - W_zp)`` (host ``ZeroPointBias``, a few
  integer ops per output channel; a build-time constant when ``x_zp`` is constant); a padded ``ConvInteger``
  pads on the host with the zero point (``Pad``), so the border holds the real zero;
* the accelerator stores int8 only: the weight's output channels are repeated once per byte of the int32 result
  (as many bytes as the weight's bound ``255 * max sum|W - W_zp|`` needs, usually 3) and each copy's epilogue
  shifts its byte down without clipping; ``JoinBytes`` (host) reassembles the int32 values
  (:mod:`jit_runtime.host_ops.zero_point`). The accelerator does ``bytes`` times the layer's MACs.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node
from jit_runtime.host_ops.zero_point import byte_count, byte_epilogue, zero_point_bias

INTEGER_OPS = ("MatMulInteger", "ConvInteger")


def has_integer_ops(g: Graph) -> bool:
    """Whether ``g`` holds quantize_dynamic's integer layers (a quantized model without QDQ pairs)."""
    return any(n.op in INTEGER_OPS for n in g.nodes)


def _host(n: Node, why: str) -> None:
    n.attrs["host_reason"] = why
    return None


def _weight(g: Graph, n: Node, out_axis: int):
    """``W - W_zp`` as int8 (zero point per tensor or per output channel), or a reason string."""
    w = g.constants.get(n.inputs[1])
    if w is None or w.dtype not in (np.int8, np.uint8):
        return "weight is not a constant int8/uint8 tensor"
    zp_name = n.inputs[3] if len(n.inputs) > 3 else ""
    zp = np.zeros((), np.int64) if not zp_name else g.constants.get(zp_name)
    if zp is None:
        return "weight zero point is not a constant"
    zp = np.asarray(zp, np.int64)
    if zp.size > 1:
        if zp.size != w.shape[out_axis]:
            return f"weight zero point has {zp.size} values for {w.shape[out_axis]} output channels"
        shape = [1] * w.ndim
        shape[out_axis] = -1
        zp = zp.reshape(shape)
    wz = w.astype(np.int64) - zp.reshape(zp.shape if zp.size > 1 else ())
    if wz.min(initial=0) < -128 or wz.max(initial=0) > 127:
        return "weight minus its zero point leaves int8 (the accelerator multiplies int8 weights)"
    return wz.astype(np.int8)


def _int8_input(g: Graph, new: list[Node], n: Node):
    """``(int8 activation, int8 zero point: constant int | run-time tensor name)`` of input 0 (a uint8 input is
    rebased by host ``RebaseUint8`` nodes), or a reason string."""
    x = n.inputs[0]
    info = g.tensors.get(x)
    if info is None or info.dtype not in (np.int8, np.uint8) or x in g.constants:
        return "input is not an int8/uint8 activation"
    zp_name = n.inputs[2] if len(n.inputs) > 2 else ""
    if zp_name and zp_name in g.tensors and int(np.prod(g.tensors[zp_name].shape, dtype=np.int64)) != 1:
        return "input zero point is not a scalar (per-row zero points are not lowered)"
    shift = 128 if info.dtype == np.uint8 else 0
    if shift:
        x8 = g.fresh_name(f"{x}/int8")
        g.set_info(x8, info.shape, np.int8)
        new.append(Node("RebaseUint8", [x], [x8], {}, f"{n.name}/rebase"))
        x = x8
    if not zp_name:
        return x, -shift
    if zp_name in g.constants:
        return x, int(np.asarray(g.constants[zp_name]).reshape(())) - shift
    if not shift:
        return x, zp_name
    z8 = g.fresh_name(f"{zp_name}/int8")
    g.set_info(z8, g.tensors[zp_name].shape, np.int8)
    new.append(Node("RebaseUint8", [zp_name], [z8], {}, f"{n.name}/rebase_zp"))
    return x, z8


def _bias(g: Graph, new: list[Node], n: Node, w2: np.ndarray, za, n_bytes: int) -> str:
    """The byte layer's bias: the zero-point term (constant or a run-time ``ZeroPointBias``) plus the byte offsets."""
    _rq, offsets = byte_epilogue(w2.shape[0], n_bytes)
    k = w2.shape[1]
    if isinstance(za, int):
        return g.add_constant(g.fresh_name(f"{n.name}/bias"), zero_point_bias(w2, za, 0, k, offsets, n_bytes))
    wc = g.add_constant(g.fresh_name(f"{n.name}/w_sums_of"), w2)
    b = g.fresh_name(f"{n.name}/zp_bias")
    g.set_info(b, (n_bytes * w2.shape[0],), np.int32)
    new.append(Node("ZeroPointBias", [wc, za], [b], {"zb": 0, "k": int(k), "base": offsets, "repeat": n_bytes},
                    f"{n.name}/zp_bias"))
    return b


def _lower_matmul(g: Graph, n: Node) -> list[Node] | None:
    w = _weight(g, n, 1)
    if isinstance(w, str):
        return _host(n, w)
    if w.ndim != 2:
        return _host(n, f"weight is {w.ndim}-D (a 2-D weight is lowered)")
    new: list[Node] = []
    xin = _int8_input(g, new, n)
    if isinstance(xin, str):
        return _host(n, xin)
    x, za = xin
    xs = tuple(g.tensors[x].shape)
    k, m = w.shape
    if len(xs) < 2 or xs[-1] != k:
        return _host(n, f"input shape {xs} does not end in the weight's {k} rows")
    wt = np.ascontiguousarray(w.T)  # (M, K): the dense weight layout
    n_bytes = byte_count(255 * int(np.abs(wt.astype(np.int64)).sum(axis=1).max(initial=0)))
    rq, _ = byte_epilogue(m, n_bytes)
    rows = int(np.prod(xs[:-1], dtype=np.int64))
    x2 = x
    if len(xs) != 2:
        x2 = g.fresh_name(f"{n.name}/rows")
        g.set_info(x2, (rows, k), np.int8)
        new.append(Node("Reshape", [x, g.add_constant(g.fresh_name(f"{n.name}/rows_shape"), np.array([rows, k]))],
                        [x2], {}, f"{n.name}/rows"))
    bias = _bias(g, new, n, wt, za, n_bytes)
    wq = g.add_constant(g.fresh_name(f"{n.name}/w_bytes"), np.tile(wt, (n_bytes, 1)))
    yb = g.fresh_name(f"{n.name}/bytes")
    g.set_info(yb, (rows, n_bytes * m), np.int8)
    new.append(Node("QDense", [x2, wq, bias], [yb], {"requant": rq, "int32_bytes": n_bytes}, n.name))
    y = n.outputs[0]
    y2 = g.fresh_name(f"{n.name}/int32") if len(xs) != 2 else y
    g.set_info(y2, (rows, m), np.int32)
    new.append(Node("JoinBytes", [yb], [y2], {"n_bytes": n_bytes, "axis": 1}, f"{n.name}/join_bytes"))
    if len(xs) != 2:
        new.append(Node("Reshape", [y2, g.add_constant(g.fresh_name(f"{n.name}/out_shape"), np.array([*xs[:-1], m]))],
                        [y], {}, f"{n.name}/out"))
    return new


def _lower_conv(g: Graph, n: Node) -> list[Node] | None:
    w = _weight(g, n, 0)
    if isinstance(w, str):
        return _host(n, w)
    if w.ndim != 4 or len(g.tensors[n.inputs[0]].shape) != 4:
        return _host(n, "only 2-D convolutions (NCHW) are lowered")
    if int(n.attrs.get("group", 1)) != 1:
        return _host(n, f"group {n.attrs.get('group')} (grouped ConvInteger is not lowered)")
    new: list[Node] = []
    xin = _int8_input(g, new, n)
    if isinstance(xin, str):
        return _host(n, xin)
    x, za = xin
    pads = [int(p) for p in n.attrs.get("pads", (0, 0, 0, 0))]
    attrs = {"strides": list(n.attrs.get("strides", (1, 1))), "pads": pads,
             "dilations": list(n.attrs.get("dilations", (1, 1))), "group": 1}
    if any(pads) and isinstance(za, int):
        attrs["pad_value"] = za  # the border holds the real zero
    elif any(pads):  # a run-time zero point: pad on the host with it
        nn_, c, h, wd = g.tensors[x].shape
        t, l, b, r = pads
        xp = g.fresh_name(f"{n.name}/padded")
        g.set_info(xp, (nn_, c, h + t + b, wd + l + r), np.int8)
        pv = g.add_constant(g.fresh_name(f"{n.name}/pads"), np.array([0, 0, t, l, 0, 0, b, r], np.int64))
        new.append(Node("Pad", [x, pv, za], [xp], {"mode": "constant"}, f"{n.name}/pad"))
        x, attrs["pads"] = xp, [0, 0, 0, 0]
    o = w.shape[0]
    w2 = w.reshape(o, -1)
    n_bytes = byte_count(255 * int(np.abs(w2.astype(np.int64)).sum(axis=1).max(initial=0)))
    rq, _ = byte_epilogue(o, n_bytes)
    bias = _bias(g, new, n, w2, za, n_bytes)
    wq = g.add_constant(g.fresh_name(f"{n.name}/w_bytes"), np.tile(w, (n_bytes, 1, 1, 1)))
    y = n.outputs[0]
    ys = tuple(g.tensors[y].shape)
    yb = g.fresh_name(f"{n.name}/bytes")
    g.set_info(yb, (ys[0], n_bytes * o, *ys[2:]), np.int8)
    new.append(Node("QConv2D", [x, wq, bias], [yb], dict(attrs, requant=rq, int32_bytes=n_bytes), n.name))
    new.append(Node("JoinBytes", [yb], [y], {"n_bytes": n_bytes, "axis": 1}, f"{n.name}/join_bytes"))
    return new


def lower_integer_ops(g: Graph) -> int:
    """Rewrite ``MatMulInteger``/``ConvInteger`` with constant weights in place (see the module docstring);
    returns how many. The others keep their host kernels, with ``attrs["host_reason"]`` saying why."""
    out: list[Node] = []
    done = 0
    for n in g.nodes:
        rep = None
        if n.op == "MatMulInteger":
            rep = _lower_matmul(g, n)
        elif n.op == "ConvInteger":
            rep = _lower_conv(g, n)
        if rep is None:
            out.append(n)
        else:
            out += rep
            done += 1
    g.nodes = out
    if done:
        g.remove_dead()
    return done
