"""MatMul of two activations (attention's ``Q x K^T`` and ``P x V``) in int8, on the accelerator.

:func:`lower_act_matmul` turns ``DQ(a) , DQ(b) -> MatMul [-> Relu|Clip] -> Q`` with per-tensor int8 operands
into ``QMatMul(a, b)``: exact int32 products ``(a - za)(b - zb)`` (zero points: onnxruntime's asymmetric uint8
activations after rebasing; 0 for the built-in PTQ), requantized by ``sa * sb / sy`` (host kernel
:func:`qmatmul`, the reference). :func:`unroll_qmatmul` then runs each one as accelerator dense layers: per
batch entry (``[..., M, K] x [..., K, N]``, heads as a batch loop) the operands are sliced (host, int8), ``b``
transposed to the dense weight layout ``(N, K)`` and a ``QDense`` computes the ``(M, N)`` block with the requant
epilogue; the blocks are concatenated back. The layout pass packs such run-time weights with a
``PackDenseWeight`` host node (weights of ordinary dense layers are packed at build time). Zero points stay
exact on the accelerator (:mod:`jit_runtime.host_ops.zero_point`): the weight-side one as extra MAC columns
(``RowSumDigits``), the input-side one as a run-time bias (``ZeroPointBias``).
"""
from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node
from jit_runtime.host_ops.requant import Requant, apply_requant, wrap_int32  # noqa: F401
from jit_runtime.host_ops.requant import qmatmul  # noqa: F401 (re-exported: the host kernel)




def lower_act_matmul(g: Graph, n: Node, prod, cons, act_params, epilogue_chain, q_params, mult_bits: int):
    """``(QMatMul node, removed nodes)`` for an int8 activation x activation MatMul, or a host reason string."""
    from compiler.quant.requant_params import choose_requant

    a, b = act_params(g, prod.get(n.inputs[0])), act_params(g, prod.get(n.inputs[1]))
    if a is None or b is None:
        return "operands are not per-tensor int8 DequantizeLinear activations"
    ashape, bshape = g.tensors[a[0]].shape, g.tensors[b[0]].shape
    if len(ashape) < 2 or len(bshape) < 2 or (len(bshape) > 2 and tuple(ashape[:-2]) != tuple(bshape[:-2])):
        return f"operand shapes {tuple(ashape)} x {tuple(bshape)}: batch axes must be equal (or b 2-D)"
    ep = epilogue_chain(g, cons, n.outputs[0])
    if ep is None:
        return "output is not followed by [Relu|Clip ->] QuantizeLinear (single consumer)"
    chain, q, relu, lo, hi = ep
    qp = q_params(g, q)
    if qp is None or g.tensors[q.outputs[0]].dtype != np.int8:
        return "output QuantizeLinear is not per-tensor int8"
    out_scale, out_zp = qp
    k = ashape[-1]
    out_min = -128 if lo is None else max(-128, int(np.rint(lo / out_scale)) + out_zp)
    out_max = 127 if hi is None else min(127, int(np.rint(hi / out_scale)) + out_zp)
    bound = int(k) * (128 + abs(a[2])) * (128 + abs(b[2]))  # |sum (a - za)(b - zb)|
    rq = choose_requant(a[1] * b[1] / out_scale, bound, relu=relu, out_min=out_min, out_max=out_max,
                        mult_bits=mult_bits)
    if out_zp:
        from dataclasses import replace

        rq = replace(rq, zero_point=out_zp)
    attrs = {"requant": rq, "in_scales": (a[1], b[1]), "out_scale": out_scale, "zero_points": (a[2], b[2])}
    return Node("QMatMul", [a[0], b[0]], [q.outputs[0]], attrs, n.name), [n, *chain, q]


def _dense_with_zero_points(g: Graph, new: list, tag: str, x: str, w: str, zx: int, zw: int, k: int,
                            rows_w: int, const, tmp) -> tuple[str, str, str, int]:
    """``(input, weight, bias, digit columns)`` of a QDense computing ``sum_k (x - zx)(w - zw)`` exactly (module
    :mod:`jit_runtime.host_ops.zero_point`): ``RowSumDigits`` columns on ``x`` and constant digit columns on ``w``
    for the ``zw`` term, a run-time ``ZeroPointBias`` for the ``zx`` term."""
    from jit_runtime.host_ops.zero_point import digit_columns, digit_weights

    bias = ""
    if zx:
        bias = g.fresh_name(f"{tag}/zp_bias")
        g.set_info(bias, (rows_w,), np.int32)
        new.append(Node("ZeroPointBias", [w], [bias], {"za": int(zx), "zb": int(zw), "k": int(k)}, f"{tag}/zp_bias"))
    n_dig = digit_columns(abs(zw) * 128 * k) if zw else 0
    if n_dig:
        rows_x = g.tensors[x].shape[0]
        xd = tmp(f"{tag}/x_digits", (rows_x, k + n_dig))
        new.append(Node("RowSumDigits", [x], [xd], {"zb": int(zw), "n_digits": n_dig}, f"{tag}/row_digits"))
        wd = tmp(f"{tag}/w_digits", (rows_w, k + n_dig))
        cols = const(f"{tag}/digit_w", np.broadcast_to(digit_weights(n_dig), (rows_w, n_dig)), np.int8)
        new.append(Node("Concat", [w, cols], [wd], {"axis": 1}, f"{tag}/w_digits"))
        x, w = xd, wd
    return x, w, bias, n_dig


