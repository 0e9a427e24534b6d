"""onnx's backend node tests of every supported operator, on the ``ref`` and ``sim`` targets (float, CPU path).

Cases come from the installed onnx package at collection time (see :mod:`tests.onnx_node.cases`;
generated once per onnx version into pytest's cache folder). A case is skipped only when it is in
``SKIPS``, and even then it is compiled: unsupported types must be refused up front.
"""
from __future__ import annotations

import pytest

from tests.onnx_node.cases import check_skipped, load_cases, run_case, skip_reason

TARGETS = ("ref", "sim")


def _cache_dir(config):
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    return cache.mkdir("onnx_node") if hasattr(cache, "mkdir") else cache.makedir("onnx_node")


def pytest_generate_tests(metafunc):
    if "node_case" in metafunc.fixturenames:
        cases = load_cases(_cache_dir(metafunc.config))
        metafunc.parametrize("node_case", cases, ids=[c.name for c in cases])


def test_selection_covers_the_operators_fixed_here(request):
    """The harness selects the cases of these operators (a broken filter would silently select none)."""
    cases = load_cases(_cache_dir(request.config))
    ops = {n.op_type for c in cases for n in c.model.graph.node}
    assert {"MaxPool", "AveragePool", "Div", "Sum", "LRN", "Resize", "Slice", "Split", "Dropout", "Identity",
            "BatchNormalization", "Gemm", "Concat", "HardSwish", "HardSigmoid", "Reshape"} <= ops
    assert len(cases) > 400


@pytest.mark.parametrize("target", TARGETS)
def test_node(node_case, target):
    if skip_reason(node_case.name):
        check_skipped(node_case, target)
        pytest.skip(skip_reason(node_case.name))
    run_case(node_case, target)
