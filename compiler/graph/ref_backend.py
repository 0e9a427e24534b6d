"""Numpy reference implementation of the accelerator interface (bit-exact integers)."""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.conv_kernels import int_conv2d_acc, int_dense_acc
from compiler.graph.accel_interface import (AccelBackend, check_conv_operands, dense_operands, host_profile,
                                            pack_activation, pad_channels, pad_requant, unpack_activation,
                                            unpack_weight)
from jit_runtime.host_ops.requant import Requant, apply_requant


class RefAccelBackend(AccelBackend):
    """Executes ``conv2d``/``dense`` on packed int8 tensors with numpy; profile has MAC counts only."""

    runs_on = "ref:numpy"  # where its layers run, for the profile (the host, not an accelerator)

    def __init__(self, config) -> None:
        self.config = config
        self.last_profile: dict = {}

    def _profile(self, macs: int, x, w, bias, out) -> None:
        self.last_profile = host_profile(macs, x, w, bias, out)

    def conv2d(self, x, w, bias, *, stride, padding, groups, requant: Requant, pad_value: int = 0) -> np.ndarray:
        cfg = self.config
        check_conv_operands(cfg, x, w)
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
        cfg = self.config
        xs, ws = dense_operands(x, w)
        acc = int_dense_acc(xs, ws)
        out = apply_requant(acc, pad_channels(bias, ws.shape[0]), pad_requant(requant, ws.shape[0]), 1)
        packed = pack_activation(out.astype(np.int8), cfg.batch, cfg.block_out)
        self._profile(acc.size * ws.shape[1], x, w, bias, packed)
        return packed
