"""The fused requantization ALU op (REQUANT): its per-channel parameter record and exact semantics.

One ALU pass computes, per accumulator lane of output channel ``o``::

    x   = wrap32(acc + bias[o])                       (acc_width-bit wrap, like ADD)
    p   = x * mult[o]                                 (exact: 32 x 32 -> 64-bit product)
    y   = round_shift(p, shift[o])                    (floor((p + 2**(shift-1)) / 2**shift); p if shift == 0)
    acc = min(max(y + zp[o], lo[o]), hi[o])

The parameters are a 128-bit *record* per output channel held in the WGT scratchpad: the
micro-op's ``src`` index (plus the ALU loop's src offsets) names a WGT element, and channel
``o`` reads the first 128 bits of that element's row ``o`` (``block_in * wgt_width`` bits, so
configs with ``block_in * wgt_width < 128`` have no REQUANT). The WGT read port is idle during
ALU instructions, so the op needs no extra memory port and costs what every ALU op costs.

Record layout (little-endian bytes of the row):

======  =====  ======================================================
bytes   field  meaning
======  =====  ======================================================
0-3     bias   int32, added (wrapping) before the multiply
4-7     mult   int32 multiplier
8       shift  bits 0..5: rounding right shift 0..63 (bits 6, 7 ignored)
9       -      reserved (0)
10-11   zp     int16 output zero point, added after the shift
12-13   lo     int16 lower clip (relu: max(out_min, zp))
14-15   hi     int16 upper clip
======  =====  ======================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from isa.config import HwConfig

RECORD_BITS = 128
SHIFT_BITS = 6


@dataclass(frozen=True)
class RecordField:
    name: str
    lo: int      # first bit
    width: int
    signed: bool


#: The record's fields, in bit order (the single source for numpy, RTL and packing).
RECORD_FIELDS = (
    RecordField("bias", 0, 32, True),
    RecordField("mult", 32, 32, True),
    RecordField("shift", 64, SHIFT_BITS, False),
    RecordField("zp", 80, 16, True),
    RecordField("lo", 96, 16, True),
    RecordField("hi", 112, 16, True),
)


def record_supported(cfg: "HwConfig") -> bool:
    """Whether a WGT row of ``cfg`` holds a record per output channel (``block_in * wgt_width >= 128``)."""
    return cfg.block_in * cfg.wgt_width >= RECORD_BITS


@dataclass(frozen=True)
class Record:
    """Record fields as arrays (or Amaranth values) broadcast over the lanes they apply to."""

    bias: Any
    mult: Any
    shift: Any
    zp: Any
    lo: Any
    hi: Any


def requant_fn(ops: Any, a: Any, r: Record) -> Any:
    """REQUANT on primitives ``ops`` (``isa.alu.NumpyOps`` or the RTL's): see the module docstring."""
    x = ops.wrap(ops.add(a, r.bias))
    y = ops.round_shift(ops.mul(x, r.mult), r.shift)
    return ops.min(ops.max(ops.add(y, r.zp), r.lo), r.hi)


def _row_bytes(rows: np.ndarray, wgt_width: int) -> np.ndarray:
    """(..., block_in) WGT row values -> (..., 16) little-endian record bytes."""
    dt = np.dtype(f"<i{wgt_width // 8}")
    raw = np.ascontiguousarray(np.asarray(rows).astype(dt)).view(np.uint8)
    return raw[..., :RECORD_BITS // 8]


def unpack_records(rows: np.ndarray, wgt_width: int) -> Record:
    """Record fields (int64 arrays of shape ``rows.shape[:-1]``) from WGT rows ``(..., block_in)``."""
    b = _row_bytes(rows, wgt_width)
    lead = b.shape[:-1]
    flat = b.reshape(-1, b.shape[-1])
    out = {}
    for f in RECORD_FIELDS:  # each field's bytes, zero-padded to 8, read as one little-endian word
        nbytes = -(-f.width // 8)
        if f.lo % 8 == 0 and f.width in (8, 16, 32):  # a whole little-endian integer: read as its own type
            raw = np.ascontiguousarray(flat[:, f.lo // 8:f.lo // 8 + nbytes])
            out[f.name] = raw.view(f"<{'i' if f.signed else 'u'}{nbytes}").reshape(lead).astype(np.int64)
            continue
        word = np.zeros((flat.shape[0], 8), np.uint8)
        word[:, :nbytes] = flat[:, f.lo // 8:f.lo // 8 + nbytes]
        v = word.view("<u8").reshape(lead).astype(np.int64)
        v &= (1 << f.width) - 1
        if f.signed:
            sign = 1 << (f.width - 1)
            v = (v ^ sign) - sign
        out[f.name] = v
    return Record(**out)


def pack_records(cfg: "HwConfig", *, bias, mult, shift, zp, lo, hi, n_channels: int) -> np.ndarray:
    """WGT elements ``(ceil(n_channels / block_out), block_out, block_in)`` holding one record per channel.

    Scalars broadcast to every channel; channels past ``n_channels`` in the last element get zero records.
    Raises ValueError naming a field whose value does not fit.
    """
    if not record_supported(cfg):
        raise ValueError(f"config {cfg.name!r}: a WGT row has block_in * wgt_width = {cfg.block_in * cfg.wgt_width} "
                         f"bits per output channel; the REQUANT record needs {RECORD_BITS}")
    vals = {"bias": bias, "mult": mult, "shift": shift, "zp": zp, "lo": lo, "hi": hi}
    n_el = -(-n_channels // cfg.block_out)
    rec = np.zeros((n_el * cfg.block_out, cfg.block_in * cfg.wgt_width // 8), np.uint8)
    for f in RECORD_FIELDS:
        v = np.broadcast_to(np.asarray(vals[f.name], dtype=np.int64), (n_channels,))
        lo_v, hi_v = (-(1 << (f.width - 1)), (1 << (f.width - 1)) - 1) if f.signed else (0, (1 << f.width) - 1)
        if np.any(v < lo_v) or np.any(v > hi_v):
            raise ValueError(f"REQUANT record field {f.name} must be in {lo_v}..{hi_v}, got {v.min()}..{v.max()}")
        u = v & ((1 << f.width) - 1)
        for k in range(-(-f.width // 8)):
            rec[:n_channels, f.lo // 8 + k] |= ((u >> (8 * k)) & 0xFF).astype(np.uint8)
    dt = np.dtype(f"<i{cfg.wgt_width // 8}")
    return rec.view(dt).reshape(n_el, cfg.block_out, cfg.block_in)
