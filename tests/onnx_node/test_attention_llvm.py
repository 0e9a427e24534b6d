"""onnx's fused Attention node tests on the ``llvm`` target: each case the import rewrite takes (float32, float
softmax) runs on llvm's kernels and matches onnx's expected outputs (masks, windows, softcap, KV caches, padding
lengths, QK outputs, fully masked rows); the others are refused by name before anything runs."""
from __future__ import annotations

import onnx
import pytest

from tests.onnx_node.cases import load_cases, run_case, skip_reason
from tests.onnx_node.test_node_tests import _cache_dir


def _fused(config) -> list:
    return [c for c in load_cases(_cache_dir(config)) if c.model.graph.node[0].op_type == "Attention"
            and len(c.model.graph.node) == 1 and not skip_reason(c.name)]


def pytest_generate_tests(metafunc):
    if "attention_case" in metafunc.fixturenames:
        cases = _fused(metafunc.config)
        metafunc.parametrize("attention_case", cases, ids=[c.name for c in cases])


def _rewritten(model: onnx.ModelProto) -> bool:
    """What ``compiler.frontend.expand.expand_attention`` takes (its inputs float32, softmax in
    float), read from the case's model independently of the rewrite."""
    node = model.graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    types = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    ins = list(node.input) + [""] * (7 - len(node.input))
    floats = [ins[i] for i in (0, 1, 2, 4, 5) if ins[i]]
    return (attrs.get("softmax_precision", 1) == 1
            and all(types[t] == onnx.TensorProto.FLOAT for t in floats)
            and (not ins[3] or types[ins[3]] in (onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL)))


def test_most_fused_cases_run_on_llvm(request):
    cases = _fused(request.config)
    assert len(cases) >= 90 and sum(_rewritten(c.model) for c in cases) >= 80


def test_attention_case_on_llvm(attention_case):
    from compiler.backend.plans.oplan import UnsupportedOnTarget

    if _rewritten(attention_case.model):
        run_case(attention_case, "llvm")
    else:
        with pytest.raises(UnsupportedOnTarget, match="node 'Attention_0': operator Attention is not in the operator"):
            run_case(attention_case, "llvm")
