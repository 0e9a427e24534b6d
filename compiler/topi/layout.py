"""Blocked activation layouts in TE (:func:`compiler.graph.accel_interface.pack_activation` and its inverse):
NCHW <-> ``(N/B, C/BI, H, W, B, BI)`` and (N, K) <-> ``(N/B, K/BI, B, BI)``, zero-padding / cropping N and C."""
from __future__ import annotations

from compiler import te
from compiler.te import Tensor
from compiler.topi.injective import COPY_PARALLEL_ELEMENTS


def pack(shape: tuple[int, ...], dtype: str, batch: int, block: int) -> tuple[list[Tensor], Tensor]:
    """The packed copy of an (N, C[, H, W]) tensor; padded batch rows and channels are zero."""
    if len(shape) not in (2, 4):
        raise te.TeError(f"pack: expects a 2-D (N, K) or 4-D NCHW tensor, got shape {shape}")
    n, c = shape[:2]
    nb, cb = -(-n // batch), -(-c // block)
    x = te.placeholder(shape, dtype, "x")
    zero = te.const(0.0, "float32") if dtype == "float32" else te.const(0, dtype)
    if len(shape) == 4:
        out = (nb, cb, shape[2], shape[3], batch, block)

        def f(i, j, y, w, b, k):
            ni, ci = i * batch + b, j * block + k
            return te.select((ni < n) & (ci < c), x[ni, ci, y, w], zero)
    else:
        out = (nb, cb, batch, block)

        def f(i, j, b, k):
            ni, ci = i * batch + b, j * block + k
            return te.select((ni < n) & (ci < c), x[ni, ci], zero)
    return [x], te.compute(out, f, name="pack", dtype=dtype)


def unpack(shape: tuple[int, ...], dtype: str, n: int, c: int) -> tuple[list[Tensor], Tensor]:
    """The (n, c[, H, W]) tensor held in a packed array of ``shape`` (cropping the padding)."""
    xp = te.placeholder(shape, dtype, "xp")
    if len(shape) == 6:
        _, _, h, w, batch, block = shape
        return [xp], te.compute((n, c, h, w), lambda i, j, y, x: xp[i // batch, j // block, y, x, i % batch, j % block],
                                name="unpack", dtype=dtype)
    if len(shape) == 4:
        _, _, batch, block = shape
        return [xp], te.compute((n, c), lambda i, j: xp[i // batch, j // block, i % batch, j % block],
                                name="unpack", dtype=dtype)
    raise te.TeError(f"unpack: expects a 4-D or 6-D packed tensor, got shape {shape}")


def schedule_pack_cpu(s, y: Tensor) -> None:
    """The 6-D packed copy of :func:`pack` as loops, no flat index: parallel over (image block, channel block, row)
    from ``COPY_PARALLEL_ELEMENTS`` packed elements, a pixel's ``BI`` channels unrolled (a 3-channel input packed to 16: 0.12 -> 0.10
    ms one thread; the flat loop divided its index into six per element)."""
    st = s[y]
    i, j, r, _w, _b, k = st.leaf_iter_vars
    rows = st.fuse(st.fuse(i, j), r)
    size = 1
    for d in y.shape:
        size *= int(d)
    if size >= COPY_PARALLEL_ELEMENTS:
        st.parallel(rows)
    st.unroll(k)

