"""Measured knob choice: time the few best analytic candidates of a conv2d and keep the fastest.

The analytic estimate (:func:`compiler.topi.knobs.estimate_conv`) ranks tilings well but not
exactly (pipeline fill, token stalls); timing its top ``top`` candidates' programs by the timing
contract (the cycle-accurate simulator's timing engine, no data moved) picks the real best.
Results are cached per shape in-process.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable

import numpy as np

from compiler.topi.knobs import ConvKnobs, rank_conv_knobs

if TYPE_CHECKING:
    from jit_runtime.host_ops.requant import Requant
    from compiler.topi.conv2d import ConvShape
    from compiler.topi.residual import Residual
    from isa import HwConfig

_CACHE: dict = {}


def contract_cycles(cfg: "HwConfig", schedule, name: str = "kernel") -> int:
    """Cycles of the program a schedule compiles to, by the timing contract alone: the simulator's timing engine
    over the decoded stream with no data moved (a program's cycles never depend on its data, docs/timing.md), so
    a candidate costs its instruction count, not its MACs."""
    from compiler.backend.accel.emit import emit
    from compiler.backend.accel.ops import OpBuilder
    from compiler.lower import lower
    from jit_runtime.command_queue import CommandQueue
    from simulator.program import Decoder
    from simulator.timing_engine import run_timed

    func = lower(schedule, cfg, name=name)
    ops = OpBuilder(func, cfg).build()
    q = CommandQueue(cfg, "sim")
    dram = {t: q.alloc(t.shape, _NP[t.dtype], name=t.name) for t in list(func.inputs) + [func.output]}
    emit(ops, q, dram)
    prog = q.finalize(name=name)
    infos = Decoder(cfg).program(prog.dram, prog.insn_addr, prog.n_insns)
    return int(run_timed(cfg, infos, lambda i: None).cycles)


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
    """Cycles of one conv2d (+ epilogue, + a fused ``residual`` Add) with ``knobs`` by the timing contract
    (:func:`contract_cycles`: what the cycle-accurate simulator reports for any data)."""
    from compiler.topi.conv2d import conv2d_kernel

    return contract_cycles(cfg, conv2d_kernel(cfg, cs, bias, requant, knobs, residual).schedule, "conv2d_tune")


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
