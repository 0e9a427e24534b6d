"""The contract between the graph level and an accelerator operator library.

Packed layouts (B = ``config.batch``, BI = ``config.block_in``, BO = ``config.block_out``):

* activation for conv2d: ``(N//B, C//BI, H, W, B, BI)`` int8, from NCHW with N and C
  zero-padded up to multiples of B and BI (``pack_activation``);
* activation for dense: ``(N//B, K//BI, B, BI)`` int8, from (N, K);
* conv weights: ``(O//BO, I//BI, KH, KW, BO, BI)`` int8 from OIHW, O and I zero-padded
  (``pack_weight``); dense weights ``(M//BO, K//BI, BO, BI)`` from (M, K).
* outputs: conv2d ``(N//B, O//BO, OH, OW, B, BO)``, dense ``(N//B, M//BO, B, BO)``.

Grouped conv (``groups > 1``): the weight is OIHW with ``I = C / groups`` input channels per
group; ``C/groups`` must be a multiple of BI and ``O/groups`` a multiple of BO (the graph
level runs other grouped convs on the CPU). The packed weight is ``pack_weight(w)`` of the
OIHW weight, i.e. ``(O//BO, (C/groups)//BI, KH, KW, BO, BI)``; output block ``ob`` belongs to
group ``ob // (O/groups/BO)`` and reads input blocks ``g*(C/groups/BI) ... +(C/groups/BI)-1``.

Per-channel arrays (``bias`` int32, ``requant.multiplier``/``shift`` when arrays) have length
``O_pad = w.shape[0] * BO`` (shorter arrays are zero-padded by ``pad_channels``). The
arithmetic: int8 x int8 products summed in int32 (wrapping), then
``jit_runtime.host_ops.requant.apply_requant`` on the output-channel axis. Spatial padding holds
``pad_value`` (the input's zero point; only passed when non-zero). Padded input channels and
padded batch rows may hold anything: padded weights are zero and padded rows are dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from isa import HwConfig, make_config
from jit_runtime.host_ops.requant import Requant
from jit_runtime.host_ops.layout import (  # noqa: F401 (re-exported)
    _pad_axes, ceil_to, pack_activation, pack_weight, unpack_activation, unpack_weight)


@runtime_checkable
class AccelBackend(Protocol):
    """An accelerator operator library (``"ref"`` = numpy reference, ``"sim"`` = simulator).

    The built-in backends subclass this protocol and inherit its defaults (:meth:`before_run`); any object with
    ``conv2d``/``dense`` (and ``config``, ``last_profile``) is a backend too, and the executor treats a missing
    default as the default.

    Optional: a backend with ``supports_residual(residual) -> None | reason`` also takes
    ``conv2d(..., residual=<int8 packed operand>, residual_add=<compiler.topi.residual.Residual>)`` and
    computes the fused residual QAdd itself; for any other backend the executor runs that Add on the host."""

    config: object
    last_profile: dict

    def conv2d(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, *, stride: tuple[int, int],
               padding: tuple[int, int, int, int], groups: int, requant: Requant, pad_value: int = 0) -> np.ndarray: ...

    def dense(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, *, requant: Requant) -> np.ndarray: ...

    def before_run(self) -> None:
        """Called by the executor's Module as each model run starts, before its first layer (the llvm target wakes
        its thread pool's workers here); the default does nothing."""
        return None


@dataclass(frozen=True)
class BlockConfig:
    """Minimal stand-in for ``isa.HwConfig``: the only fields the graph level reads."""

    batch: int = 1
    block_in: int = 16
    block_out: int = 16
    clock_mhz: float = 100.0


def as_hw_config(config: Any) -> HwConfig:
    """An ``isa.HwConfig`` from one, from a preset name, or from an object with batch/block sizes."""
    if isinstance(config, HwConfig):
        return config
    if config is None or isinstance(config, str):
        return make_config(config or "pynq-z1")
    b, bi, bo = int(config.batch), int(config.block_in), int(config.block_out)
    return make_config("pynq-z1", log_batch=b.bit_length() - 1, log_block_in=bi.bit_length() - 1,
                       log_block_out=bo.bit_length() - 1)


def pad_channels(v: np.ndarray | int | None, n: int, dtype=np.int64) -> np.ndarray | int | None:
    """Zero-pad a per-channel array to length ``n``; scalars and None pass through."""
    if v is None or np.ndim(v) == 0:
        return v
    v = np.asarray(v, dtype=dtype)
    return _pad_axes(v, {0: n})


def pad_requant(rq: Requant, n: int) -> Requant:
    """``rq`` with its per-channel ``multiplier``/``shift`` arrays zero-padded to length ``n``."""
    return Requant(rq.pre_shift, pad_channels(rq.multiplier, n), pad_channels(rq.shift, n), rq.relu,
                   rq.out_min, rq.out_max, rq.extra, rq.zero_point)






def conv_supported_on_accel(c: int, o: int, groups: int, block_in: int, block_out: int) -> bool:
    """Whether a conv with C inputs, O outputs and ``groups`` fits the packed grouped-conv rule.

    Depthwise convs (``groups == C == O``) qualify too: their packed weight is ``(C//BO, 1, KH, KW, BO, BI)``
    with input column 0 holding each channel's filter."""
    if groups == 1:
        return True
    if groups == c == o and block_in == block_out:  # depthwise: block-diagonal weights, one block per group
        return True
    return c % groups == 0 and o % groups == 0 and (c // groups) % block_in == 0 and (o // groups) % block_out == 0


def check_int8_packed(name: str, a: np.ndarray, ndim: int) -> None:
    """Raise ValueError unless ``a`` is an ``ndim``-D int8 packed array."""
    if a.dtype != np.int8 or a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D int8 packed array, got {a.dtype} with shape {a.shape}")


def check_conv_operands(cfg, x: np.ndarray, w: np.ndarray) -> None:
    """Packed conv2d operands: 6-D int8 with ``cfg``'s batch/block sizes (ValueError otherwise)."""
    check_int8_packed("conv2d x", x, 6)
    check_int8_packed("conv2d w", w, 6)
    if x.shape[4] != cfg.batch or x.shape[5] != cfg.block_in or w.shape[4] != cfg.block_out or w.shape[5] != cfg.block_in:
        raise ValueError(f"packed blocks x{x.shape[4:]} w{w.shape[4:]} do not match config "
                         f"(batch={cfg.batch}, block_in={cfg.block_in}, block_out={cfg.block_out})")


def dense_operands(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Packed dense operands checked and unpacked: ``(x (N, K), w (M, K))`` (ValueError on a mismatch)."""
    check_int8_packed("dense x", x, 4)
    check_int8_packed("dense w", w, 4)
    xs, ws = unpack_activation(x), unpack_weight(w)
    if xs.shape[1] != ws.shape[1]:
        raise ValueError(f"dense: input K={xs.shape[1]} but weight K={ws.shape[1]} (padded)")
    return xs, ws


def host_profile(macs: int, x: np.ndarray, w: np.ndarray, bias, out: np.ndarray) -> dict:
    """The profile of a layer run on the host: MACs and bytes moved, no cycles."""
    return {"cycles": 0, "macs": int(macs), "utilization": 0.0,
            "bytes": {"input": int(x.nbytes), "weight": int(w.nbytes),
                      "bias": 0 if bias is None else 4 * int(np.size(bias)), "output": int(out.nbytes)}}
