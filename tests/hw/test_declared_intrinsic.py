"""A designer's intrinsic declared HERE (not in the package) goes through encoding, the simulator, the
compiler's tensorize and the RTL with no package edit; bad declarations are rejected with clear errors.

The intrinsic is a transposed-weight GEMM, ``acc[b, o] += sum_i x[b, i] * wt[i, o]`` (the WGT row read
as BLOCK_IN x BLOCK_OUT), with a 3-cycle pipeline: it has no datapath generator, so the RTL elaborates
its semantics with its own multipliers. Beside it the fixture declares an ALU op, ``ABSD``
(``|dst - src|``) with its own 6-cycle pipeline and an RTL datapath different from (but equal to) its
semantics, and a numpy form for the simulator, so the random programs on the RTL harness also check a
per-op ALU timing and that the three forms agree.
"""
from __future__ import annotations

import numpy as np
import pytest

from isa import make_config
from isa.errors import ConfigError
from isa.declare import register_intrinsic, unregister_intrinsic
from isa.intrinsics import IntrinsicDecl, InsnField, OperandDecl, Timing, declarations, insn_class, intrinsics
from isa.texpr import reduce_sum

TINY = make_config("tiny")


def gemmt(**kw) -> IntrinsicDecl:
    args = dict(
        name="gemmt", opcode=6,
        axes=lambda cfg: {"b": cfg.batch, "i": cfg.block_in, "o": cfg.block_out},
        operands=(OperandDecl("x", "inp", ("b", "i")), OperandDecl("wt", "wgt", ("i", "o"))),
        out_axes=("b", "o"),
        semantics=lambda x, wt, b, i, o: reduce_sum(x[b, i] * wt[i, o], i),
        timing=Timing(ii=1, pipeline=3))
    args.update(kw)
    return IntrinsicDecl(**args)


ABSD_PIPELINE = 6


def absd_datapath(ops, a, b):
    """The RTL form of ABSD: one subtractor chosen by a comparison (the semantics uses max - min)."""
    return ops.select(ops.lt(a, b), ops.sub(b, a), ops.sub(a, b))


@pytest.fixture
def declared():
    from isa.alu import register_alu_op, unregister_alu_op

    decl = register_intrinsic(gemmt(), check_configs=("tiny",))
    register_alu_op("ABSD", 7, lambda ops, a, b: ops.sub(ops.max(a, b), ops.min(a, b)), "|dst - src| (test op)",
                    timing=Timing(1, ABSD_PIPELINE), datapath=absd_datapath,
                    numpy_fn=lambda a, b, width: np.abs(a - b))  # the simulator's form
    try:
        yield decl
    finally:
        unregister_intrinsic("gemmt")
        unregister_alu_op("ABSD")


def _reference(acc, inp, wgt, uops, insn, cfg):
    """Per-iteration numpy reference of the declared semantics (independent of the simulator's einsum path)."""
    acc = acc.astype(np.int64).copy()
    for i0 in range(insn.iter_out):
        for i1 in range(insn.iter_in):
            for d, s, w in uops:
                d2 = d + i0 * insn.dst_factor_out + i1 * insn.dst_factor_in
                s2 = s + i0 * insn.src_factor_out + i1 * insn.src_factor_in
                w2 = w + i0 * insn.wgt_factor_out + i1 * insn.wgt_factor_in
                wt = wgt[w2].reshape(cfg.block_in, cfg.block_out).astype(np.int64)
                acc[d2] += inp[s2].astype(np.int64) @ wt
    return acc


def test_encoding_asm_and_timing_follow_the_declaration(declared):
    from isa import decode, encode
    from isa.asm import assemble, disassemble
    from isa.encoding import layouts
    from isa.timing import exec_cycles

    cls = insn_class(declared)
    insn = cls(reset=False, uop_bgn=2, uop_end=5, iter_out=3, iter_in=2, dst_factor_out=4, src_factor_in=1,
               wgt_factor_out=2, overwrite=True)
    lay = layouts(TINY)["GEMMT"]
    assert lay.field("opcode").lo == 0 and encode(insn, TINY) & 0b111 == 6
    assert decode(encode(insn, TINY), TINY) == insn
    text = disassemble([insn])
    assert text.startswith("GEMMT ") and assemble(text) == [insn]
    assert exec_cycles(TINY, insn) == 3 * 2 * 3 + 3  # iterations x ii + the declared pipeline
    assert "gemmt" in intrinsics(TINY) and intrinsics(TINY)["gemmt"].expr == "acc[b, o] += sum[i](x[b, i] * wt[i, o])"


