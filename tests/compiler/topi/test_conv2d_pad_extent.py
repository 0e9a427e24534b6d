"""``conv2d_direct.flat_pad_extent`` / ``row_pad_extent``: the padded input's rows and columns per stride phase that
register tiles read unguarded (shared by the float32 conv and the packed int8 conv), hand-computed."""
from __future__ import annotations

import pytest

from compiler.topi.conv2d_direct import Conv2dSpec, flat_pad_extent, row_pad_extent


def _spec(hw, k, stride=1, pad=0, dilation=1):
    return Conv2dSpec(1, 16, hw, hw, 16, k, k, (stride, stride), (pad,) * 4, (dilation, dilation))


@pytest.mark.parametrize("spec,xt,want", [
    # 7x7 map, 3x3 pad 1: 49 pixels in 9 tiles of 6, the last ending at pixel 53 = output row 7 (one past the map),
    # whose taps read padded rows 7..9: 10 rows (9 padded); columns 7 + 2 = 9
    (_spec(7, 3, pad=1), 6, (10, 9)),
    (_spec(6, 3, pad=1), 6, (8, 8)),  # 36 pixels, 6 tiles exactly: the padded 8 x 8 map
    # 14x14 stride 2 pad 1 -> 7x7: last tile's row 7 reads padded rows 14..16 (17 rows, 16 padded); per phase
    # ceil(16 / 2) = 8 columns, and output column 6's last tap reads phase column 6 + 2 // 2 = 7
    (_spec(14, 3, stride=2, pad=1), 6, (17, 8)),
    # 9x9, 3x3 dilated by 2 -> 5x5: 25 pixels in 5 tiles of 6, last pixel 29 = row 5, taps at rows 5, 7, 9: 10 rows;
    # columns max(9, 5 + 4) = 9
    (_spec(9, 3, dilation=2), 6, (10, 9)),
])
def test_flat_pad_extent(spec, xt, want):
    assert flat_pad_extent(spec, xt) == want


@pytest.mark.parametrize("spec,xt,yt,want", [
    # 7x7 pad 1 -> 7x7 in tiles of 3 rows x 4 pixels: 3 row tiles end at row 8, reading padded rows up to 10 (11
    # rows); 2 tiles a row end at column 7, whose taps read columns up to 9 (10 columns)
    (_spec(7, 3, pad=1), 4, 3, (11, 10)),
    # one row a tile (the int8 depthwise conv): no extra rows; 7x7 stride 2 pad 1 -> 4x4, tiles of 3 end at column 5,
    # whose last tap reads phase column 5 + 1 = 6 (7 columns; ceil(9 / 2) = 5 padded)
    (_spec(7, 3, stride=2, pad=1), 3, 1, (9, 7)),
    (_spec(7, 3, stride=2, pad=1), 4, 1, (9, 5)),  # tiles of 4: the padded map's 5 columns suffice
])
def test_row_pad_extent(spec, xt, yt, want):
    assert row_pad_extent(spec, xt, yt) == want
