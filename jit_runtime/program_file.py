"""The program file (``.vtaprog``, a NumPy ``.npz`` archive): save and load a :class:`Program`.

Arrays in the archive (format version 1):

* ``header``: UTF-8 JSON as uint8 -- ``{"format": "vta-program", "version": 1, "name",
  "config": HwConfig dict, "insn_addr", "n_insns", "dram_bytes",
  "buffers": {name: {"addr", "shape", "dtype"}}, "expected": [names], "runtime": {...}}``
* ``insns``: uint8, ``16 * n_insns`` bytes (the little-endian instruction words)
* ``dram``: uint8, the used part of the DRAM image (instructions included at ``insn_addr``)
* ``expected.<name>``: optional reference outputs, compared bit-exactly by ``vta sim``

See ``docs/runtime.md``.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from isa import make_config
from isa.encoding import INSN_BYTES
from isa.errors import ConfigError
from jit_runtime.errors import ProgramFileError
from jit_runtime.program import BufferInfo, Program

FORMAT = "vta-program"
VERSION = 1


def save_program(program: Program, path: str | Path) -> Path:
    """Write ``program`` to ``path`` (compressed npz; the name is used as given)."""
    header = {
        "format": FORMAT, "version": VERSION, "name": program.name, "config": program.cfg.to_dict(),
        "insn_addr": int(program.insn_addr), "n_insns": int(program.n_insns), "dram_bytes": int(program.dram.size),
        "buffers": {n: {"addr": b.addr, "shape": list(b.shape), "dtype": b.dtype} for n, b in program.buffers.items()},
        "expected": sorted(program.expected), "runtime": program.runtime,
    }
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
              "insns": np.asarray(program.insn_bytes, dtype=np.uint8).reshape(-1),
              "dram": np.asarray(program.dram, dtype=np.uint8)}
    for name, value in program.expected.items():
        arrays[f"expected.{name}"] = np.asarray(value)
    path = Path(path)
    with open(path, "wb") as fh:  # a file object keeps numpy from appending ".npz"
        np.savez_compressed(fh, **arrays)
    return path


def load_program(path: str | Path) -> Program:
    """Read a program file; raises :class:`ProgramFileError` with the reason if it is not one."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"program file {str(path)!r} does not exist")
    if not zipfile.is_zipfile(path):
        raise ProgramFileError(f"{path}: not a vta program file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ProgramFileError(f"{path}: not a vta program file ({exc})") from None
    for key in ("header", "insns", "dram"):
        if key not in arrays:
            raise ProgramFileError(f"{path}: not a vta program file (no {key!r} array)")
    try:
        header = json.loads(bytes(arrays["header"]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProgramFileError(f"{path}: unreadable header ({exc})") from None
    if header.get("format") != FORMAT:
        raise ProgramFileError(f"{path}: format {header.get('format')!r} is not {FORMAT!r}")
    if header.get("version") != VERSION:
        raise ProgramFileError(f"{path}: format version {header.get('version')!r}; this runtime reads {VERSION}")
    try:
        cfg = make_config(header["config"])
    except ConfigError as exc:
        raise ProgramFileError(f"{path}: bad config: {exc}") from None
    insns, dram = arrays["insns"].astype(np.uint8), arrays["dram"].astype(np.uint8)
    addr, n = int(header["insn_addr"]), int(header["n_insns"])
    if insns.size != n * INSN_BYTES or not np.array_equal(dram[addr:addr + insns.size], insns):
        raise ProgramFileError(f"{path}: corrupt: the instruction bytes do not match the DRAM image at {addr:#x}")
    buffers = {name: BufferInfo(int(b["addr"]), tuple(int(s) for s in b["shape"]), str(b["dtype"]))
               for name, b in header["buffers"].items()}
    expected = {name: arrays[f"expected.{name}"] for name in header.get("expected", [])}
    return Program(cfg, insns, dram, addr, n, buffers, expected, header.get("runtime", {}), header.get("name", "program"))