def test_alu_declaration_gives_timing_semantics_and_datapath(declared):
    from amaranth.hdl import Const, Module, signed

    from hw.alu import alu_lane
    from isa import Alu, Uop
    from isa.alu import alu_op
    from isa.timing import exec_cycles
    from tests.simulator.test_semantics import run_compute

    insn = Alu(op="ABSD", reset=False, uop_bgn=0, uop_end=2, iter_out=3, iter_in=1, dst_factor_out=2)
    assert exec_cycles(TINY, insn) == 3 * 2 + ABSD_PIPELINE
    rng = np.random.default_rng(5)
    acc = rng.integers(-1000, 1000, (16, TINY.batch, TINY.block_out)).astype(np.int32)
    sim = run_compute(TINY, [insn], [Uop(0, 8, 0), Uop(1, 9, 0)], acc=acc)
    want = acc.astype(np.int64).copy()
    for i0 in range(3):
        for d, src in ((0, 8), (1, 9)):
            want[d + 2 * i0] = np.abs(want[d + 2 * i0] - want[src])
    assert np.array_equal(sim.scratchpads["acc"][:16], want)
    calls = []
    op = alu_op("ABSD")
    object.__setattr__(op, "datapath", lambda ops, a, b: calls.append(1) or absd_datapath(ops, a, b))
    try:
        alu_lane(Module(), Const(7, 3), Const(5, signed(32)), Const(-2, signed(32)), 32)
    finally:
        object.__setattr__(op, "datapath", absd_datapath)
    assert calls == [1]  # the RTL lane is built from the declaration's datapath


def test_simulator_executes_the_declared_semantics(declared):
    from isa import Uop
    from tests.simulator.test_semantics import run_compute  # the compute-program harness of the simulator tests

    rng = np.random.default_rng(3)
    B, BI, BO = TINY.batch, TINY.block_in, TINY.block_out
    inp = rng.integers(-128, 128, (16, B, BI)).astype(np.int8)
    wgt = rng.integers(-128, 128, (8, BO, BI)).astype(np.int8)
    acc = rng.integers(-1000, 1000, (32, B, BO)).astype(np.int32)
    uops = [Uop(d, s, w) for d, s, w in ((0, 0, 0), (1, 3, 2), (1, 4, 5), (7, 9, 1))]  # dst 1 twice: a reduction
    insn = insn_class(declared)(False, 0, len(uops), 2, 2, dst_factor_out=8, dst_factor_in=2, src_factor_out=1,
                                src_factor_in=2, wgt_factor_in=1)
    sim = run_compute(TINY, [insn], uops, inp, wgt, acc)
    ref = _reference(acc, inp, wgt, [(u.dst, u.src, u.wgt) for u in uops], insn, TINY)
    assert np.array_equal(sim.scratchpads["acc"][:32], ref)


def _schedule(cfg, intr, nb=2, kb=3, mb=2):
    from compiler import te
    from compiler.schedule import create_schedule

    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    x = te.placeholder((nb, kb, B, BI), "int8", "x")
    w = te.placeholder((mb, kb, BI, BO), "int8", "w")  # transposed element: the intrinsic's wt[i, o]
    k = te.reduce_axis(kb, "k")
    i = te.reduce_axis(BI, "i")
    acc = te.compute((nb, mb, B, BO), lambda n, m, b, o: te.sum(
        x[n, k, b, i].astype("int32") * w[m, k, i, o].astype("int32"), [k, i]), name="acc")
    out = te.compute(acc.shape, lambda *a: acc[a].astype("int8"), name="out")
    s = create_schedule(out)
    xc = s.cache_read(x, "inp", [acc])
    wc = s.cache_read(w, "wgt", [acc])
    s[acc].set_scope("acc")
    n, m, b, o = s[out].leaf_iter_vars
    s[out].pragma(b, "dma_copy")
    for t in (acc, xc, wc):
        s[t].compute_at(s[out], m)
    sa = s[acc]
    n, m, b, o, k_, i_ = sa.leaf_iter_vars
    sa.reorder(n, m, k_, b, o, i_)
    sa.tensorize(b, intr)
    return x, w, s


