"""The DRAM image and the 2D DMA engines (LOAD with padding, strided STORE).

Blocks move as bytes: DRAM rows are a strided ``uint8`` view, scratchpad elements a
``(depth, element bytes)`` byte view of the scratchpad array, so a transfer is one or two
copies with no conversion (an ACC load also widens to the int64 accumulators and a UOP load
decodes the micro-ops).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from isa.config import HwConfig
from isa.encoding import elem_layout
from isa.instructions import Load, MemType, Store
from simulator.errors import SimulatorError
from simulator.scratchpads import Scratchpads


def check_image(dram: np.ndarray) -> None:
    """The DRAM must be a writable, contiguous, 1-D uint8 array (modified in place)."""
    if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
        raise SimulatorError(f"dram must be a 1-D uint8 numpy array, got "
                             f"{type(dram).__name__} {getattr(dram, 'dtype', '')} {getattr(dram, 'shape', '')}")
    if not dram.flags.c_contiguous or not dram.flags.writeable:
        raise SimulatorError("dram must be C-contiguous and writeable (it is modified in place)")


def _rows(dram: np.ndarray, byte_base: int, y: int, row_bytes: int, pitch_bytes: int) -> np.ndarray:
    """A (y, row_bytes) uint8 view of DRAM rows (bounds are checked before)."""
    if y == 1 or pitch_bytes == row_bytes:
        return dram[byte_base:byte_base + y * row_bytes].reshape(y, row_bytes)
    if row_bytes <= pitch_bytes and byte_base + y * pitch_bytes <= dram.size:  # a plain reshape: no as_strided
        return dram[byte_base:byte_base + y * pitch_bytes].reshape(y, pitch_bytes)[:, :row_bytes]
    return as_strided(dram[byte_base:], shape=(y, row_bytes), strides=(pitch_bytes, 1))


class Dma:
    """LOAD and STORE of one core: DRAM <-> the scratchpads of ``sp``."""

    def __init__(self, cfg: HwConfig, sp: Scratchpads):
        self.cfg, self.sp = cfg, sp
        #: per memory type: (name, element bytes, element dtype, element shape)
        self.layout = {int(m): (m.name.lower(), cfg.elem_bytes(m.name.lower())) + elem_layout(cfg, m.name.lower())
                       for m in MemType}
        self._views: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pads: dict[tuple[str, int], np.ndarray] = {}

    def _bytes(self, name: str) -> np.ndarray:
        """The scratchpad ``name`` as (depth, element bytes) uint8 (the same memory; remade after a reset)."""
        arr = getattr(self.sp, name)
        view = self._views.get(name)
        if view is None or view[0] is not arr:
            view = (arr, arr.reshape(arr.shape[0], -1).view(np.uint8))
            self._views[name] = view
        return view[1]

    def _pad(self, name: str, value: int) -> np.ndarray:
        """The bytes of one ``name`` element whose every lane is ``value``."""
        pat = self._pads.get((name, value))
        if pat is None:
            _, eb, dtype, shape = self.layout[MemType[name.upper()]]
            pat = np.full((1,) + shape, value, dtype).view(np.uint8).reshape(eb)
            self._pads[(name, value)] = pat
        return pat

    def load(self, dram: np.ndarray, insn: Load) -> None:
        """Copy the block into the scratchpad with its padding, every pad lane ``pad_value`` (a NOP block writes
        nothing)."""
        y, x = insn.y_size, insn.x_size
        if y == 0 or x == 0:
            return
        name, eb, dtype, shape = self.layout[insn.mem]
        src = _rows(dram, insn.dram_base * eb, y, x * eb, insn.x_stride * eb)
        y0, x0 = insn.y_pad0, insn.x_pad0
        rows, cols = y0 + y + insn.y_pad1, x0 + x + insn.x_pad1
        base, n = insn.sram_base, rows * cols
        if name in ("inp", "wgt"):  # straight into the scratchpad's bytes
            dst = self._bytes(name)[base:base + n]
            if rows == y and cols == x:
                dst.reshape(y, x * eb)[...] = src
            else:
                dst[...] = self._pad(name, insn.pad_value)
                dst.reshape(rows, cols, eb)[y0:y0 + y, x0:x0 + x] = src.reshape(y, x, eb)
            if name == "wgt":
                self.sp.wgt_version += 1
            return
        full = np.zeros((rows, cols * eb), np.uint8)  # UOP and ACC pad with 0
        full.reshape(rows, cols, eb)[y0:y0 + y, x0:x0 + x] = src.reshape(y, x, eb)
        block = full.view(dtype).reshape((n,) + shape)
        if name == "uop":
            self.sp.write_uops(base, block)
        else:
            self.sp.write_acc(slice(base, base + n), block.astype(np.int64))

    def store(self, dram: np.ndarray, insn: Store) -> None:
        """Write ``y_size`` rows of ``x_size`` OUT elements to DRAM with row pitch ``x_stride``."""
        y, x = insn.y_size, insn.x_size
        if y == 0 or x == 0:
            return
        eb = self.layout[MemType.OUT][1]
        src = self._bytes("out")[insn.sram_base:insn.sram_base + y * x].reshape(y, x * eb)
        base, pitch = insn.dram_base * eb, insn.x_stride * eb
        if y == 1 or pitch >= x * eb:
            _rows(dram, base, y, x * eb, pitch)[...] = src
        else:  # overlapping rows: later rows win, as the hardware writes them in order
            for r in range(y):
                dram[base + r * pitch:base + r * pitch + x * eb] = src[r]


def execute_load(sp: Scratchpads, dram: np.ndarray, insn: Load, cfg: HwConfig) -> None:
    """:meth:`Dma.load` (one-off; a core keeps its :class:`Dma`)."""
    Dma(cfg, sp).load(dram, insn)


def execute_store(sp: Scratchpads, dram: np.ndarray, insn: Store, cfg: HwConfig) -> None:
    """:meth:`Dma.store` (one-off; a core keeps its :class:`Dma`)."""
    Dma(cfg, sp).store(dram, insn)
