"""Numpy reference implementation of the accelerator interface (bit-exact integers)."""
from __future__ import annotations

import numpy as np

from compiler.cpu.conv_kernels import int_conv2d_acc, int_dense_acc
from compiler.graph.accel_interface import pack_activation, pad_channels, pad_requant, unpack_activation, unpack_weight
from compiler.requant import Requant, apply_requant


def _check_int8(name: str, a: np.ndarray, ndim: int) -> None:
    if a.dtype != np.int8 or a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D int8 packed array, got {a.dtype} with shape {a.shape}")


class RefAccelBackend:
    """Executes ``conv2d``/``dense`` on packed int8 tensors with numpy; profile has MAC counts only."""

    def __init__(self, config) -> None:
        self.config = config
        self.last_profile: dict = {}

    def _profile(self, macs: int, x, w, bias, out) -> None:
        self.last_profile = {
            "cycles": 0, "macs": int(macs), "utilization": 0.0,
            "bytes": {"input": int(x.nbytes), "weight": int(w.nbytes),
                      "bias": 0 if bias is None else 4 * int(np.size(bias)), "output": int(out.nbytes)},
        }

    def conv2d(self, x, w, bias, *, stride, padding, groups, requant: Requant, pad_value: int = 0) -> np.ndarray:
        _check_int8("conv2d x", x, 6)
        _check_int8("conv2d w", w, 6)
        cfg = self.config
        if x.shape[4] != cfg.batch or x.shape[5] != cfg.block_in or w.shape[4] != cfg.block_out or w.shape[5] != cfg.block_in:
            raise ValueError(f"packed blocks x{x.shape[4:]} w{w.shape[4:]} do not match config "
                             f"(batch={cfg.batch}, block_in={cfg.block_in}, block_out={cfg.block_out})")
        xs, ws = unpack_activation(x), unpack_weight(w)
        if groups > 1 and w.shape[1] == 1 and w.shape[0] == x.shape[1] and groups > x.shape[1]:
            # depthwise (see conv_supported_on_accel): every padded channel is its own group
            ws, groups = ws[:, :1], xs.shape[1]
        if xs.shape[1] != ws.shape[1] * groups:
            raise ValueError(f"conv2d: input has {xs.shape[1]} padded channels, weight {ws.shape[1]} x groups {groups}")
        o_pad = ws.shape[0]
        acc = int_conv2d_acc(xs, ws, stride=tuple(stride), pads=tuple(padding), groups=groups, pad_value=int(pad_value))
        b = pad_channels(bias, o_pad)
        out = apply_requant(acc, b, pad_requant(requant, o_pad), 1)
        packed = pack_activation(out.astype(np.int8), cfg.batch, cfg.block_out)
        self._profile(acc.size * ws.shape[1] * ws.shape[2] * ws.shape[3], x, w, bias, packed)
        return packed

    def dense(self, x, w, bias, *, requant: Requant) -> np.ndarray:
        _check_int8("dense x", x, 4)
        _check_int8("dense w", w, 4)
        cfg = self.config
        xs, ws = unpack_activation(x), unpack_weight(w)
        if xs.shape[1] != ws.shape[1]:
            raise ValueError(f"dense: input K={xs.shape[1]} but weight K={ws.shape[1]} (padded)")
        acc = int_dense_acc(xs, ws)
        out = apply_requant(acc, pad_channels(bias, ws.shape[0]), pad_requant(requant, ws.shape[0]), 1)
        packed = pack_activation(out.astype(np.int8), cfg.batch, cfg.block_out)
        self._profile(acc.size * ws.shape[1], x, w, bias, packed)
        return packed
