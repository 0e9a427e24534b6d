"""Overwrite GEMMs replace the accumulator reset; strided 1x1 convs load only the pixels they read."""
import numpy as np
import pytest

from compiler import te
from compiler.backend.accel.backend import SimAccelBackend, compile_conv2d, run_compiled
from compiler.backend.accel import OpBuilder
from compiler.graph.accel_interface import pack_activation, pack_weight
from compiler.tir.accel import lower
from compiler.tir.accel.dma import region_descs
from compiler.tir.accel.ir import Buffer
from jit_runtime.host_ops.requant import Requant, apply_requant
from compiler.te import placeholder
from compiler.topi.conv2d import ConvShape, conv2d_kernel
from compiler.topi.knobs import ConvKnobs
from isa import Gemm, make_config
from jit_runtime.command_queue import CommandQueue

CFG = make_config("pynq-z1")


def _run(cs, knobs, rq=None, seed=0):
    comp = compile_conv2d(CFG, cs, None, rq, knobs)
    rng = np.random.default_rng(seed)
    k = comp.kernel
    x = rng.integers(-128, 128, k.data.shape).astype(np.int8)
    w = rng.integers(-128, 128, k.weight.shape).astype(np.int8)
    out, prof = run_compiled(CFG, comp, {k.data: x, k.weight: w}, "sim")
    acc = te.evaluate(k.conv, {k.data: x, k.weight: w}).astype(np.int64)
    want = acc.astype(np.int8) if rq is None else apply_requant(acc, None, rq)
    return comp, out, want, prof


def _gemms(comp):
    return [op for op in comp.ops if op.kind == "gemm"]


