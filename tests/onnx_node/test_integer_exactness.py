"""Integer conv results vs the exact QDQ reference (issue 17 acceptance: equal except on exact ties).

The fused REQUANT epilogue (31-bit multiplier, 64-bit product, no pre-shift) makes the integer
results equal the QDQ reference; before it about 0.7% of outputs differed by one step.
"""
from __future__ import annotations

from tests.onnx_node.integer_exactness import count_differences


def test_never_more_than_one_step_off():
    counts = count_differences("ref")
    assert counts["beyond_one_step"] == 0, counts


def test_equal_to_qdq_except_on_ties():
    counts = count_differences("ref")
    assert counts["differ"] == 0, counts
