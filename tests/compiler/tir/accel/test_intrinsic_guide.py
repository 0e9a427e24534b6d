"""The example of docs/intrinsics.md: declare a new ALU op, use it from an elementwise schedule, run it."""
import numpy as np
import pytest

import isa
from compiler import te
from compiler.backend.accel import build
from compiler.schedule import create_schedule
from isa.alu import unregister_alu_op
from isa.intrinsics import alu_intrinsic, intrinsics


@pytest.fixture
def absdiff():
    op = isa.register_alu_op("ABSDIFF", 6, lambda ops, a, b: ops.select(ops.lt(a, b), ops.sub(b, a), ops.sub(a, b)),
                             "dst = |dst - src|")
    yield op
    unregister_alu_op("ABSDIFF")


def _elementwise(cfg, rows, tile):
    B, BO = cfg.batch, cfg.block_out
    x = te.placeholder((rows, B, BO), "int32", "x")
    y = te.placeholder((rows, B, BO), "int32", "y")
    d = te.compute(x.shape, lambda i, b, o: te.alu("absdiff", x[i, b, o], y[i, b, o]), name="d")
    # each ALU stage is one instruction: clip is MAX then MIN
    lo = te.compute(x.shape, lambda i, b, o: te.max_(d[i, b, o], -128), name="lo")
    hi = te.compute(x.shape, lambda i, b, o: te.min_(lo[i, b, o], 127), name="hi")
    out = te.compute(x.shape, lambda i, b, o: hi[i, b, o].astype("int8"), name="out")
    s = create_schedule(out)
    xa = s.cache_read(x, "acc", [d])
    ya = s.cache_read(y, "acc", [d])
    for t in (d, lo, hi):
        s[t].set_scope("acc")
    io, ii = s[out].split(s[out].leaf_iter_vars[0], tile)
    s[out].pragma(ii, "dma_copy")
    for t in (xa, ya, d, lo, hi):
        s[t].compute_at(s[out], io)
    for t in (d, lo, hi):
        s[t].pragma(s[t].leaf_iter_vars[0], "alu")
    return x, y, out, s


def test_new_alu_op_runs_on_simulator(absdiff):
    cfg = isa.make_config("pynq-z1")
    assert "alu_absdiff" in intrinsics(cfg)
    assert alu_intrinsic(cfg, absdiff).expr.startswith("acc[b, o] = ABSDIFF")
    x, y, out, s = _elementwise(cfg, 40, 16)
    mod = build(s, cfg)
    kinds = {op.args.get("op") for op in mod.ops if op.kind == "alu"}
    assert "ABSDIFF" in kinds
    rng = np.random.default_rng(1)
    xv = rng.integers(-1000, 1000, x.shape).astype(np.int32)
    yv = rng.integers(-1000, 1000, y.shape).astype(np.int32)
    got, prof = mod.run({x: xv, y: yv}, device="sim")
    assert np.array_equal(got, np.clip(np.abs(xv.astype(np.int64) - yv), -128, 127).astype(np.int8))
    assert np.array_equal(got, te.evaluate(out, {x: xv, y: yv}))
    assert prof["cycles"] > 0


def test_unregistered_op_is_rejected():
    with pytest.raises(te.TeError, match="unknown ALU op"):
        te.alu("ABSDIFF", te.const(1), te.const(2))