def test_tensorize_builds_and_runs_on_simulator_and_rtl(declared):
    from compiler.backend.accel import build
    from compiler.tir.accel import TensorizeError
    from isa.intrinsics import gemm_intrinsic

    rng = np.random.default_rng(4)
    x, w, s = _schedule(TINY, intrinsics(TINY)["gemmt"])
    xv = rng.integers(-4, 5, x.shape).astype(np.int8)
    wv = rng.integers(-4, 5, w.shape).astype(np.int8)
    mod = build(s, TINY)
    out_sim, prof_sim = mod.run({x: xv, w: wv}, device="sim")
    ref = np.einsum("nkbi,mkio->nmbo", xv.astype(np.int64), wv.astype(np.int64)).astype(np.int8)
    assert np.array_equal(out_sim, ref)
    out_rtl, prof_rtl = mod.run({x: xv, w: wv}, device="rtl")
    assert np.array_equal(out_rtl, out_sim) and prof_rtl["cycles"] == prof_sim["cycles"]
    with pytest.raises(TensorizeError, match="wgt"):  # GEMM reads wgt[o, i]: the transposed body is not GEMM
        _schedule(TINY, gemm_intrinsic(TINY))


def test_random_programs_with_the_intrinsic_match_on_rtl(declared):
    from hw.cosim.harness import Harness
    from hw.random_programs import random_program
    from simulator import Simulator

    with Harness(TINY) as h:
        sim = Simulator(TINY)
        for seed in range(6):
            p = random_program(TINY, 30_000 + seed, tensor=("gemm", "gemmt", "dwmac"))
            img = p.dram.copy()
            s = sim.run(img, p.insn_addr, p.n_insns)
            r = h.run(p.dram, p.insn_addr, p.n_insns)
            assert (r.cycles, r.timeout) == (int(s.cycles), False), p.name
            assert np.array_equal(r.dram, img), p.name
        # back-to-back ABSD instructions: the compute unit's end time is the declared 6-cycle pipeline (with the
        # ALU family's 4 cycles the RTL would finish 2 cycles earlier per instruction)
        from isa import Alu, Finish, Load, MemType, Uop
        from tests.simulator.helpers import Prog

        pr = Prog(TINY, 1 << 14)
        ub = pr.place_uops([Uop(0, 1, 0), Uop(2, 3, 0)])
        pr.add(Load(mem=MemType.UOP, sram_base=0, dram_base=ub, y_size=1, x_size=2, x_stride=2),
               Alu(op="ABSD", reset=False, uop_bgn=0, uop_end=2, iter_out=3, iter_in=1, dst_factor_out=4,
                   src_factor_out=4),
               Alu(op="ABSD", reset=False, uop_bgn=0, uop_end=2, iter_out=1, iter_in=1), Finish())
        addr, n = pr.stream()
        s = Simulator(TINY).run(pr.dram.copy(), addr, n)
        r = h.run(pr.dram, addr, n)
        assert (r.cycles, r.timeout) == (int(s.cycles), False)


def test_fields_that_do_not_fit_are_rejected():
    before = [d.name for d in declarations()]
    with pytest.raises(ConfigError, match=r"pynq-z1.*GEMMT format needs 136 bits but a word has 128.*widest field"):
        register_intrinsic(gemmt(fields=(InsnField("scale", 8),)), check_configs=("tiny", "pynq-z1"))
    assert [d.name for d in declarations()] == before  # the registry is unchanged


