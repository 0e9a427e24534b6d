"""One timing-only measurement for the conv chooser, the tuner and the design-space exploration.

A program's cycles never depend on its data (docs/timing.md), so a candidate tiling is timed by the cycle-accurate
simulator's timing engine alone (:class:`TimingOnlyDevice`: no arithmetic, zero data). :func:`conv_program`
compiles a conv2d schedule (schedule -> loop IR -> operations -> a finalized ``Program``, laid out as the ``sim``
backend's ``Replay`` runs it) and :func:`program_cycles` times it once; both are cached per schedule (shape,
tiling, epilogue structure, fused residual), so the tiling the chooser timed is not compiled or timed again when
the backend runs it (``compiler.backend.accel.backend``), nor when the tuner (``compiler.autotune.measure``) or a DSE point
(``compiler.dse``) asks for it again in the same process.

The measured knob choice: the analytic estimate (:func:`compiler.topi.knobs.estimate_conv`) ranks tilings well
but not exactly (pipeline fill, token stalls); timing its top ``top`` candidates picks the real best
(:func:`tune_conv_knobs`, cached per shape in-process); likewise for depthwise layers on ``dwmac``
(:func:`choose_dw_knobs` over :func:`compiler.topi.depthwise.rank_dw_knobs`). The operator library (``compiler.topi``)
ranks; measuring needs the accelerator's code generator, so it lives here, with it.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from compiler.backend.accel.emit import emit
from compiler.backend.accel.ops import OpBuilder
from compiler.tir.accel import lower
from compiler.topi.conv2d import conv2d_kernel
from compiler.topi.depthwise import DwKnobs, DwShape, depthwise_kernel, rank_dw_knobs
from compiler.topi.knobs import ConvKnobs, rank_conv_knobs
from jit_runtime.command_queue import CommandQueue

if TYPE_CHECKING:
    from jit_runtime.host_ops.requant import Requant
    from compiler.topi.conv2d import ConvShape
    from compiler.topi.residual import Residual
    from isa import HwConfig

_CACHE: dict = {}


class TimingOnlyDevice:
    """The cycle-accurate simulator's timing engine without the arithmetic (a ``jit_runtime`` device).

    The simulator's timing depends on the instruction stream only, never on the data, so with zero inputs
    the cycles equal the ``"sim"`` device's (checked by a test) while the GEMMs/ALU ops on zeros, most of a
    run's time, are skipped. Scratchpads and outputs are left untouched: use it for cycles only."""

    def __init__(self, cfg) -> None:
        self.cfg = cfg

    def run(self, dram, insn_addr: int, n_insns: int):
        from simulator.budget import DEFAULT_MAX_CYCLES, check_budget
        from simulator.dram import check_image
        from simulator.program import Decoder
        from simulator.result import SimResult
        from simulator.timing_engine import run_timed

        check_image(dram)
        infos = Decoder(self.cfg).program(dram, insn_addr, n_insns)
        check_budget(infos, DEFAULT_MAX_CYCLES)
        return SimResult(self.cfg, infos, run_timed(self.cfg, infos, lambda i: None, DEFAULT_MAX_CYCLES))


def rq_key(bias, rq: "Requant | None") -> tuple:
    """The structure of a bias + requant epilogue (what its program depends on; the values are DRAM inputs)."""
    if rq is None:
        return ("none",)

    def k(v):
        a = np.asarray(v)
        return ("arr", a.shape) if a.ndim else ("s", int(a))
    return (bias is not None, k(rq.pre_shift), k(rq.multiplier), k(rq.shift), rq.relu, rq.out_min, rq.out_max,
            int(rq.zero_point))


@dataclass
class KernelProgram:
    """A compiled kernel finalized into a jit_runtime ``Program``: its kernel (tensors), operations, constant
    inputs (tensor, value), the program, where each input lies in its DRAM image (``where``: tensor -> (addr,
    dtype, nbytes)), the output buffer, and, once timed (:func:`program_cycles`), the timing-only result."""

    kernel: Any
    ops: list
    consts: list
    program: Any
    where: dict
    out: Any
    timed: Any = None


