"""The on-chip scratchpads as numpy arrays, shaped by element.

``inp``: (inp_depth, batch, block_in), ``wgt``: (wgt_depth, block_out, block_in),
``acc``: (acc_depth, batch, block_out) int64 holding acc_width-bit values,
``out``: (acc_depth, batch, block_out) int{out_width} (mirrors acc), ``uop``: raw uint32
words plus the decoded ``uop_dst``/``uop_src``/``uop_wgt`` int64 index arrays.
"""
from __future__ import annotations

import numpy as np

from isa.config import HwConfig
from isa.encoding import decode_uop_array, int_dtype


class Scratchpads:
    """All scratchpads of one core; contents persist across runs until :meth:`reset`."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        self.reset()

    def reset(self) -> None:
        c = self.cfg
        self.inp = np.zeros((c.inp_depth, c.batch, c.block_in), int_dtype(c.inp_width))
        self.wgt = np.zeros((c.wgt_depth, c.block_out, c.block_in), int_dtype(c.wgt_width))
        self.acc = np.zeros((c.acc_depth, c.batch, c.block_out), np.int64)
        self.out = np.zeros((c.acc_depth, c.batch, c.block_out), int_dtype(c.out_width))
        self._acc_rows = _rows(self.acc)  # the same memory, one opaque item per row
        self._out_rows = _rows(self.out)
        self.uop = np.zeros(c.uop_depth, np.uint32)
        self.uop_dst = np.zeros(c.uop_depth, np.int64)
        self.uop_src = np.zeros(c.uop_depth, np.int64)
        self.uop_wgt = np.zeros(c.uop_depth, np.int64)
        self.wgt_version = 0  # bumped by every write to wgt: keys caches derived from its contents
        self._uop_tables: dict[bytes, tuple] = {}  # uop words -> decoded (dst, src, wgt)

    def as_dict(self) -> dict[str, np.ndarray]:
        return {"uop": self.uop, "inp": self.inp, "wgt": self.wgt, "acc": self.acc, "out": self.out}

    # ------------------------------------------------------------------ writes
    def write_acc(self, idx: np.ndarray | slice, values: np.ndarray) -> None:
        """acc[idx] = values (integers of any dtype, already wrapped to acc_width) and the OUT mirror: the low
        out_width bits (numpy's assignment narrows integers by two's complement, with no temporary).

        With an index array and one value row per index, rows are copied as whole byte strings (a
        scatter of ``n`` rows instead of ``n * batch * block_out`` elements; the last duplicate wins, as
        with elementwise assignment)."""
        if isinstance(idx, np.ndarray) and idx.ndim == 1 and getattr(values, "shape", None) == (idx.size,) + self.acc.shape[1:]:
            v = np.ascontiguousarray(values, np.int64)
            self._acc_rows[idx] = v.reshape(idx.size, -1).view(self._acc_rows.dtype).reshape(idx.size)
            o = v.astype(self.out.dtype)  # integer casts wrap (two's complement)
            self._out_rows[idx] = o.reshape(idx.size, -1).view(self._out_rows.dtype).reshape(idx.size)
            return
        self.acc[idx] = values
        self.out[idx] = values

    def write_wgt(self, base: int, block: np.ndarray) -> None:
        self.wgt[base:base + block.shape[0]] = block
        self.wgt_version += 1

    def write_uops(self, base: int, words: np.ndarray) -> None:
        n = words.shape[0]
        self.uop[base:base + n] = words
        key = self.uop[base:base + n].tobytes()  # programs reload the same tables: decode each once
        decoded = self._uop_tables.get(key)
        if decoded is None:
            decoded = decode_uop_array(words, self.cfg)
            if len(self._uop_tables) >= 256:
                self._uop_tables.clear()
            self._uop_tables[key] = decoded
        d, s, w = decoded
        self.uop_dst[base:base + n] = d
        self.uop_src[base:base + n] = s
        self.uop_wgt[base:base + n] = w


def _rows(a: np.ndarray) -> np.ndarray:
    """A 1-D view of ``a`` with one opaque (void) item per row: fancy indexing copies whole rows."""
    return a.reshape(a.shape[0], -1).view(np.dtype((np.void, a[0].nbytes))).reshape(a.shape[0])
