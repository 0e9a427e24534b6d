"""conv2d/dense on the simulator ("sim" backend) are bit-exact with apply_requant of an int64 reference."""
import numpy as np
import pytest

from compiler.backend.accel.backend import SimAccelBackend
from compiler.graph.accel_interface import pack_activation, pack_weight
from jit_runtime.host_ops.requant import Requant, apply_requant
from isa import make_config

CFG = make_config("pynq-z1")


def _ref_conv(x, w, bias, stride, pads, groups, rq, pad_value=0):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=pad_value)
    oh = (h + pads[0] + pads[2] - kh) // stride[0] + 1
    ow = (wd + pads[1] + pads[3] - kw) // stride[1] + 1
    acc = np.zeros((n, o, oh, ow), np.int64)
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky:ky + stride[0] * oh:stride[0], kx:kx + stride[1] * ow:stride[1]]
                acc[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, ky, kx].astype(np.int64))
    return apply_requant(acc, bias, rq)


def _run(be, n, c, o, h, k, s, p, groups=1, rq=None, bias=True, seed=0, pad_value=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, c, h, h)).astype(np.int8)
    w = rng.integers(-128, 128, (o, c // groups, k, k)).astype(np.int8)
    b = rng.integers(-5000, 5000, o).astype(np.int32) if bias else None
    rq = rq or Requant(shift=9, relu=True, out_max=127, out_min=0)
    pads = (p, p, p, p) if isinstance(p, int) else p
    if groups == 1:
        xp, wp = pack_activation(x, CFG.batch, CFG.block_in), pack_weight(w, CFG.block_out, CFG.block_in)
    else:
        xp = pack_activation(x, CFG.batch, CFG.block_in)
        wp = pack_weight(w, CFG.block_out, CFG.block_in)
    got = be.conv2d(xp, wp, b, stride=(s, s), padding=pads, groups=groups, requant=rq, pad_value=pad_value)
    exp = pack_activation(_ref_conv(x, w, b, (s, s), pads, groups, rq, pad_value), CFG.batch, CFG.block_out)
    assert got.dtype == np.int8 and got.shape == exp.shape
    assert np.array_equal(got, exp)
    return be.last_profile


@pytest.fixture(scope="module")
def be():
    return SimAccelBackend(CFG, device="sim-functional")


RESNET = [(56, 64, 64, 3, 1, 1), (56, 64, 64, 1, 1, 0), (56, 64, 128, 3, 2, 1), (56, 64, 128, 1, 2, 0),
          (28, 128, 128, 3, 1, 1), (28, 128, 256, 3, 2, 1), (28, 128, 256, 1, 2, 0), (14, 256, 256, 3, 1, 1),
          (14, 256, 512, 3, 2, 1), (14, 256, 512, 1, 2, 0)]


@pytest.mark.parametrize("h,c,o,k,s,p", RESNET, ids=[f"C{i + 2}" for i in range(10)])
def test_resnet18_layers_bit_exact(be, h, c, o, k, s, p):
    _run(be, 1, c, o, h, k, s, p)


@pytest.mark.parametrize("n,c,o,h,k,s,p", [
    (1, 3, 20, 9, 3, 1, 1),     # channels not a multiple of the block
    (1, 24, 40, 10, 3, 2, 1),   # stride 2, ragged blocks
    (2, 16, 16, 7, 1, 2, 0),    # batch 2, 1x1 stride 2
    (1, 16, 32, 8, 5, 1, 2),    # 5x5 kernel
    (1, 8, 8, 6, 3, 1, 0),      # padding 0, 3x3
])
def test_awkward_shapes(be, n, c, o, h, k, s, p):
    _run(be, n, c, o, h, k, s, p)


def test_asymmetric_padding_and_per_channel_requant(be):
    rq = Requant(pre_shift=2, multiplier=np.arange(1, 33) * 37, shift=np.arange(32) % 20 + 3, relu=False)
    _run(be, 1, 32, 32, 9, 3, 1, (1, 0, 2, 1), rq=rq)


@pytest.mark.parametrize("c,s,p,pad_value", [(16, 1, 1, -128), (3, 2, (1, 0, 2, 1), 37), (24, 1, 2, 5)])
def test_pad_value_fills_the_padding(be, c, s, p, pad_value):
    # the padding holds pad_value (an activation zero point), added by the LOADs' pad_value field
    _run(be, 1, c, 32, 9, 3, s, p, pad_value=pad_value)


def test_pad_value_reaches_the_load_instructions():
    from compiler.topi.conv2d import ConvShape
    from compiler.backend.accel.backend import Replay, compile_conv2d

    cs = ConvShape(1, 1, 1, 1, 6, 6, 3, 3, (1, 1), (1, 1, 1, 1), pad_value=-9)
    prog = Replay(CFG, compile_conv2d(CFG, cs, None, None), "sim-functional").program
    from isa import decode_stream

    insns = decode_stream(prog.dram[prog.insn_addr:prog.insn_addr + 16 * prog.n_insns], CFG)
    loads = [i for i in insns if type(i).__name__ == "Load" and i.mem.name == "INP"]
    assert loads and all(i.pad_value == -9 for i in loads if i.x_pad0 or i.x_pad1 or i.y_pad0 or i.y_pad1)
    assert any(i.pad_value == -9 for i in loads)
    with pytest.raises(ValueError, match="pad_value 200 must be an int8"):
        ConvShape(1, 1, 1, 1, 6, 6, 3, 3, (1, 1), (1, 1, 1, 1), pad_value=200).check()


def test_grouped_conv(be):
    _run(be, 1, 64, 32, 8, 3, 1, 1, groups=2)


def test_dense_bit_exact(be):
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (3, 70)).astype(np.int8)
    w = rng.integers(-128, 128, (20, 70)).astype(np.int8)
    b = rng.integers(-3000, 3000, 20).astype(np.int32)
    rq = Requant(multiplier=300, shift=16)
    got = be.dense(pack_activation(x, CFG.batch, CFG.block_in), pack_weight(w, CFG.block_out, CFG.block_in), b,
                   requant=rq)
    exp = apply_requant(x.astype(np.int64) @ w.T.astype(np.int64), b, rq)
    assert np.array_equal(got, pack_activation(exp, CFG.batch, CFG.block_out))


def test_profile_and_registration():
    from compiler.executor.registry import create_accel_backend

    be = create_accel_backend("sim", CFG)
    prof = _run(be, 1, 16, 16, 6, 3, 1, 1)
    assert prof["cycles"] > 0 and 0 < prof["utilization"] <= 1
    assert prof["macs"] == 6 * 6 * 16 * 16 * 9


def test_bad_inputs_raise(be):
    x = np.zeros((1, 1, 4, 4, 1, 16), np.int8)
    w = np.zeros((1, 2, 3, 3, 16, 16), np.int8)
    with pytest.raises(ValueError, match="weight has 2 input blocks"):
        be.conv2d(x, w, None, stride=(1, 1), padding=(1, 1, 1, 1), groups=1, requant=Requant())
