"""Lowering passes: DMA folding with pads, allocation errors, dependency tokens, vthread interleaving."""
import pytest

from compiler.backend.accel import OpBuilder
from compiler.tir.accel import AllocationError, format_ir, lower
from compiler.tir.accel.tokens import Op, insert_tokens
from compiler.tir.accel.dma import region_descs
from compiler.tir.accel.ir import Buffer
from compiler.te import placeholder
from compiler.topi.conv2d import ConvShape, conv2d_kernel
from compiler.topi.knobs import ConvKnobs
from isa import make_config

CFG = make_config("pynq-z1")


def test_dma_folds_rows_and_adds_pads():
    t = placeholder((2, 10, 12, 1, 16), "int8", "t")
    buf = Buffer("b", "inp", (2, 5, 14))
    # rows 3..7 (padded coords, pad offset 1) of all columns with one column of pad each side
    descs = region_descs(t, [0, 1, 1, 0, 0], [(0, 2), (3, 5), (0, 14), (0, 1), (0, 16)], buf)
    assert len(descs) == 2  # one per channel block; rows fold into y, columns into x
    d = descs[1]
    assert (d.y, d.x, d.stride, d.x_pad0, d.x_pad1, d.y_pad0) == (5, 12, 12, 1, 1, 0)
    assert d.dram == 1 * 120 + 2 * 12 and d.sram == 70


def test_dma_merges_contiguous_dims():
    t = placeholder((4, 6, 8, 1, 16), "int8", "t")
    buf = Buffer("b", "inp", (2, 3, 8))
    (d,) = region_descs(t, [0, 0, 0, 0, 0], [(1, 2), (2, 3), (0, 8), (0, 1), (0, 16)], buf)
    assert (d.y, d.x, d.stride, d.dram) == (2, 24, 48, 48 + 16)


def test_allocation_failure_is_clear():
    cs = ConvShape(1, 1, 4, 4, 56, 56, 3, 3, (1, 1), (1, 1, 1, 1))
    k = conv2d_kernel(CFG, cs, None, None, ConvKnobs(4, 56, 4, 2, "oc"))
    with pytest.raises(AllocationError, match="scratchpad needs .* Use smaller tiles"):
        lower(k.schedule, CFG)


def test_tokens_raw_war_and_loop_carried():
    ld = lambda k: Op("load", "load", {}, (), (k,))
    g = lambda r, w: Op("compute", "gemm", {}, r, w)
    st = lambda k: Op("store", "store", {}, (k,), ())
    ops = [ld("i0"), g(("i0",), ("a0",)), st("a0"), ld("i0"), g(("i0",), ("a0",)), st("a0")]
    counts = insert_tokens(ops)
    assert ops[1].pops == ["load"] and ops[0].pushes == ["compute"]          # RAW
    assert ops[3].pops == ["compute"] and "load" in ops[1].pushes           # WAR (buffer reused next iteration)
    assert ops[4].pops == ["load", "store"] and ops[2].pushes == ["compute"]  # loop-carried WAR on acc
    assert counts == {"load->compute": 2, "compute->store": 2, "compute->load": 1, "store->compute": 1}


def test_vthreads_double_buffers_and_interleave():
    cs = ConvShape(1, 1, 2, 4, 8, 8, 3, 3, (1, 1), (1, 1, 1, 1))
    k = conv2d_kernel(CFG, cs, None, None, ConvKnobs(1, 8, 2, 2, "oc"))
    func = lower(k.schedule, CFG)
    assert "for vthread" in format_ir(func.body)
    inp = next(b for b in func.buffers if b.scope == "inp")
    assert inp.copies == 2
    ops = OpBuilder(func, CFG).build()
    gemm_bases = [op.args["uops"][0, 1] for op in ops if op.kind == "gemm" and not op.args["reset"]]
    assert gemm_bases[0] != gemm_bases[1]  # consecutive GEMMs alternate between the two input copies
    assert any(op.pops for op in ops) and all(p in ("load", "compute", "store") for op in ops for p in op.pops)
