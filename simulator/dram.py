"""The DRAM image and the 2D DMA engines (LOAD with padding, strided STORE)."""
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
    return as_strided(dram[byte_base:], shape=(y, row_bytes), strides=(pitch_bytes, 1))


def execute_load(sp: Scratchpads, dram: np.ndarray, insn: Load, cfg: HwConfig) -> None:
    """Copy the block into the scratchpad with its padding, every pad lane ``pad_value`` (a NOP block writes nothing)."""
    if insn.y_size == 0 or insn.x_size == 0:
        return
    mem = MemType(insn.mem).name.lower()
    eb = cfg.elem_bytes(mem)
    dtype, shape = elem_layout(cfg, mem)
    y, x = insn.y_size, insn.x_size
    base = insn.dram_base * eb
    if y == 1 or insn.x_stride == x:
        raw = dram[base:base + y * x * eb]
    else:
        raw = np.ascontiguousarray(_rows(dram, base, y, x * eb, insn.x_stride * eb))
    data = raw.view(dtype).reshape((y, x) + shape)
    rows, cols = insn.y_pad0 + y + insn.y_pad1, insn.x_pad0 + x + insn.x_pad1
    if rows == y and cols == x:
        block = data.reshape((y * x,) + shape)
    else:
        full = np.full((rows, cols) + shape, insn.pad_value, dtype)
        full[insn.y_pad0:insn.y_pad0 + y, insn.x_pad0:insn.x_pad0 + x] = data
        block = full.reshape((rows * cols,) + shape)
    base, n = insn.sram_base, block.shape[0]
    if mem == "uop":
        sp.write_uops(base, block)
    elif mem == "acc":
        sp.write_acc(slice(base, base + n), block.astype(np.int64))
    elif mem == "wgt":
        sp.write_wgt(base, block)
    else:
        getattr(sp, mem)[base:base + n] = block


def execute_store(sp: Scratchpads, dram: np.ndarray, insn: Store, cfg: HwConfig) -> None:
    """Write ``y_size`` rows of ``x_size`` OUT elements to DRAM with row pitch ``x_stride``."""
    if insn.y_size == 0 or insn.x_size == 0:
        return
    eb = cfg.out_elem_bytes
    y, x = insn.y_size, insn.x_size
    dtype, _ = elem_layout(cfg, "out")
    src = np.ascontiguousarray(sp.out[insn.sram_base:insn.sram_base + y * x], dtype=dtype)
    src = src.view(np.uint8).reshape(y, x * eb)
    base = insn.dram_base * eb
    if y == 1 or insn.x_stride == x:
        dram[base:base + y * x * eb] = src.reshape(-1)
    elif insn.x_stride > x:
        _rows(dram, base, y, x * eb, insn.x_stride * eb)[...] = src
    else:  # overlapping rows: later rows win, as the hardware writes them in order
        for r in range(y):
            start = base + r * insn.x_stride * eb
            dram[start:start + x * eb] = src[r]
