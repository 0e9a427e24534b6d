"""Where the int8 pipeline's loops go parallel: its data-movement copies (the packed activation copy, the packed conv's
int16 padded input) from 2^18 elements (``injective.COPY_PARALLEL_ELEMENTS``, one threshold for both), the packed max
pool from 2^20 output elements x taps (``injective.PARALLEL_MIN``, as the float32 pools). Checked on the schedules
(no compilation), just below and at each threshold."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backend.plans.plans_int8 import plan_packed_maxpool
from compiler.graph.ir import Node, TensorInfo
from compiler.schedule import create_schedule
from compiler.topi import conv2d_int8, layout, requant_int
from compiler.topi.conv2d_direct import Conv2dSpec
from jit_runtime.host_ops.requant import Requant


def _parallel(stage) -> bool:
    return "parallel" in stage.loop_kinds.values()


@pytest.mark.parametrize("w,parallel", [(127, False), (128, True)])
def test_pack_copy_parallel_from_2_18_elements(w, parallel):
    """A 3-channel 128 x W int8 image packed into 16-channel blocks: 128 * W * 16 elements (W = 128: 262144 = 2^18)."""
    _, y = layout.pack((1, 3, 128, w), "int8", 1, 16)
    s = create_schedule(y)
    layout.schedule_pack_cpu(s, y)
    assert int(np.prod(y.shape)) == 128 * w * 16
    assert _parallel(s[y]) is parallel


@pytest.mark.parametrize("hw,parallel", [(125, False), (126, True)])
def test_packed_conv_padded_copy_parallel_from_2_18_elements(hw, parallel):
    """A 3x3 pad-1 conv of 16 channels on an HW x HW map, 6-pixel tiles (AVX2): its int16 padded copy has HW + 2
    columns x 16 channels and HW + 2 rows, plus the rows the last (ragged) tile reads past the map: 126 -> 126^2 =
    2646 tiles exactly, 128 x 128 x 16 = 2^18 elements; 125 -> 125^2 + 5 = 2605 tiles, the last ending in output row
    125 (one past the map), so 125 + 3 = 128 rows x 127 columns x 16 = 260096."""
    spec = conv2d_int8.PackedConvSpec(Conv2dSpec(1, 16, hw, hw, 16, 3, 3, (1, 1), (1, 1, 1, 1), dtype="int8"),
                                      1, 16, 16)
    rq = Requant(0, np.full(16, 1 << 20), np.full(16, 20), False, -128, 127)
    op = conv2d_int8.conv2d_packed(spec, requant_int.requant_stage(rq, 16), 256)
    s = create_schedule(op.out)
    conv2d_int8.schedule_packed(op, s)
    assert op.xt == 6
    assert tuple(op.pad.shape) == (1, 1, 128, 1, 128 if hw == 126 else 127, 16)
    assert _parallel(s[op.pad]) is parallel


@pytest.mark.parametrize("h,w,parallel", [(80, 90, False), (81, 91, True)])
def test_packed_max_pool_parallel_from_2_20_taps(h, w, parallel):
    """A 3x3 stride-1 pad-1 max pool of 16 packed channels: H * W * 16 outputs x 9 taps (80 x 90: 1036800 < 2^20;
    81 x 91: 1061424)."""
    node = Node("PackedMaxPool", ["x"], ["y"], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]},
                name="pool")
    plan = plan_packed_maxpool(node, [TensorInfo((1, 1, h, w, 1, 16), np.int8)], {}, "llvm")
    _, y, sched = plan.make()
    s = create_schedule(y)
    sched(s)
    assert tuple(y.shape) == (1, 1, h, w, 1, 16)
    assert _parallel(s[y]) is parallel
