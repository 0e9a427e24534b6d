"""Measured knob choice: simulate the few best analytic candidates of a conv2d and keep the fastest.

The analytic estimate (:func:`compiler.topi.knobs.estimate_conv`) ranks tilings well but not
exactly (pipeline fill, token stalls); simulating its top ``top`` candidates with zero data on
the cycle-accurate simulator picks the real best. Results are cached per shape in-process.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.topi.knobs import ConvKnobs, rank_conv_knobs

if TYPE_CHECKING:
    from compiler.requant import Requant
    from compiler.topi.conv2d import ConvShape
    from compiler.topi.residual import Residual
    from isa import HwConfig

_CACHE: dict = {}


def measure_conv(cfg: "HwConfig", cs: "ConvShape", knobs: ConvKnobs, bias=None,
                 requant: "Requant | None" = None, residual: "Residual | None" = None) -> int:
    """Cycles of one conv2d (+ epilogue, + a fused ``residual`` Add) with ``knobs`` on the cycle-accurate simulator
    (zero data)."""
    from compiler.codegen.module import build
    from compiler.topi.conv2d import conv2d_kernel

    k = conv2d_kernel(cfg, cs, bias, requant, knobs, residual)
    mod = build(k.schedule, cfg, name="conv2d_tune")
    inputs = {k.data: np.zeros(k.data.shape, np.int8), k.weight: np.zeros(k.weight.shape, np.int8)}
    if k.residual is not None:
        inputs[k.residual] = np.zeros(k.residual.shape, np.int8)
    inputs.update({t: a for t, a in k.epilogue.consts})
    _, prof = mod.run(inputs, device="sim")
    return int(prof["cycles"])


def tune_conv_knobs(cfg: "HwConfig", cs: "ConvShape", bias=None, requant: "Requant | None" = None,
                    n_consts: int = 0, n_alu: int = 0, vthreads: int | None = None, top: int = 4,
                    residual: "Residual | None" = None, thread_counts: tuple[int, ...] = (2, 1)) -> ConvKnobs:
    """The fastest (simulated) of the ``top`` best analytic candidates (thread counts as in
    :func:`~compiler.topi.knobs.rank_conv_knobs`); cached per shape, epilogue and fused ``residual``."""
    key = (cfg, cs, n_consts, n_alu, vthreads, top, None if residual is None else residual.key(), tuple(thread_counts))
    if key in _CACHE:
        return _CACHE[key]
    ranked = rank_conv_knobs(cfg, cs, n_consts, n_alu, vthreads, residual is not None, thread_counts)[:top]
    best = min((measure_conv(cfg, cs, kn, bias, requant, residual), n, kn) for n, (_, kn) in enumerate(ranked))[2]
    _CACHE[key] = best
    return best
