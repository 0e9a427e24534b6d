"""Register tiles along an image row with the pixels in the vector lanes (pixel-vector depthwise convs, small
direct convs, max pooling): how many pixels a tile takes and how many vector registers a row of them needs."""
from __future__ import annotations

from compiler.tir.arith import pow2_pieces

WHOLE_ROW_VECTORS = 4
DW_MIN_ROW_PIXELS = 7  # rows this wide take pixel vectors even below half a vector (AVX-512's 7x7 maps)


def row_tile(width: int, lanes: int) -> int:
    """Output pixels per register tile along a row of ``width`` pixels on a target with ``lanes`` float32 lanes:
    two vectors or one, whichever divides the row; else the whole row where it is at most
    :data:`WHOLE_ROW_VECTORS` vectors wide (the code generator splits it into power-of-two pieces: no ragged tile),
    else two vectors with a ragged last tile; 0 when the row is narrower than half a vector and than
    :data:`DW_MIN_ROW_PIXELS` (the caller's other layout then). A ragged last tile reads zero columns of its padded
    input and stores its lanes outside the row one by one: MobileNetV2's stride-2 96-channel depthwise conv
    (56-pixel rows) took 0.19 ms with 32-pixel tiles on AVX-512 and 0.06 ms with whole rows (kernels alone, two
    threads, Zen 5); 28- and 20-pixel rows 1.2-2x faster on AVX2 and AVX-512. 7-pixel rows on AVX-512 (960
    channels, 7x7): 0.030 ms with 8-channel vectors gathered from NCHW, 0.020 as rows (the depthwise conv has since
    copied its channel-blocked input by in-register transposes, 0.014 ms alone but slower in the model: it keeps
    rows, and now tiles 7-pixel rows by 4 pixels instead of these pieces; strided ones below half a vector take
    channel vectors, :func:`~compiler.topi.conv2d_direct.depthwise_row_tile`)."""
    if width < lanes:
        return width if 2 * width >= lanes or width >= DW_MIN_ROW_PIXELS else 0
    for xt in (2 * lanes, lanes):
        if width % xt == 0:
            return xt
    if width <= WHOLE_ROW_VECTORS * lanes:
        return width
    return 2 * lanes


def row_vectors(xt: int, lanes: int) -> int:
    """Vector registers one row of ``xt`` accumulators takes: the code generator's power-of-two pieces
    (:func:`~compiler.tir.arith.pow2_pieces`), each ``ceil(piece / lanes)`` registers (14 pixels on 16 lanes:
    8 + 4 + 2, three registers)."""
    return sum(-(-piece // lanes) for piece in pow2_pieces(xt))


def tile_rows(rows: int, per_row: int, budget: int) -> int:
    """Rows per register tile of ``per_row`` registers each within ``budget`` registers: the most that divide
    ``rows`` (more than one), else the most that fit (the last tile then ragged)."""
    fits = list(range(min(max(1, budget // per_row), rows), 0, -1))
    return next((r for r in fits if rows % r == 0 and r > 1), fits[0])