def kernel_program(cfg: "HwConfig", kernel, ops: list, consts: list, device: Any = "sim",
                   name: str = "conv2d") -> KernelProgram:
    """Finalize ``ops`` into a program: data, weight, the fused residual and the constants, then the output."""
    q = CommandQueue(cfg, device)
    slots: dict = {}
    extra = [kernel.residual] if getattr(kernel, "residual", None) is not None else []
    for t in [kernel.data, kernel.weight] + extra + [t for t, _ in consts]:
        slots[t] = q.alloc(t.shape, _NP[t.dtype], name=t.name)
    dram = dict(slots)
    dram[kernel.out] = q.alloc(kernel.out.shape, _NP[kernel.out.dtype], name="out")
    emit(ops, q, dram)
    prog = q.finalize(name=name)
    where = {t: (b.addr, _NP[t.dtype], b.nbytes) for t, b in slots.items()}
    return KernelProgram(kernel, ops, consts, prog, where, prog.buffers["out"])


#: Compiled conv programs kept per process (each holds its DRAM image: a few MB for the largest layers).
PROGRAM_CACHE_SIZE = 48
_PROGRAMS: "OrderedDict[tuple, KernelProgram]" = OrderedDict()


def schedule_key(cfg: "HwConfig", cs: "ConvShape", knobs: ConvKnobs | None, bias, requant,
                 residual: "Residual | None") -> tuple:
    return (cfg, cs, knobs, rq_key(bias, requant), None if residual is None else residual.key())


def conv_program(cfg: "HwConfig", cs: "ConvShape", bias, requant: "Requant | None", knobs: ConvKnobs | None = None,
                 residual: "Residual | None" = None) -> KernelProgram:
    """The conv2d (+ epilogue, + fused ``residual``) with ``knobs`` compiled and finalized, cached per schedule
    (:func:`schedule_key`; the constants' values of the first call, which runs patch per call)."""
    key = schedule_key(cfg, cs, knobs, bias, requant, residual)
    kp = _PROGRAMS.get(key)
    if kp is not None:
        _PROGRAMS.move_to_end(key)
        return kp
    k = conv2d_kernel(cfg, cs, bias, requant, knobs, residual)
    func = lower(k.schedule, cfg, name="conv2d")
    kp = kernel_program(cfg, k, OpBuilder(func, cfg).build(), k.epilogue.consts)
    _PROGRAMS[key] = kp
    while len(_PROGRAMS) > PROGRAM_CACHE_SIZE:
        _PROGRAMS.popitem(last=False)
    return kp


def program_cycles(cfg: "HwConfig", kp: KernelProgram) -> int:
    """Cycles of a finalized program by the timing engine alone (:class:`TimingOnlyDevice` on its DRAM image with
    zero data), timed once per program: the result is kept on ``kp.timed``."""
    if kp.timed is None:
        prog = kp.program
        kp.timed = TimingOnlyDevice(cfg).run(prog.dram, prog.insn_addr, prog.n_insns)  # leaves the image as is
    return int(kp.timed.cycles)


def contract_cycles(cfg: "HwConfig", schedule, name: str = "kernel") -> int:
    """Cycles of the program any schedule compiles to (inputs, then the output, in DRAM), by the same
    timing-only measurement (:class:`TimingOnlyDevice`); convs go through :func:`conv_program` instead, which
    caches the program per schedule."""
    func = lower(schedule, cfg, name=name)
    ops = OpBuilder(func, cfg).build()
    q = CommandQueue(cfg, "sim")
    dram = {t: q.alloc(t.shape, _NP[t.dtype], name=t.name) for t in list(func.inputs) + [func.output]}
    emit(ops, q, dram)
    prog = q.finalize(name=name)
    return int(TimingOnlyDevice(cfg).run(prog.dram, prog.insn_addr, prog.n_insns).cycles)


_NP = {"int8": np.int8, "int32": np.int32, "int16": np.int16}