@pytest.mark.parametrize("cs,knobs", [
    (ConvShape(1, 1, 4, 4, 12, 12, 1, 1, (1, 1), (0, 0, 0, 0)), ConvKnobs(2, 3, 4, 2, "oc")),   # one chunk
    (ConvShape(1, 1, 4, 4, 10, 10, 3, 3, (1, 1), (1, 1, 1, 1)), ConvKnobs(2, 2, 2, 2, "h")),    # 2 chunks, 3x3
    (ConvShape(1, 1, 3, 2, 9, 9, 3, 3, (2, 2), (1, 1, 1, 1)), ConvKnobs(1, 5, 1, 1, "oc")),     # ic_tile 1
])
def test_overwrite_gemms_replace_reset_and_are_bit_exact(cs, knobs):
    comp, out, want, _ = _run(cs, knobs, Requant(shift=6, relu=True, out_min=0, out_max=127))
    assert np.array_equal(out, want)
    g = _gemms(comp)
    assert not any(op.args["reset"] for op in g)
    n_tiles = (-(-cs.ocb // knobs.oc_tile)) * (-(-cs.oh // knobs.h_tile))
    assert sum(bool(op.args.get("overwrite")) for op in g) == n_tiles  # one first step per output tile


def test_instruction_stream_has_overwrite_and_no_reset_gemm():
    cs = ConvShape(1, 1, 2, 2, 8, 8, 1, 1, (1, 1), (0, 0, 0, 0))
    k = conv2d_kernel(CFG, cs, None, None, ConvKnobs(2, 4, 2, 1, "oc"))
    func = lower(k.schedule, CFG)

    def stream(overwrite):
        from compiler.backend.accel.emit import emit
        ops = OpBuilder(lower(k.schedule, CFG), CFG, overwrite=overwrite).build()
        q = CommandQueue(CFG, "sim")
        dram = {t: q.alloc(t.shape, np.int8 if t.dtype == "int8" else np.int32, name=t.name)
                for t in func.inputs + [func.output]}
        emit(ops, q, dram)
        return [i for i in q.finalize().instructions() if isinstance(i, Gemm)]

    on, off = stream(True), stream(False)
    assert any(g.overwrite for g in on) and not any(g.reset for g in on)
    assert any(g.reset for g in off) and not any(g.overwrite for g in off)


def test_push_gemm_overwrite_flag_shares_the_kernel():
    q = CommandQueue(CFG, "sim")

    def finit(k):
        k.push(0, 0, 0)
    k1 = q.push_gemm(finit, signature="g", overwrite=True)
    k2 = q.push_gemm(finit, signature="g")
    gemms = [i for i in q.instructions if isinstance(i, Gemm)]
    assert k1 is k2 and [g.overwrite for g in gemms] == [True, False]


def test_strided_dma_rows_of_single_elements():
    t = placeholder((2, 8, 10, 1, 16), "int8", "t")
    buf = Buffer("b", "inp", (2, 2, 5))
    descs = region_descs(t, [0, 0, 0, 0, 0], [(0, 2), (1, 2), (0, 5), (0, 1), (0, 16)], buf, scales=[1, 2, 2, 1, 1])
    assert len(descs) == 4  # one per (block, row)
    d = descs[3]  # block 1, view row 2 -> source row 4, every other pixel
    assert (d.y, d.x, d.stride) == (5, 1, 2)
    assert d.dram == 1 * 80 + 4 * 10 and d.sram == 1 * 10 + 1 * 5


@pytest.mark.parametrize("h,s", [(14, 2), (9, 2), (12, 3)])
def test_strided_1x1_loads_only_needed_pixels(h, s):
    cs = ConvShape(1, 1, 2, 2, h, h, 1, 1, (s, s), (0, 0, 0, 0))
    comp, out, want, _ = _run(cs, ConvKnobs(1, 2, 2, 2, "oc"))
    assert np.array_equal(out, want)
    loads = [op.args["desc"] for op in comp.ops if op.kind == "load" and op.args["mem"] == "inp"]
    assert loads and all(d.x == 1 and d.stride == s and d.y == cs.ow for d in loads)
    assert sum(d.y * d.x for d in loads) <= 2 * cs.icb * cs.oh * cs.ow  # no skipped pixel is loaded


def test_backend_replay_is_bit_exact_across_calls():
    be = SimAccelBackend(CFG, device="sim")
    rng = np.random.default_rng(3)
    rq = Requant(shift=8, relu=False, out_min=-128, out_max=127)
    outs = []
    for seed in range(2):
        x = rng.integers(-128, 128, (1, 32, 10, 10)).astype(np.int8)
        w = rng.integers(-128, 128, (32, 32, 1, 1)).astype(np.int8)
        b = rng.integers(-999, 999, 32).astype(np.int32)
        got = be.conv2d(pack_activation(x, 1, 16), pack_weight(w, 16, 16), b, stride=(2, 2), padding=(0, 0, 0, 0),
                        groups=1, requant=rq)
        acc = np.einsum("chw,oc->ohw", x[0, :, ::2, ::2].astype(np.int64), w[:, :, 0, 0].astype(np.int64))[None]
        assert np.array_equal(got, pack_activation(apply_requant(acc, b, rq), 1, 16))
        outs.append(be.last_profile["cycles"])
    assert len(be._replays) == 1 and outs[0] == outs[1]


@pytest.mark.parametrize("c,k,s", [(32, 3, 1), (24, 3, 2)])
def test_depthwise_runs_on_the_accelerator_as_block_diagonal_groups(c, k, s):
    be = SimAccelBackend(CFG, device="sim-functional")
    rng = np.random.default_rng(c)
    x = rng.integers(-128, 128, (1, c, 9, 9)).astype(np.int8)
    w = rng.integers(-128, 128, (c, 1, k, k)).astype(np.int8)
    b = rng.integers(-500, 500, c).astype(np.int32)
    rq = Requant(shift=7, relu=True, out_min=0, out_max=127)
    got = be.conv2d(pack_activation(x, 1, 16), pack_weight(w, 16, 16), b, stride=(s, s), padding=(1, 1, 1, 1),
                    groups=c, requant=rq)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh = (9 + 2 - k) // s + 1
    acc = np.zeros((1, c, oh, oh), np.int64)
    for ky in range(k):
        for kx in range(k):
            acc += xp[:, :, ky:ky + s * oh:s, kx:kx + s * oh:s] * w[None, :, 0, ky, kx, None, None]
    assert np.array_equal(got, pack_activation(apply_requant(acc, b, rq), 1, 16))
