"""DMA injection: a tensor region becomes 2D copies (rows of elements, a row pitch, zero pads).

Contiguous inner dimensions fold into the row (``x``); the next dimension becomes the row
count (``y``) with its stride; dimensions further out become separate copies. Padding
(from an inlined padding stage) becomes the copy's ``x_pad``/``y_pad`` fields.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import TYPE_CHECKING

from compiler.lower.affine import Affine, to_affine
from compiler.lower.errors import LowerError
from compiler.te.expr import Load, Select
from compiler.te.tensor import Tensor

if TYPE_CHECKING:
    from compiler.lower.ir import Buffer

PAD_MAX = 15


@dataclass(frozen=True)
class DmaDesc:
    """One 2D copy: ``sram`` is relative to the buffer copy's base; ``dram`` counts elements of ``tensor``."""

    tensor: Tensor
    sram: int
    dram: int
    y: int
    x: int
    stride: int
    y_pad0: int = 0
    y_pad1: int = 0
    x_pad0: int = 0
    x_pad1: int = 0


def _row_major(shape) -> list[int]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return list(reversed(out))


def source_of(cache_body: Load) -> tuple[Tensor, list[int]]:
    """The DRAM tensor a cache copies and the padding offset per dimension (from an inlined pad stage)."""
    t = cache_body.tensor
    if t.op is None:
        return t, [0] * t.ndim
    body = t.op.body
    inner = body.a if isinstance(body, Select) else body
    if not isinstance(inner, Load) or inner.tensor.op is not None:
        raise LowerError(f"cache of {t.name}: an inlined stage feeding a DMA must be a padding "
                         f"select(in_bounds, data[i - pad], 0) of an input, got {body!r}")
    offs = []
    env = {ax: Affine.var(ax) for ax in t.op.axes}
    for d, (idx, ax) in enumerate(zip(inner.indices, t.op.axes)):
        f = to_affine(idx, env)
        if f.coefs != {ax: 1}:
            raise LowerError(f"padding stage {t.name}: index {d} is {idx!r}; it must be axis - constant")
        offs.append(-f.const)
    for d, (a, b) in enumerate(zip(t.shape, inner.tensor.shape)):
        if a < b:
            raise LowerError(f"padding stage {t.name}: dim {d} shrinks {b} -> {a}")
    return inner.tensor, offs


def region_descs(src: Tensor, offs: list[int], region: list[tuple[int, int]], buf: "Buffer",
                 allow_pad: bool = True) -> list[DmaDesc]:
    """2D copies moving ``region`` (in padded coordinates, element dims last two) of ``src`` into ``buf``."""
    D = src.ndim - 2
    for d in range(D, src.ndim):
        if region[d] != (0, src.shape[d]):
            raise LowerError(f"DMA of {src.name}: element dimension {d} must be copied whole, region {region[d]}")
    shape = src.shape[:D]
    dstr = _row_major(shape)
    bstr = buf.strides
    lo, n, p0, p1, vlo, vn = [], [], [], [], [], []
    for d in range(D):
        l, e = region[d]
        s = l - offs[d]
        a = max(0, -s)
        b = max(0, s + e - shape[d])
        if e - a - b <= 0:
            raise LowerError(f"DMA of {src.name}: dimension {d} of the region lies entirely in the padding")
        if (a or b) and not allow_pad:
            raise LowerError(f"DMA of {src.name}: region {region[d]} leaves the tensor (dim {d}, size {shape[d]})")
        lo.append(l); n.append(e); p0.append(a); p1.append(b); vlo.append(s + a); vn.append(e - a - b)
    x_dims = [D - 1]
    while x_dims[0] > 0:
        j = x_dims[0] - 1
        inner_ok = all(p0[d] == 0 and p1[d] == 0 and vn[d] == shape[d] and n[d] == buf.shape[d] for d in x_dims)
        if not inner_ok or p0[j] or p1[j]:
            break
        x_dims.insert(0, j)
    x = 1
    for d in x_dims:
        x *= vn[d]
    xd = x_dims[0]
    xp0, xp1 = (p0[xd], p1[xd]) if len(x_dims) == 1 else (0, 0)
    rowlen = 1
    for d in x_dims:
        rowlen *= buf.shape[d]
    outer = list(range(xd))
    ydim = None
    if outer and xp0 + x + xp1 == rowlen:
        ydim = outer.pop()
    elif outer and (xp0 + x + xp1) != rowlen:
        j = outer[-1]
        if p0[j] or p1[j]:
            raise LowerError(f"DMA of {src.name}: a partial row ({x} of {rowlen} elements) with padding in dimension "
                             f"{j} cannot be copied; choose tile sizes that divide dimension {xd}")
    for d in outer:
        if p0[d] or p1[d]:
            raise LowerError(f"DMA of {src.name}: padding in dimension {d} (outside the 2D copy) is not supported; "
                             f"only the two innermost spatial dimensions may be padded")
    for v in (xp0, xp1) + ((p0[ydim], p1[ydim]) if ydim is not None else ()):
        if v > PAD_MAX:
            raise LowerError(f"DMA of {src.name}: padding of {v} elements exceeds the {PAD_MAX} a copy can add")
    descs = []
    for pos in product(*[range(vlo[d], vlo[d] + vn[d]) for d in outer]):
        dram = sum(p * dstr[d] for p, d in zip(pos, outer))
        sram = sum((p + offs[d] - lo[d]) * bstr[d] for p, d in zip(pos, outer))
        for d in x_dims:
            dram += vlo[d] * dstr[d]
        if ydim is not None:
            dram += vlo[ydim] * dstr[ydim]
            descs.append(DmaDesc(src, sram, dram, vn[ydim], x, dstr[ydim], p0[ydim], p1[ydim], xp0, xp1))
        else:
            descs.append(DmaDesc(src, sram, dram, 1, x, x, 0, 0, xp0, xp1))
    return descs
