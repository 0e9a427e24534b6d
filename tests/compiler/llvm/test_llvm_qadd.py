"""The LLVM QAdd kernel equals the numpy integer QAdd bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend.plans.backend import TargetCpuBackend
from compiler.graph.ir import Node
from jit_runtime.host_ops.int_elementwise import choose_qadd, qadd


@pytest.mark.parametrize("shapes,relu", [(((1, 4, 5, 5, 1, 16), (1, 4, 5, 5, 1, 16)), False),
                                         (((2, 8, 3, 3), (2, 8, 1, 1)), True), (((7,), (1,)), False)])
def test_llvm_qadd_matches_numpy(shapes, relu):
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-128, 128, s).astype(np.int8) for s in shapes)
    p = choose_qadd(0.031, -7, 0.0047, 60, 0.05, -20, out_min=-20 if relu else -128)
    be = TargetCpuBackend("llvm", lazy=True)
    (got,) = be.run_node(Node("QAdd", ["a", "b"], ["y"], {"qadd": p}, "qadd"), [a, b])
    assert be.last_backend == "llvm"
    np.testing.assert_array_equal(got, qadd(a, b, p))


@pytest.mark.parametrize("scales", [(0.02, 0.004, 0.01), (1e-4, 1.0, 1.0)])  # shift <= 24 (int32) and > 24 (int64)
def test_llvm_qmul_and_qlookup_match_numpy(scales):
    from jit_runtime.host_ops.int_elementwise import choose_qmul, lookup_table, qlookup, qmul

    rng = np.random.default_rng(1)
    a, b = rng.integers(-128, 128, (2, 8, 5, 5)).astype(np.int8), rng.integers(-128, 128, (2, 8, 1, 1)).astype(np.int8)
    p = choose_qmul(scales[0], 3, scales[1], -128, scales[2], -5)
    be = TargetCpuBackend("llvm", lazy=True)
    (got,) = be.run_node(Node("QMul", ["a", "b"], ["y"], {"qmul": p}, "qmul"), [a, b])
    assert be.last_backend == "llvm"
    np.testing.assert_array_equal(got, qmul(a, b, p))
    table = lookup_table(lambda v: v * np.clip(v + 3, 0, 6) / 6, 0.05, 10, 0.03, -100)
    (got,) = be.run_node(Node("QLookup", ["a"], ["y"], {"table": table}, "lut"), [a])
    assert be.last_backend == "llvm"
    np.testing.assert_array_equal(got, qlookup(a, table))


@pytest.mark.parametrize("shape,packed,scales,zx", [((1, 5, 7, 7, 1, 16), True, (0.02, 0.03), -128),  # MobileNetV2's
                                                    ((2, 3, 4, 4, 1, 16), True, (0.02, 0.0005), 0),  # clipped both ways
                                                    ((2, 24, 3, 5), False, (0.02, 0.01), 17)])  # NCHW
def test_llvm_qgap_matches_numpy(shape, packed, scales, zx):
    """QGlobalAveragePool (numpy glue elsewhere) runs a compiled kernel on llvm: the same bytes as numpy's qgap."""
    from compiler.graph.ir import Graph
    from jit_runtime.host_ops.int_elementwise import choose_qgap, qgap

    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    axes = (2, 3)
    count = int(np.prod([shape[k] for k in axes]))
    p = choose_qgap(scales[0], zx, scales[1], -3, count)
    g = Graph()
    out_shape = tuple(1 if k in axes else d for k, d in enumerate(shape))
    g.inputs, g.outputs = ["x"], ["y"]
    g.set_info("x", shape, np.int8)
    g.set_info("y", out_shape, np.int8)
    n = Node("QGlobalAveragePool", ["x"], ["y"], {"qgap": p, "packed": packed}, "gap")
    g.nodes.append(n)
    be = TargetCpuBackend("llvm")
    be.prepare(g)
    dst = np.full(out_shape, 99, np.int8)
    (got,) = be.run_node_into(n, [x], [dst])
    assert be.last_backend == "llvm" and got is dst
    want = qgap(x, p, packed=packed)
    np.testing.assert_array_equal(got, want)
    assert want.min() < want.max()  # not a constant output
    if zx == 0:
        assert want.min() == -128 and want.max() == 127
    be.run_node_into(n, [x], [dst])  # the bound call of the second run: the same
    np.testing.assert_array_equal(dst, want)


def test_qgap_plan_declines_what_it_cannot_sum():
    """A uint8 input (or a packed one of the wrong rank) keeps numpy's qgap (the planner says why) on either
    target; an int8 one is planned on both."""
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans_int8 import plan_qgap
    from compiler.graph.ir import TensorInfo
    from jit_runtime.host_ops.int_elementwise import choose_qgap

    n = Node("QGlobalAveragePool", ["x"], ["y"], {"qgap": choose_qgap(0.1, 0, 0.1, 0, 4), "packed": False}, "gap")
    packed = Node("QGlobalAveragePool", ["x"], ["y"], {"qgap": choose_qgap(0.1, 0, 0.1, 0, 4), "packed": True}, "gap")
    for target in ("llvm", "cuda"):
        with pytest.raises(UnsupportedOnTarget, match=r"an int8 input of 3 or more axes \(6 packed\), got uint8"):
            plan_qgap(n, [TensorInfo((1, 2, 2, 2), np.dtype(np.uint8))], {}, target)
        with pytest.raises(UnsupportedOnTarget, match=r"got int8 \(1, 2, 2, 2\)"):
            plan_qgap(packed, [TensorInfo((1, 2, 2, 2), np.dtype(np.int8))], {}, target)
        plan = plan_qgap(n, [TensorInfo((1, 2, 2, 2), np.dtype(np.int8))], {}, target)
        assert plan.out_shape == (1, 2, 1, 1) and target in plan.key


def test_qgap_plan_declines_sums_int32_cannot_hold():
    """More than QGAP_MAX_COUNT elements per sum (an int32 sum could overflow) keeps numpy's qgap, with the limit
    in the message; a shift above 62 likewise."""
    from dataclasses import replace

    from compiler import te
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans_int8 import plan_qgap
    from compiler.graph.ir import TensorInfo
    from compiler.topi.qelementwise import QGAP_MAX_COUNT, check_qgap
    from jit_runtime.host_ops.int_elementwise import choose_qgap

    p = choose_qgap(0.1, 0, 0.1, 0, 4)
    n = Node("QGlobalAveragePool", ["x"], ["y"], {"qgap": p, "packed": False}, "gap")
    big = TensorInfo((1, 1, 4097, 2048), np.dtype(np.int8))  # 8,390,656 > 2**23 elements per sum
    with pytest.raises(UnsupportedOnTarget, match=f"1..{QGAP_MAX_COUNT}"):
        plan_qgap(n, [big], {}, "llvm")
    check_qgap(QGAP_MAX_COUNT, p)  # the limit itself is fine
    with pytest.raises(te.TeError, match=r"shift 63 \(0..62\)"):
        check_qgap(4, replace(p, shift=63))
