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
