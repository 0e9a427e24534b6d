"""Per-channel constants (the fused REQUANT's records) load with each output-channel tile: bit-exact on every
tiling, and loaded once per thread and channel tile when channel tiles are the outer loop, once otherwise."""
import numpy as np
import pytest

from compiler.backend.accel.backend import compile_conv2d, run_compiled
from compiler.graph.accel_interface import pack_activation, pack_weight
from jit_runtime.host_ops.requant import Requant
from compiler.topi.conv2d import ConvShape
from compiler.topi.knobs import ConvKnobs
from isa import make_config
from tests.compiler.topi.test_conv2d_sim import _ref_conv

CFG = make_config("pynq-z1")
CS = ConvShape(1, 1, 2, 4, 6, 6, 1, 1, (1, 1), (0, 0, 0, 0))  # 32 -> 64 channels, 1x1, 6x6


@pytest.mark.parametrize("knobs,record_loads", [
    (ConvKnobs(1, 6, 2, 1, "oc", "oc"), 4),     # one thread: each channel tile's records once
    (ConvKnobs(1, 3, 2, 2, "oc", "oc"), 4),     # threads over channel tiles, two row tiles each
    (ConvKnobs(2, 2, 2, 2, "h", "oc"), 4),      # threads over rows: each thread loads each channel tile's
    (ConvKnobs(1, 3, 2, 2, "oc", "h"), 1),      # row tiles outermost: the whole layer's records at the start
    (ConvKnobs(4, 3, 2, 2, "h", "oc"), 1),      # per-thread copies would not fit the reservation: at the start
])
def test_records_per_channel_tile_bit_exact(knobs, record_loads):
    rng = np.random.default_rng(record_loads * 10 + knobs.oc_tile)
    x = rng.integers(-128, 128, (1, 32, 6, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (64, 32, 1, 1)).astype(np.int8)
    bias = rng.integers(-4000, 4000, 64)
    rq = Requant(0, rng.integers(1 << 19, 1 << 22, 64), rng.integers(18, 24, 64), False, -100, 120, None, 4)
    comp = compile_conv2d(CFG, CS, bias, rq, knobs)
    rec = next(t for t, a in comp.consts if t.dtype != "int32")  # the REQUANT records (WGT rows)
    loads = [op for op in comp.ops if op.kind == "load" and op.args["desc"].tensor is rec]
    assert len(loads) == record_loads
    k = comp.kernel
    xp = pack_activation(x, CFG.batch, CFG.block_in).reshape(k.data.shape)
    wp = pack_weight(w, CFG.block_out, CFG.block_in).reshape(k.weight.shape)
    out, _ = run_compiled(CFG, comp, {k.data: xp, k.weight: wp}, device="sim-functional")
    exp = pack_activation(_ref_conv(x, w, bias, (1, 1), (0, 0, 0, 0), 1, rq), CFG.batch, CFG.block_out)
    np.testing.assert_array_equal(out.reshape(exp.shape), exp)
