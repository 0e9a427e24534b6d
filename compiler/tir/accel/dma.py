"""DMA injection: a tensor region becomes 2D copies (rows of elements, a row pitch, zero pads).

Contiguous inner dimensions fold into the row (``x``); the next dimension becomes the row
count (``y``) with its stride; dimensions further out become separate copies. Padding
(from an inlined padding stage) becomes the copy's ``x_pad``/``y_pad`` fields and its constant
value the copy's ``pad_value``.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from compiler.schedule.errors import LowerError
from compiler.te.expr import Const, Load, Select
from compiler.te.tensor import Tensor
from compiler.tir.accel.ir import Buffer, row_major_strides
from compiler.tir.arith import Linear, to_affine

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
    pad_value: int = 0


def source_map(cache_body: Load) -> tuple[Tensor, list[int], list[int]]:
    """The DRAM tensor a cache copies, the padding offset and the stride per dimension.

    The inlined stage between them may pad (``select(in_bounds, data[i - pad], 0)``) or subsample
    (``data[i * s]``, e.g. a strided 1x1 conv): source index = ``scale * i - offset``.
    """
    t = cache_body.tensor
    if t.op is None:
        return t, [0] * t.ndim, [1] * t.ndim
    body = t.op.body
    inner = body.a if isinstance(body, Select) else body
    if not isinstance(inner, Load) or inner.tensor.op is not None:
        raise LowerError(f"cache of {t.name}: an inlined stage feeding a DMA must be a padding "
                         f"select(in_bounds, data[i - pad], 0) or a subsampling data[i * s] of an input, got {body!r}")
    offs, scales = [], []
    env = {ax: Linear(0, {ax: 1}) for ax in t.op.axes}
    for d, (idx, ax) in enumerate(zip(inner.indices, t.op.axes)):
        f = to_affine(idx, env)
        k = f.coefs.get(ax, 0)
        if set(f.coefs) != {ax} or k < 1 or (k > 1 and f.const):
            raise LowerError(f"inlined stage {t.name}: index {d} is {idx!r}; it must be axis - constant or axis * stride")
        offs.append(-f.const)
        scales.append(k)
    for d, (a, b, k) in enumerate(zip(t.shape, inner.tensor.shape, scales)):
        if k == 1 and a < b:
            raise LowerError(f"padding stage {t.name}: dim {d} shrinks {b} -> {a}")
        if k > 1 and (a - 1) * k >= b:
            raise LowerError(f"subsampling stage {t.name}: dim {d} reads past the source ({a} x stride {k} > {b})")
    return inner.tensor, offs, scales


def pad_value_of(cache_body: Load) -> int:
    """The constant a padding stage inlined into a DMA fills with (0 without one); LowerError if not constant."""
    t = cache_body.tensor
    if t.op is None or not isinstance(t.op.body, Select):
        return 0
    fill = t.op.body.b
    if not isinstance(fill, Const) or int(fill.value) != fill.value:
        raise LowerError(f"padding stage {t.name}: the pad value must be an integer constant (a LOAD's pad_value), "
                         f"got {fill!r}")
    return int(fill.value)


def region_descs(src: Tensor, offs: list[int], region: list[tuple[int, int]], buf: "Buffer",
                 allow_pad: bool = True, scales: list[int] | None = None, pad_value: int = 0) -> list[DmaDesc]:
    """2D copies moving ``region`` (in view coordinates, element dims last two) of ``src`` into ``buf``.

    View index ``i`` of dim ``d`` reads source index ``scales[d] * i - offs[d]`` (padding outside).
    A strided innermost dimension becomes rows of one element (``x_size=1``, row pitch = stride).
    """
    D = src.ndim - 2
    sc = list(scales) if scales is not None else [1] * src.ndim
    for d in range(D, src.ndim):
        if region[d] != (0, src.shape[d]) or sc[d] != 1:
            raise LowerError(f"DMA of {src.name}: element dimension {d} must be copied whole, region {region[d]}")
    shape = src.shape[:D]
    dstr = row_major_strides(shape)
    bstr = buf.strides
    lo, n, p0, p1, vlo, vn = [], [], [], [], [], []
    for d in range(D):
        l, e = region[d]
        if sc[d] > 1:
            if l < 0 or (l + e - 1) * sc[d] >= shape[d]:
                raise LowerError(f"DMA of {src.name}: strided region {region[d]} (stride {sc[d]}) leaves dim {d}")
            lo.append(l); n.append(e); p0.append(0); p1.append(0); vlo.append(l); vn.append(e)
            continue
        s = l - offs[d]
        a = max(0, -s)
        b = max(0, s + e - shape[d])
        if e - a - b <= 0:
            raise LowerError(f"DMA of {src.name}: dimension {d} of the region lies entirely in the padding")
        if (a or b) and not allow_pad:
            raise LowerError(f"DMA of {src.name}: region {region[d]} leaves the tensor (dim {d}, size {shape[d]})")
        lo.append(l); n.append(e); p0.append(a); p1.append(b); vlo.append(l + a); vn.append(e - a - b)

    def src_idx(d: int, v: int) -> int:  # view index -> source index
        return sc[d] * v - (0 if sc[d] > 1 else offs[d])

    if sc[D - 1] > 1:  # every other element: one-element rows with the stride as pitch
        outer = list(range(D - 1))
        for d in outer:
            if p0[d] or p1[d]:
                raise LowerError(f"DMA of {src.name}: padding with a strided innermost dimension is not supported")
        descs = []
        for pos in product(*[range(vlo[d], vlo[d] + vn[d]) for d in outer]):
            dram = sum(src_idx(d, p) * dstr[d] for p, d in zip(pos, outer)) + src_idx(D - 1, vlo[D - 1])
            sram = sum((p - lo[d]) * bstr[d] for p, d in zip(pos, outer)) + (vlo[D - 1] - lo[D - 1])
            descs.append(DmaDesc(src, sram, dram, vn[D - 1], 1, sc[D - 1] * dstr[D - 1]))
        return descs
    x_dims = [D - 1]
    while x_dims[0] > 0:
        j = x_dims[0] - 1
        inner_ok = all(p0[d] == 0 and p1[d] == 0 and vn[d] == shape[d] and n[d] == buf.shape[d] for d in x_dims)
        if not inner_ok or p0[j] or p1[j] or sc[j] > 1:
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
        dram = sum(src_idx(d, p) * dstr[d] for p, d in zip(pos, outer))
        sram = sum((p - lo[d]) * bstr[d] for p, d in zip(pos, outer))
        for d in x_dims:
            dram += src_idx(d, vlo[d]) * dstr[d]
        if ydim is not None:
            dram += src_idx(ydim, vlo[ydim]) * dstr[ydim]
            pads = (p0[ydim], p1[ydim], xp0, xp1)
            descs.append(DmaDesc(src, sram, dram, vn[ydim], x, sc[ydim] * dstr[ydim], *pads,
                                 pad_value=pad_value if any(pads) else 0))
        else:
            descs.append(DmaDesc(src, sram, dram, 1, x, x, 0, 0, xp0, xp1, pad_value=pad_value if xp0 or xp1 else 0))
    return descs
