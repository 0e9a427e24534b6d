"""onnx's fused Attention and RotaryEmbedding node tests on the ``llvm`` target: each case the import rewrites
take (float32; Attention: a float softmax) runs on llvm's kernels and matches onnx's expected outputs (masks,
windows, softcap, KV caches, padding lengths, QK outputs, fully masked rows; half and interleaved rotations, partial
rotation, position ids or per-token caches); the others are refused by name before anything runs."""
from __future__ import annotations

import onnx
import pytest

from tests.onnx_node.cases import load_cases, run_case, skip_reason
from tests.onnx_node.test_node_tests import _cache_dir


def _fused(config) -> list:
    ops = ("Attention", "RotaryEmbedding")
    return [c for c in load_cases(_cache_dir(config)) if c.model.graph.node[0].op_type in ops
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
    if node.op_type == "RotaryEmbedding":
        return all(types[t] == onnx.TensorProto.FLOAT for t in node.input[:3])
    ins = list(node.input) + [""] * (7 - len(node.input))
    floats = [ins[i] for i in (0, 1, 2, 4, 5) if ins[i]]
    return (attrs.get("softmax_precision", 1) == 1
            and all(types[t] == onnx.TensorProto.FLOAT for t in floats)
            and (not ins[3] or types[ins[3]] in (onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL)))


def test_most_fused_cases_run_on_llvm(request):
    cases = _fused(request.config)
    attention = [c for c in cases if c.model.graph.node[0].op_type == "Attention"]
    rotary = [c for c in cases if c.model.graph.node[0].op_type == "RotaryEmbedding"]
    assert len(attention) >= 90 and sum(_rewritten(c.model) for c in attention) >= 80
    assert len(rotary) >= 8 and all(_rewritten(c.model) for c in rotary)


def test_attention_case_on_llvm(attention_case):
    from compiler.backend.plans.oplan import UnsupportedOnTarget

    if _rewritten(attention_case.model):
        run_case(attention_case, "llvm")
    else:
        op = attention_case.model.graph.node[0].op_type
        with pytest.raises(UnsupportedOnTarget, match=f"operator {op} is not in the operator library"):
            run_case(attention_case, "llvm")
