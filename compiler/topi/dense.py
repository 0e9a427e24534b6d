"""Packed dense as a 1x1 convolution: batch rows become the spatial width, so it shares conv2d's schedule."""
from __future__ import annotations

from compiler.topi.conv2d import ConvShape


def dense_shape(nb: int, kb: int, mb: int) -> ConvShape:
    """x (N//B, K//BI, B, BI) x w (M//BO, K//BI, BO, BI) viewed as a 1x1 conv over a 1 x N//B image."""
    return ConvShape(1, 1, kb, mb, 1, nb, 1, 1, (1, 1), (0, 0, 0, 0))