def unroll_qmatmul(g: Graph) -> int:
    """Rewrite every ``QMatMul`` as per-batch ``QDense`` layers (see the module docstring); returns how many.

    With zero points ``(za, zb)`` the dense computes ``(a - za)(b - zb)`` exactly with digit columns and a
    run-time bias (:func:`_dense_with_zero_points`); when ``|za| > |zb|`` needs fewer digit columns it computes the
    transposed product ``(b^T - zb)(a^T - za)`` (``b``'s rows as the input, ``a`` as the run-time weight) and
    transposes the block back."""
    from jit_runtime.host_ops.zero_point import digit_columns

    new: list[Node] = []
    done = 0
    for n in g.nodes:
        if n.op != "QMatMul":
            new.append(n)
            continue
        a, b = n.inputs
        ash, bsh = tuple(g.tensors[a].shape), tuple(g.tensors[b].shape)
        y = n.outputs[0]
        m, k, nn = ash[-2], ash[-1], bsh[-1]
        batch = ash[:-2]
        r = int(np.prod(batch, dtype=np.int64)) if batch else 1
        za, zb = (int(v) for v in n.attrs.get("zero_points", (0, 0)))
        swap = bool(za or zb) and digit_columns(abs(za) * 128 * k) < digit_columns(abs(zb) * 128 * k)

        def tmp(tag: str, shape) -> str:
            name = g.fresh_name(f"{n.name}/{tag}")
            g.set_info(name, tuple(shape), np.int8)
            return name

        def const(tag: str, v, dtype=np.int64) -> str:
            return g.add_constant(g.fresh_name(f"{n.name}/{tag}"), np.ascontiguousarray(v, dtype))

        a3, b3 = a, b
        if len(ash) != 3:
            a3 = tmp("a3", (r, m, k))
            new.append(Node("Reshape", [a, const("a3_shape", [r, m, k])], [a3], {}, f"{n.name}/a3"))
        b_batched = len(bsh) > 2
        if b_batched and len(bsh) != 3:
            b3 = tmp("b3", (r, k, nn))
            new.append(Node("Reshape", [b, const("b3_shape", [r, k, nn])], [b3], {}, f"{n.name}/b3"))
        wt_shared = None
        if not b_batched:
            wt_shared = tmp("bt", (nn, k))
            new.append(Node("Transpose", [b], [wt_shared], {"perm": [1, 0]}, f"{n.name}/bt"))
        parts = []
        for i in range(r):
            ai = tmp(f"a{i}", (1, m, k))
            new.append(Node("Slice", [a3, const(f"s{i}", [i]), const(f"e{i}", [i + 1]), const(f"ax{i}", [0])], [ai], {},
                            f"{n.name}/a{i}"))
            a2 = tmp(f"a{i}_2d", (m, k))
            new.append(Node("Reshape", [ai, const(f"a{i}_shape", [m, k])], [a2], {}, f"{n.name}/a{i}_2d"))
            if b_batched:
                bi = tmp(f"b{i}", (1, k, nn))
                new.append(Node("Slice", [b3, const(f"bs{i}", [i]), const(f"be{i}", [i + 1]), const(f"bax{i}", [0])],
                                [bi], {}, f"{n.name}/b{i}"))
                wt = tmp(f"b{i}_t", (nn, k))
                new.append(Node("Reshape", [bi, const(f"b{i}_shape", [k, nn])], [tmp(f"b{i}_2d", (k, nn))], {},
                                f"{n.name}/b{i}_2d"))
                new.append(Node("Transpose", [new[-1].outputs[0]], [wt], {"perm": [1, 0]}, f"{n.name}/b{i}_t"))
            else:
                wt = wt_shared
            x, w, zx, zw, rows_w = (wt, a2, zb, za, m) if swap else (a2, wt, za, zb, nn)
            x, w, bias, n_dig = _dense_with_zero_points(g, new, f"{n.name}/batch{i}", x, w, zx, zw, k, rows_w, const,
                                                        tmp)
            yi = tmp(f"y{i}", (m, nn))
            yd = tmp(f"y{i}_t", (nn, m)) if swap else yi
            new.append(Node("QDense", [x, w, bias], [yd], {"requant": n.attrs["requant"], "runtime_weight": True,
                                                          "digit_columns": n_dig}, f"{n.name}/batch{i}"))
            if swap:
                new.append(Node("Transpose", [yd], [yi], {"perm": [1, 0]}, f"{n.name}/y{i}"))
            parts.append(yi)
        cat = tmp("rows", (r * m, nn)) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            new.append(Node("Concat", parts, [cat], {"axis": 0}, f"{n.name}/concat"))
        new.append(Node("Reshape", [cat, const("y_shape", list(g.tensors[y].shape))], [y], {}, f"{n.name}/out"))
        done += 1
    g.nodes = new
    return done
