"""Features of a lowered conv2d loop nest for the cost model (all scale-free, so a model transfers across tasks).

From the loop IR (:mod:`compiler.tir.accel.ir`): extents of the serial loops over 1 (pre-order, padded), the virtual-thread
count, per memory scope the DMA loads issued and the bytes they move (trip count x buffer region), the
store bytes, the scratchpad occupancy per scope, and the uop counts of the GEMM and ALU micro-kernels
(the loops left after the two that the instruction's hardware loop fields take). The knob values, the
layer's geometry and the analytic estimate (:func:`compiler.topi.knobs.estimate_conv`) complete them.
Sizes enter as log2 so layers of different sizes share one model.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.tir.accel.ir import DmaLoad, DmaStore, For, Kernel
from compiler.topi.knobs import ConvKnobs, estimate_conv

N_HOST = 6  # host-loop extents kept (outermost first)
SCOPES = ("inp", "wgt", "acc")


def _lg(x: float) -> float:
    return math.log2(max(float(x), 1.0))


def _kernel_uops(extents: list[int]) -> int:
    """Uops of a micro-kernel over ``extents``: the two largest loops go to the instruction's loop fields."""
    e = sorted((x for x in extents if x > 1), reverse=True)
    return math.prod(e[2:]) if len(e) > 2 else 1


def loop_features(func, task, k: ConvKnobs, n_alu: int) -> np.ndarray:
    """The feature vector of lowered kernel ``func`` (a ``LoweredFunc``) of ``task`` with knobs ``k``."""
    cfg, cs = task.cfg, task.shape
    host: list[int] = []
    loads = {m: 0.0 for m in SCOPES}
    bytes_ = {m: 0.0 for m in SCOPES}
    counts = {"gemm": 0.0, "alu": 0.0, "store": 0.0, "store_bytes": 0.0}
    vthreads = 1

    def walk(stmts, trip: int, depth: int) -> None:
        nonlocal vthreads
        for s in stmts:
            if isinstance(s, For):
                if s.kind == "vthread":
                    vthreads = s.extent
                elif s.extent > 1:
                    host.append(s.extent)
                walk(s.body, trip * s.extent, depth + 1)
            elif isinstance(s, DmaLoad):
                m = s.buffer.scope
                loads[m] += trip
                bytes_[m] += trip * s.buffer.elems * cfg.elem_bytes(m)
            elif isinstance(s, DmaStore):
                counts["store"] += trip
                counts["store_bytes"] += trip * s.buffer.root().elems * cfg.elem_bytes("out")
            elif isinstance(s, Kernel) and s.kind in ("gemm", "alu"):
                counts[s.kind] += trip

    walk(func.body, 1, 0)
    occ = {m: 0.0 for m in SCOPES}
    for b in func.buffers:
        if b.alias_of is None:
            occ[b.scope] += b.elems * b.copies / cfg.depth(b.scope)
    hosts = [_lg(e) for e in host[:N_HOST]] + [0.0] * (N_HOST - min(len(host), N_HOST))
    acc_tile = k.oc_tile * k.h_tile * cs.ow
    gemm_uops = _kernel_uops([k.oc_tile, k.h_tile, cs.ow, k.ic_tile, cs.kh, cs.kw])
    alu_uops = _kernel_uops([k.oc_tile, k.h_tile, cs.ow])
    ideal = cs.macs(cfg) / cfg.macs_per_cycle
    est = estimate_conv(cfg, cs, k, n_alu)
    feats = [
        *hosts, float(len(host)), _lg(vthreads),
        *(_lg(loads[m]) for m in SCOPES), *(_lg(bytes_[m]) - _lg(ideal) for m in SCOPES),
        _lg(counts["store"]), _lg(counts["store_bytes"]) - _lg(ideal), *(occ[m] for m in SCOPES),
        _lg(counts["gemm"]), _lg(counts["alu"]), _lg(gemm_uops), _lg(alu_uops), _lg(acc_tile),
        _lg(k.oc_tile), _lg(k.h_tile), _lg(k.ic_tile), k.oc_tile / cs.ocb, k.h_tile / cs.oh, k.ic_tile / cs.icb,
        float(k.vthreads), float(k.vthread_axis == "h"), float(k.order == "h"), float(k.epilogue == "deferred"),
        _lg(cs.ocb), _lg(cs.icb), _lg(cs.oh), _lg(cs.ow), float(cs.kh * cs.kw), float(cs.stride[0]), float(n_alu),
        _lg(est) - _lg(ideal),
    ]
    return np.asarray(feats, dtype=np.float32)