def test_semantics_that_is_not_a_tensor_expression_is_rejected():
    with pytest.raises(ConfigError, match=r"semantics returned 42 \(int\), not a tensor expression"):
        register_intrinsic(gemmt(semantics=lambda x, wt, b, i, o: 42), check_configs=("tiny",))
    with pytest.raises(ConfigError, match=r"operand of '\*' is 2, not a tensor expression"):
        register_intrinsic(gemmt(semantics=lambda x, wt, b, i, o: reduce_sum(x[b, i] * 2, i)),
                           check_configs=("tiny",))
    with pytest.raises(ConfigError, match=r"operand wt is declared over axes \(i, o\) but indexed by \(o, i\)"):
        register_intrinsic(gemmt(semantics=lambda x, wt, b, i, o: reduce_sum(x[b, i] * wt[o, i], i)),
                           check_configs=("tiny",))
    with pytest.raises(ConfigError, match=r"reduce_sum over \['i'\]"):
        register_intrinsic(gemmt(semantics=lambda x, wt, b, i, o: x[b, i] * wt[i, o]), check_configs=("tiny",))


def test_other_bad_declarations_are_rejected():
    with pytest.raises(ConfigError, match=r"opcode 5 is taken by dwmac; free opcodes: 6, 7"):
        register_intrinsic(gemmt(opcode=5), check_configs=("tiny",))
    with pytest.raises(ConfigError, match=r"operand wt is in scope 'acc'"):
        register_intrinsic(gemmt(operands=(OperandDecl("x", "inp", ("b", "i")), OperandDecl("wt", "acc", ("i", "o")))),
                           check_configs=("tiny",))
    with pytest.raises(ConfigError, match=r"micro-op per cycle"):
        register_intrinsic(gemmt(timing=Timing(ii=2)), check_configs=("tiny",))
    with pytest.raises(ConfigError, match="built in"):
        unregister_intrinsic("dwmac")
    with pytest.raises(ConfigError, match=r"pipeline depth 0; it must be an integer in 2\.\.16"):
        register_intrinsic(gemmt(timing=Timing(1, 0)), check_configs=("tiny",))
    with pytest.raises(ConfigError, match=r"executor must be a factory executor\(cfg, scratchpads\)"):
        register_intrinsic(gemmt(executor=42), check_configs=("tiny",))
    with pytest.raises(ConfigError, match=r"term x\[b, i\] \* wt\[i, o\] does not use reduction axis j"):
        register_intrinsic(gemmt(axes=lambda cfg: {"b": cfg.batch, "i": cfg.block_in, "o": cfg.block_out, "j": 2},
                                 semantics=lambda x, wt, b, i, o, j: reduce_sum(x[b, i] * wt[i, o], (i, j))),
                           check_configs=("tiny",))


def test_bad_alu_declarations_are_rejected():
    from isa.alu import alu_ops, register_alu_op

    before = [o.name for o in alu_ops()]
    with pytest.raises(ValueError, match=r"ALU op TWOMUL: its fn multiplies 2 times; the ALU lane has one multiplier"):
        register_alu_op("TWOMUL", 9, lambda ops, a, b: ops.mul(ops.mul(a, b), b))
    with pytest.raises(ValueError, match=r"ALU op CONST: its fn\(ops, a, b\) must return one integer per element"):
        register_alu_op("CONST", 9, lambda ops, a, b: 42)
    with pytest.raises(ValueError, match=r"ALU op POP: .*not an elementwise function of the ALU primitives.*popcount"):
        register_alu_op("POP", 9, lambda ops, a, b: ops.popcount(a))
    with pytest.raises(ValueError, match=r"ALU op SLOW: initiation interval 2; .*one micro-op per cycle"):
        register_alu_op("SLOW", 9, lambda ops, a, b: ops.add(a, b), timing=Timing(ii=2))
    with pytest.raises(ValueError, match=r"ALU op DP2: its datapath multiplies 2 times"):
        register_alu_op("DP2", 9, lambda ops, a, b: ops.mul(a, b), datapath=lambda ops, a, b: ops.mul(ops.mul(a, b), a))
    with pytest.raises(ValueError, match=r"ALU op BADDP: its datapath gives -?\d+ but its fn gives -?\d+ for a=.*b="):
        register_alu_op("BADDP", 9, lambda ops, a, b: ops.add(a, b), datapath=lambda ops, a, b: ops.sub(a, b))
    with pytest.raises(ValueError, match=r"ALU op BADNP: its numpy_fn gives .* must compute the same function"):
        register_alu_op("BADNP", 9, lambda ops, a, b: ops.max(a, b), numpy_fn=lambda a, b, width: np.minimum(a, b))
    assert [o.name for o in alu_ops()] == before
