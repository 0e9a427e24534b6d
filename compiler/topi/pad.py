"""Padding of the two spatial dimensions of a packed activation (with zeros or a constant), as an inlinable TE stage."""
from __future__ import annotations

from compiler import te


def pad_spatial(data: te.Tensor, h_axis: int, pads: tuple[int, int, int, int], name: str = "pad",
                value: int = 0) -> te.Tensor:
    """Pad dims ``h_axis`` and ``h_axis + 1`` by (top, left, bottom, right) elements equal to ``value``
    (e.g. the activation zero point, so padding is real zero); a DMA adds them for free (LOAD ``pad_value``)."""
    top, left, bottom, right = pads
    if min(pads) < 0:
        raise te.TeError(f"pad_spatial: paddings must be >= 0, got {pads}")
    shape = list(data.shape)
    H, W = shape[h_axis], shape[h_axis + 1]
    shape[h_axis] += top + bottom
    shape[h_axis + 1] += left + right

    def f(*idx):
        h, w = idx[h_axis], idx[h_axis + 1]
        src = list(idx)
        src[h_axis] = h - top
        src[h_axis + 1] = w - left
        cond = (h >= top) & (h < H + top) & (w >= left) & (w < W + left)
        return te.select(cond, data[tuple(src)], te.const(int(value), data.dtype))

    return te.compute(tuple(shape), f, name=name, dtype=data.dtype,
                      axis_names=tuple(f"p{k}" for k in range(len(shape))))


class OutputPlane:
    """``oh``/``ow`` of a windowed op from its ``h``, ``w``, ``kh``, ``kw``, ``stride`` and ``padding`` (t, l, b, r)."""

    @property
    def oh(self) -> int:
        return (self.h + self.padding[0] + self.padding[2] - self.kh) // self.stride[0] + 1

    @property
    def ow(self) -> int:
        return (self.w + self.padding[1] + self.padding[3] - self.kw) // self.stride[1] + 1