PROBE_BLOCKS = 4  # batches up to this many blocks are timed whole


def batch_cycles(measure: Callable[[object], int], shape) -> int:
    """Cycles of a layer over ``shape.nb`` batch blocks, from ``measure(shape)`` (a conv or depthwise geometry with
    an ``nb`` field). Up to :data:`PROBE_BLOCKS` blocks the whole batch is timed; beyond, every block runs the same
    tiles and the pipeline reaches its steady state after the first, so two and three blocks are timed and the
    per-block step extrapolated (exact on the batches checked in the tests; timing a 450-image batch whole would
    cost 450 images' instructions)."""
    if shape.nb <= PROBE_BLOCKS:
        return measure(shape)
    c2, c3 = measure(replace(shape, nb=2)), measure(replace(shape, nb=3))
    return c3 + (shape.nb - 3) * (c3 - c2)


def measure_conv(cfg: "HwConfig", cs: "ConvShape", knobs: ConvKnobs, bias=None,
                 requant: "Requant | None" = None, residual: "Residual | None" = None) -> int:
    """Cycles of one conv2d (+ epilogue, + a fused ``residual`` Add) with ``knobs`` by the timing contract: the
    one timing-only measurement (:func:`conv_program` + :func:`program_cycles`, cached per schedule), what the
    cycle-accurate simulator reports for any data."""
    return program_cycles(cfg, conv_program(cfg, cs, bias, requant, knobs, residual))


def tune_conv_knobs(cfg: "HwConfig", cs: "ConvShape", bias=None, requant: "Requant | None" = None,
                    n_consts: int = 0, n_alu: int = 0, vthreads: int | None = None, top: int = 4,
                    residual: "Residual | None" = None, thread_counts: tuple[int, ...] = (2, 1)) -> ConvKnobs:
    """The fastest (simulated) of the ``top`` best analytic candidates (thread counts as in
    :func:`~compiler.topi.knobs.rank_conv_knobs`); cached per shape, epilogue and fused ``residual``."""
    key = (cfg, cs, n_consts, n_alu, vthreads, top, None if residual is None else residual.key(), tuple(thread_counts))
    if key in _CACHE:
        return _CACHE[key]
    ranked = rank_conv_knobs(cfg, cs, n_consts, n_alu, vthreads, residual is not None, thread_counts)[:top]
    best = min((batch_cycles(lambda shape: measure_conv(cfg, shape, kn, bias, requant, residual), cs), n, kn)
               for n, (_, kn) in enumerate(ranked))[2]
    _CACHE[key] = best
    return best


_DW_CACHE: dict = {}


def measure_dw(cfg: "HwConfig", ds: DwShape, knobs: DwKnobs, bias=None, requant: "Requant | None" = None) -> int:
    """Cycles of one depthwise conv (+ epilogue) with ``knobs`` by the timing contract (what the cycle-accurate
    simulator reports for any data; :func:`contract_cycles`)."""
    return contract_cycles(cfg, depthwise_kernel(cfg, ds, bias, requant, knobs).schedule, "depthwise_tune")


def choose_dw_knobs(cfg: "HwConfig", ds: DwShape, bias=None, requant: "Requant | None" = None,
                    n_consts: int = 0, measure: int | None = None) -> DwKnobs:
    """The fastest (simulated) of the best ``measure`` analytic candidates (:func:`compiler.topi.depthwise.rank_dw_knobs`;
    one candidate is taken without timing); cached per shape and epilogue structure."""
    key = (cfg, ds, n_consts, requant is None, measure)
    if key in _DW_CACHE:
        return _DW_CACHE[key]
    top = rank_dw_knobs(cfg, ds, n_consts, 1 if requant is not None else 0, measure)
    best = top[0] if len(top) == 1 else min(
        (batch_cycles(lambda shape: measure_dw(cfg, shape, k, bias, requant), ds), n, k) for n, k in enumerate(top))[2]
    _DW_CACHE[key] = best
    return best
