"""``conv2d_epilogue`` is the epilogue ``conv2d_kernel`` schedules (the backend re-derives per-call constants from it)."""
import numpy as np

from jit_runtime.host_ops.requant import Requant
from compiler.topi.conv2d import ConvShape, conv2d_compute, conv2d_epilogue, conv2d_kernel
from compiler.topi.knobs import ConvKnobs
from isa import make_config

CFG = make_config("pynq-z1")
CS = ConvShape(1, 1, 2, 2, 6, 6, 3, 3, (1, 1), (1, 1, 1, 1))


def test_epilogue_matches_the_kernels_constants_and_stages():
    n = CS.groups * CS.ocb * CFG.block_out
    bias = np.arange(n) - 7
    rq = Requant(pre_shift=1, multiplier=np.arange(n) + 3, shift=np.full(n, 6), relu=True, out_min=0, out_max=127)
    k = conv2d_kernel(CFG, CS, bias, rq, ConvKnobs(1, 2, 1, 1))
    ep = conv2d_epilogue(CFG, CS, conv2d_compute(CFG, CS)[3], bias, rq)
    assert len(ep.stages) == len(k.epilogue.stages)
    assert [t.shape for t, _ in ep.consts] == [t.shape for t, _ in k.epilogue.consts]
    for (_, a), (_, b) in zip(ep.consts, k.epilogue.consts):
        np.testing.assert_array_equal(a, b)


def test_no_requant_is_the_bare_accumulator():
    conv = conv2d_compute(CFG, CS)[3]
    ep = conv2d_epilogue(CFG, CS, conv, None, None)
    assert ep.out is conv and not ep.stages and not ep.consts
