"""Random tensor-intrinsic declarations (tiny config) through registration, encoding and the simulator.

Each seed declares an intrinsic with random output/reduction axes and extents, random operand axes,
scopes (which operand is inp, which wgt; vector operands when an operand is smaller than its row), a
random sum of products as semantics, a random pipeline and maybe an extra instruction field. It must
encode/decode and assemble/disassemble to itself, cost ``iterations + pipeline`` cycles, and the
simulator's result must equal a per-iteration evaluation written here from the declaration's own
description (explicit loops over the axes, the documented vector-operand addressing), not from the
simulator's einsum path. GEMM's executor hook (the dense BLAS path) is checked against the generic
executor on random GEMM programs.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import isa
from isa import Finish, Uop
from isa.encoding import decode, encode, layouts
from isa.declare import register_intrinsic, unregister_intrinsic
from isa.intrinsics import InsnField, IntrinsicDecl, OperandDecl, Timing, insn_class, intrinsics, row_shape
from isa.texpr import reduce_sum
from isa.timing import exec_cycles
from simulator import Simulator
from simulator.tensor import TensorExecutor
from tests.simulator.helpers import Prog

TINY = isa.HwConfig.from_preset("tiny")
ROW = {s: int(np.prod(row_shape(TINY, s))) for s in ("inp", "wgt", "acc")}


def _wrap(v: int, bits: int) -> int:
    return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def random_spec(rng: np.random.Generator) -> dict:
    """A random valid declaration, as plain data: axes, operands (name, scope, axes), terms, pipeline, fields."""
    while True:
        n_out = ROW["acc"]
        if rng.random() < 0.5:
            out = {"p": n_out}
        else:
            d = int(rng.choice([d for d in range(1, n_out + 1) if n_out % d == 0]))
            out = {"p": d, "q": n_out // d}
        red = {f"r{k}": int(rng.integers(1, 5)) for k in range(int(rng.integers(0, 3)))}
        extents = {**out, **red}
        names = list(extents)
        ops = []
        for name in ("x", "y"):
            axes = [a for a in names if rng.random() < 0.6]
            rng.shuffle(axes)
            ops.append([name, tuple(axes)])
        scopes = ["inp", "wgt"]
        rng.shuffle(scopes)
        ok = True
        for op, sc in zip(ops, scopes):
            op.append(sc)
            n = int(np.prod([extents[a] for a in op[1]], dtype=np.int64))
            ok &= bool(op[1]) and ROW[sc] % n == 0
        if not ok or not set(names) <= set(ops[0][1]) | set(ops[1][1]):
            continue
        whole = set(names)
        cands = [("x", "y"), ("x", "x"), ("y", "y"), ("x",), ("y",)]
        axes_of = {o[0]: o[1] for o in ops}
        valid = [t for t in cands if whole <= {a for n in t for a in axes_of[n]}]
        terms = [("x", "y")] + [valid[int(k)] for k in rng.integers(0, len(valid), int(rng.integers(0, 2)))]
        fields = [(f"f{k}", int(rng.integers(1, 9)), bool(rng.integers(0, 2))) for k in range(int(rng.integers(0, 2)))]
        return {"out": tuple(out), "red": tuple(red), "extents": extents, "ops": ops, "terms": terms,
                "pipeline": int(rng.integers(2, 9)), "fields": fields}


def declare(spec: dict, name: str = "fz", opcode: int = 6) -> IntrinsicDecl:
    axes_of = {o[0]: o[1] for o in spec["ops"]}

    def semantics(**kw):
        e = None
        for t in spec["terms"]:
            v = None
            for n in t:
                acc = kw[n][tuple(kw[a] for a in axes_of[n])]
                v = acc if v is None else v * acc
            e = v if e is None else e + v
        return reduce_sum(e, [kw[a] for a in spec["red"]]) if spec["red"] else e

    return IntrinsicDecl(
        name=name, opcode=opcode, axes=lambda cfg: dict(spec["extents"]),
        operands=tuple(OperandDecl(n, sc, axes) for n, axes, sc in spec["ops"]), out_axes=spec["out"],
        semantics=semantics, timing=Timing(1, spec["pipeline"]),
        fields=tuple(InsnField(n, b, s) for n, b, s in spec["fields"]))


def reference(spec: dict, insn, uops, sp: dict) -> np.ndarray:
    """The declared computation iteration by iteration: operand index ``v`` is piece ``v % k`` of row ``v // k``."""
    ext = spec["extents"]
    acc = sp["acc"].astype(object).reshape(sp["acc"].shape[0], -1).copy()
    vals = {}
    for name, axes, sc in spec["ops"]:
        n = int(np.prod([ext[a] for a in axes], dtype=np.int64))
        vals[name] = (sc, axes, n, ROW[sc] // n)
    written: dict[int, int] = {}
    for i0, i1, u in itertools.product(range(insn.iter_out), range(insn.iter_in), uops):
        d = u.dst + i0 * insn.dst_factor_out + i1 * insn.dst_factor_in
        if insn.reset:
            acc[d] = 0
            continue
        idx = {"inp": u.src + i0 * insn.src_factor_out + i1 * insn.src_factor_in,
               "wgt": u.wgt + i0 * insn.wgt_factor_out + i1 * insn.wgt_factor_in}
        elems = {}
        for name, (sc, axes, n, k) in vals.items():
            row = sp[sc][idx[sc] // k].reshape(-1).astype(np.int64)
            piece = row[(idx[sc] % k) * n:(idx[sc] % k + 1) * n]
            elems[name] = piece.reshape([ext[a] for a in axes])
        new = []
        for o_idx in itertools.product(*[range(ext[a]) for a in spec["out"]]):
            total = 0
            for r_idx in itertools.product(*[range(ext[a]) for a in spec["red"]]):
                env = {**dict(zip(spec["out"], o_idx)), **dict(zip(spec["red"], r_idx))}
                for t in spec["terms"]:
                    p = 1
                    for n in t:
                        p *= int(elems[n][tuple(env[a] for a in vals[n][1])])
                    total += p
            new.append(total)
        if insn.overwrite:
            assert d not in written
            acc[d] = new
        else:
            acc[d] = [a + b for a, b in zip(acc[d], new)]
        written[d] = 1
    return np.vectorize(lambda v: _wrap(int(v), TINY.acc_width))(acc).astype(np.int64).reshape(sp["acc"].shape)


def run(cfg, insns, uops, inp, wgt, acc, generic: tuple[str, ...] = ()):
    """Preset scratchpads, run ``insns`` + FINISH; intrinsics named in ``generic`` use the generic executor."""
    sim = Simulator(cfg)
    for name in generic:
        sim._tensor[name] = TensorExecutor(cfg, sim.sp, intrinsics(cfg)[name])
    sim.sp.write_uops(0, isa.encode_uops(uops, cfg))
    for name, arr in (("inp", inp), ("wgt", wgt), ("acc", acc)):
        sim.scratchpads[name][:len(arr)] = arr
    p = Prog(cfg, 1 << 14)
    p.add(*insns, Finish())
    return sim, p.run(sim=sim)


def random_insn(rng, cls, spec, n_uops: int):
    kw = dict(reset=bool(rng.random() < 0.1), uop_bgn=0, uop_end=n_uops, iter_out=int(rng.integers(1, 4)),
              iter_in=int(rng.integers(1, 4)), src_factor_out=int(rng.integers(0, 3)),
              src_factor_in=int(rng.integers(0, 3)), wgt_factor_out=int(rng.integers(0, 3)),
              wgt_factor_in=int(rng.integers(0, 3)))
    if rng.random() < 0.3 and n_uops == 1:  # overwrite: every dst written once
        kw.update(overwrite=True, dst_factor_in=1, dst_factor_out=kw["iter_in"])
    else:
        kw.update(dst_factor_out=int(rng.integers(0, 3)), dst_factor_in=int(rng.integers(0, 3)))
    for n, bits, signed in spec["fields"]:
        kw[n] = int(rng.integers(-(1 << (bits - 1)), 1 << (bits - 1))) if signed else int(rng.integers(0, 1 << bits))
    return cls(**kw)


@pytest.mark.parametrize("seed", range(40))
def test_random_declaration_encodes_and_simulates_its_expression(seed):
    rng = np.random.default_rng(1000 + seed)
    spec = random_spec(rng)
    decl = register_intrinsic(declare(spec), check_configs=("tiny",))
    try:
        cls = insn_class(decl)
        intr = intrinsics(TINY)["fz"]
        assert intr.kind == "tensor" and set(intr.reduce_axes) == set(spec["red"])
        # encoding, asm and timing from the declaration
        for _ in range(5):
            insn = random_insn(rng, cls, spec, int(rng.integers(1, 4)))
            word = encode(insn, TINY)
            assert word & 0b111 == 6 and decode(word, TINY) == insn
            assert isa.assemble(isa.disassemble([insn])) == [insn]
            assert exec_cycles(TINY, insn) == insn.iter_out * insn.iter_in * insn.uop_end + spec["pipeline"]
        lay = layouts(TINY)["FZ"]
        for n, bits, signed in spec["fields"]:
            assert (lay.field(n).width, lay.field(n).signed) == (bits, signed)
        # the simulator against the declared expression
        B, BI, BO = TINY.batch, TINY.block_in, TINY.block_out
        inp = rng.integers(-128, 128, (64, B, BI)).astype(np.int8)
        wgt = rng.integers(-128, 128, (64, BO, BI)).astype(np.int8)
        acc = rng.integers(-1000, 1000, (32, B, BO)).astype(np.int32)
        k = {sc: ROW[sc] // int(np.prod([spec["extents"][a] for a in axes], dtype=np.int64))
             for _, axes, sc in spec["ops"]}
        n_uops = int(rng.integers(1, 4))
        uops = [Uop(int(rng.integers(0, 12)), int(rng.integers(0, min(40 * k["inp"], 200))),
                    int(rng.integers(0, min(40 * k["wgt"], 48)))) for _ in range(n_uops)]
        insn = random_insn(rng, cls, spec, n_uops)
        sim, res = run(TINY, [insn], uops, inp, wgt, acc)
        ref = reference(spec, insn, uops, {"inp": inp, "wgt": wgt, "acc": acc})
        assert np.array_equal(sim.scratchpads["acc"][:32], ref), (spec, insn, uops)
        n_it = insn.iter_out * insn.iter_in * n_uops
        assert res.cycles >= n_it + spec["pipeline"]
    finally:
        unregister_intrinsic("fz")


@pytest.mark.parametrize("seed", range(12))
def test_gemm_executor_hook_equals_the_generic_executor(seed):
    """GEMM's declaration carries the dense BLAS executor as its hook; it must agree with the generic path
    (results and cycles) on random programs, dense-plannable ones included."""
    rng = np.random.default_rng(2000 + seed)
    cfg = TINY
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    inp = rng.integers(-128, 128, (64, B, BI)).astype(np.int8)
    wgt = rng.integers(-128, 128, (32, BO, BI)).astype(np.int8)
    acc = rng.integers(-1000, 1000, (64, B, BO)).astype(np.int32)
    if seed % 2:  # an affine grid (the dense path): uop k -> (dst k, src k, wgt 0)
        uops = [Uop(k, k, 0) for k in range(int(rng.integers(1, 5)))]
    else:
        uops = [Uop(int(rng.integers(0, 8)), int(rng.integers(0, 20)), int(rng.integers(0, 10))) for _ in range(3)]
    insns = [isa.Gemm(reset=False, uop_bgn=0, uop_end=len(uops), iter_out=int(rng.integers(1, 4)),
                      iter_in=int(rng.integers(1, 4)), dst_factor_out=int(rng.integers(0, 9)),
                      dst_factor_in=int(rng.integers(0, 5)), src_factor_out=int(rng.integers(0, 9)),
                      src_factor_in=int(rng.integers(0, 5)), wgt_factor_out=int(rng.integers(0, 5)),
                      wgt_factor_in=int(rng.integers(0, 3)))
             for _ in range(3)]
    fast, rf = run(cfg, insns, uops, inp, wgt, acc)
    slow, rs = run(cfg, insns, uops, inp, wgt, acc, generic=("gemm",))
    assert type(fast._tensor["gemm"]).__name__ == "GemmExecutor" and isinstance(slow._tensor["gemm"], TensorExecutor)
    assert np.array_equal(fast.scratchpads["acc"], slow.scratchpads["acc"]) and rf.cycles == rs.cycles


@pytest.mark.parametrize("seed", range(8))
def test_random_declarations_that_cannot_work_are_rejected_clearly(seed):
    """An operand that does not divide its scratchpad row, or extra fields past 128 bits: ConfigError naming it,
    and the registry is unchanged."""
    from isa.errors import ConfigError
    from isa.intrinsics import declarations

    rng = np.random.default_rng(3000 + seed)
    spec = random_spec(rng)
    before = [d.name for d in declarations()]
    name, axes, sc = spec["ops"][int(rng.integers(0, 2))]
    n = int(np.prod([spec["extents"][a] for a in axes], dtype=np.int64))
    big = ROW[sc] * 3 // n  # the operand grows to 3 rows' worth: not a divisor of its row
    spec_big = {**spec, "extents": {**spec["extents"], axes[0]: spec["extents"][axes[0]] * big}}
    with pytest.raises(ConfigError, match=r"operand (x|y) has \d+ elements; it must be (a divisor of the (inp|wgt) row|"
                                          r"exactly one acc row)"):
        register_intrinsic(declare(spec_big), check_configs=("tiny",))
    wide = {**spec, "fields": [("wide", 40 + int(rng.integers(0, 20)), False)]}
    with pytest.raises(ConfigError, match=r"'tiny'.*FZ format needs \d+ bits but a word has 128.*widest field"):
        register_intrinsic(declare(wide), check_configs=("tiny",))
    assert [d.name for d in declarations()] == before


class SpyExecutor:
    """An executor hook that records the instructions it runs and delegates to the generic executor."""

    calls: list[int] = []

    def __init__(self, cfg, sp):
        self.inner = TensorExecutor(cfg, sp, intrinsics(cfg)["fz"])

    def execute(self, i, insn):
        SpyExecutor.calls.append(i)
        self.inner.execute(i, insn)


@pytest.mark.parametrize("hook", [SpyExecutor, "tests.simulator.test_declaration_fuzz:SpyExecutor"])
def test_the_simulator_runs_a_declared_executor_hook(hook):
    import dataclasses

    rng = np.random.default_rng(77)
    spec = random_spec(rng)
    register_intrinsic(dataclasses.replace(declare(spec), executor=hook), check_configs=("tiny",))
    try:
        SpyExecutor.calls = []
        B, BI, BO = TINY.batch, TINY.block_in, TINY.block_out
        inp = rng.integers(-128, 128, (64, B, BI)).astype(np.int8)
        wgt = rng.integers(-128, 128, (64, BO, BI)).astype(np.int8)
        acc = rng.integers(-1000, 1000, (32, B, BO)).astype(np.int32)
        uops = [Uop(1, 2, 3), Uop(4, 5, 6)]
        insn = insn_class(intrinsics(TINY)["fz"].decl)(reset=False, uop_bgn=0, uop_end=2, iter_out=2, iter_in=1,
                                                       dst_factor_out=1, src_factor_out=1, wgt_factor_out=1)
        sim, _ = run(TINY, [insn, insn], uops, inp, wgt, acc)
        assert SpyExecutor.calls == [0, 1]
        once = reference(spec, insn, uops, {"inp": inp, "wgt": wgt, "acc": acc})
        twice = reference(spec, insn, uops, {"inp": inp, "wgt": wgt, "acc": once})
        assert np.array_equal(sim.scratchpads["acc"][:32], twice)
    finally:
        unregister_intrinsic("fz")


def test_an_executor_hook_that_cannot_be_imported_is_named():
    import dataclasses

    from simulator.errors import InvalidInstructionError

    spec = random_spec(np.random.default_rng(78))
    register_intrinsic(dataclasses.replace(declare(spec), executor="simulator.nowhere:Fast"), check_configs=("tiny",))
    try:
        with pytest.raises(InvalidInstructionError, match=r"intrinsic fz: its executor hook 'simulator.nowhere:Fast' "
                                                          r"cannot be imported"):
            Simulator(TINY)._executor("fz")
    finally:
        unregister_intrinsic("fz")


def test_declarations_found_by_the_fuzzer_are_refused_with_a_config_error():
    """Cases benchmarks/fuzz.py's declaration target found raising other errors: a zero extent (ZeroDivisionError),
    semantics that raise (the user's exception), a field declared twice (a dataclass TypeError) and a 0-bit field
    (a negative shift). Each is a ConfigError naming the problem, and the registry is unchanged."""
    import dataclasses

    from isa.errors import ConfigError
    from isa.intrinsics import declarations

    spec = random_spec(np.random.default_rng(5))
    base = declare(spec)
    before = [d.name for d in declarations()]
    zero = dataclasses.replace(base, axes=lambda cfg: {**spec["extents"], spec["out"][0]: 0})

    def boom(**kw):
        raise RuntimeError("boom")

    cases = [(zero, r"axis extents \{'p': 0\} must be positive integers"),
             (dataclasses.replace(base, semantics=boom), r"evaluating its semantics raised RuntimeError: boom"),
             (dataclasses.replace(base, fields=(InsnField("f", 3), InsnField("f", 4))), r"field 'f' is declared twice"),
             (dataclasses.replace(base, fields=(InsnField("f", 0),)), r"field 'f' is 0 bits wide")]
    for decl, msg in cases:
        with pytest.raises(ConfigError, match=msg):
            register_intrinsic(decl, check_configs=("tiny",))
    assert [d.name for d in declarations()] == before
