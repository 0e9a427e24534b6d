"""A finished program: instruction stream + DRAM image + named buffers, runnable on any device.

``CommandQueue.finalize()`` makes one; ``Program.run(device)`` replays it on a fresh copy of
its DRAM image and returns the cycles, the profile and every named buffer's contents.
``Program.save``/``Program.load`` use the program file below.

The program file (``.vtaprog``, a NumPy ``.npz`` archive): save and load a :class:`Program`.

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
import math
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from isa import Instruction, decode_stream, make_config, unit_of
from isa.asm import mnemonic
from isa.encoding import INSN_BYTES
from isa.errors import ConfigError
from jit_runtime.device import Device, make_device
from jit_runtime.errors import ProgramFileError

if TYPE_CHECKING:
    from isa import HwConfig


@dataclass(frozen=True)
class BufferInfo:
    """Where a named buffer lives in the program's DRAM image."""

    addr: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def read(self, image: np.ndarray) -> np.ndarray:
        return image[self.addr:self.addr + self.nbytes].view(np.dtype(self.dtype)).reshape(self.shape).copy()


@dataclass
class RunResult:
    """Cycles and profile of one run; ``outputs`` holds the named buffers after a ``Program.run``."""

    cycles: int
    profile: dict[str, Any]
    device_result: Any = field(repr=False, default=None)
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def write_trace(self, path: str | Path) -> None:
        """Chrome/Perfetto trace JSON (only devices that record traces, e.g. ``sim`` with ``trace=True``)."""
        self._device_method("write_trace")(path)

    def plot_timeline(self, path: str | Path) -> None:
        self._device_method("plot_timeline")(path)

    def _device_method(self, name: str) -> Any:
        fn = getattr(self.device_result, name, None)
        if fn is None:
            raise ValueError(f"the device result {type(self.device_result).__name__} has no {name}()")
        return fn


def stream_summary(insns: list[Instruction]) -> dict[str, Any]:
    """Counts by mnemonic and by unit, and dependency flag totals (for profiles and ``vta disasm``)."""
    kinds: Counter[str] = Counter()
    units: Counter[str] = Counter()
    flags: Counter[str] = Counter()
    # one representative per (class, memory, op, flags): a stream has a handful of distinct ones
    groups: dict[tuple, list] = {}
    for insn in insns:
        key = (type(insn), getattr(insn, "mem", None), getattr(insn, "op", None), insn.deps)
        g = groups.get(key)
        if g is None:
            groups[key] = [insn, 1]
        else:
            g[1] += 1
    for insn, n in groups.values():
        kinds[mnemonic(insn)] += n
        units[unit_of(insn).name.lower()] += n
        for f in insn.deps.names():
            flags[f] += n
    return {"n_insns": len(insns), "by_kind": dict(sorted(kinds.items())), "by_unit": dict(sorted(units.items())),
            "dep_flags": dict(sorted(flags.items()))}


@dataclass
class Program:
    """Everything a device needs to run a program, plus where its named buffers are."""

    cfg: "HwConfig"
    insn_bytes: np.ndarray
    dram: np.ndarray
    insn_addr: int
    n_insns: int
    buffers: dict[str, BufferInfo] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    runtime: dict[str, Any] = field(default_factory=dict)
    name: str = "program"

    def instructions(self) -> list[Instruction]:
        return decode_stream(self.insn_bytes, self.cfg)

    def input(self, name: str) -> np.ndarray:
        """The contents of buffer ``name`` before the run."""
        return self.buffers[name].read(self.dram)

    def run(self, device: "str | Device" = "sim", *, trace: bool = False) -> RunResult:
        """Run on a fresh copy of the DRAM image; ``outputs`` has every named buffer afterwards."""
        dev = make_device(device, self.cfg, trace=trace)
        image = self.dram.copy()
        res = dev.run(image, self.insn_addr, self.n_insns)
        profile = dict(res.profile)
        profile["runtime"] = self.runtime
        outputs = {name: info.read(image) for name, info in self.buffers.items()}
        return RunResult(int(res.cycles), profile, res, outputs)

    def mismatches(self, outputs: dict[str, np.ndarray]) -> list[str]:
        """Names of expected buffers whose ``outputs`` differ (bit-exact comparison)."""
        return [n for n, want in self.expected.items()
                if n not in outputs or outputs[n].shape != want.shape or not np.array_equal(outputs[n], want)]

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "config": self.cfg.name, "insn_addr": self.insn_addr,
                "dram_bytes": int(self.dram.size), **stream_summary(self.instructions()),
                "buffers": {n: {"addr": b.addr, "shape": list(b.shape), "dtype": np.dtype(b.dtype).name}
                            for n, b in self.buffers.items()},
                "uop_cache": self.runtime.get("uop_cache", {})}

    def save(self, path: str | Path) -> Path:
        return save_program(self, path)

    @classmethod
    def load(cls, path: str | Path) -> "Program":
        return load_program(path)


FORMAT = "vta-program"
VERSION = 1


def program_arrays(program: Program) -> dict[str, np.ndarray]:
    """The archive members of ``program`` (``header``, ``insns``, ``dram``, ``expected.*``); an exported module
    (:mod:`jit_runtime.module_file`) stores its programs the same way."""
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
    return arrays


def save_program(program: Program, path: str | Path) -> Path:
    """Write ``program`` to ``path`` (compressed npz; the name is used as given)."""
    path = Path(path)
    with open(path, "wb") as fh:  # a file object keeps numpy from appending ".npz"
        np.savez_compressed(fh, **program_arrays(program))
    return path


def _fail(path: Path, msg: str) -> ProgramFileError:
    return ProgramFileError(f"{path}: {msg}")


def _int_field(header: dict, key: str, path: Path, lo: int = 0) -> int:
    v = header.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise _fail(path, f"corrupt header: {key!r} = {v!r}; must be an integer >= {lo}")
    return v


def _numeric_dtype(value, what: str, path: Path) -> np.dtype:
    try:
        dt = np.dtype(value)
    except (TypeError, ValueError, SyntaxError):
        dt = None
    if dt is None or dt.kind not in "biuf":
        raise _fail(path, f"{what} has dtype {value!r}; allowed: numeric dtypes (bool, int*, uint*, float*)")
    return dt


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise _fail(path, "not a vta program file (a single .npy array, not an .npz archive)")
            return {k: data[k] for k in data.files}
    except ProgramFileError:
        raise
    except Exception as exc:  # a damaged archive raises zlib.error, BadZipFile, EOFError, NotImplementedError...
        raise _fail(path, f"not a readable vta program file ({type(exc).__name__}: {exc})") from None


def _buffers(header: dict, dram_size: int, path: Path) -> dict[str, BufferInfo]:
    raw = header.get("buffers", {})
    if not isinstance(raw, dict):
        raise _fail(path, f"corrupt header: 'buffers' must be an object of name -> {{addr, shape, dtype}}, got {raw!r:.60}")
    out = {}
    for name, b in raw.items():
        where = f"buffer {name!r}"
        if not isinstance(b, dict) or not {"addr", "shape", "dtype"} <= set(b):
            raise _fail(path, f"corrupt header: {where} must have addr, shape and dtype, got {b!r:.80}")
        shape = b["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise _fail(path, f"corrupt header: {where} shape {shape!r:.60} must be a list of integers >= 0")
        addr = _int_field(b, "addr", path)
        if not isinstance(b["dtype"], str):
            raise _fail(path, f"corrupt header: {where} dtype {b['dtype']!r:.40} must be a dtype string")
        _numeric_dtype(b["dtype"], where, path)
        info = BufferInfo(addr, tuple(shape), b["dtype"])
        nbytes = math.prod(shape) * np.dtype(b["dtype"]).itemsize  # Python ints: no int64 overflow
        if addr + nbytes > dram_size:
            raise _fail(path, f"corrupt header: {where} [{addr}, {addr + nbytes}) lies outside the DRAM image "
                              f"of {dram_size} bytes")
        out[str(name)] = info
    return out


def _expected(header: dict, arrays: dict, buffers: dict[str, BufferInfo], path: Path) -> dict[str, np.ndarray]:
    names = header.get("expected", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _fail(path, f"corrupt header: 'expected' must be a list of buffer names, got {names!r:.60}")
    out = {}
    for name in names:
        arr = arrays.get(f"expected.{name}")
        if arr is None:
            raise _fail(path, f"corrupt: expected output {name!r} is listed in the header but has no array")
        if name not in buffers:
            raise _fail(path, f"corrupt: expected output {name!r} is not a buffer (buffers: {sorted(buffers)})")
        buf = buffers[name]
        _numeric_dtype(arr.dtype, f"expected output {name!r}", path)
        if arr.shape != buf.shape or arr.dtype != np.dtype(buf.dtype):
            raise _fail(path, f"corrupt: expected output {name!r} is {arr.shape} {arr.dtype}; its buffer is "
                              f"{buf.shape} {buf.dtype}")
        out[name] = arr
    return out


def load_program(path: str | Path) -> Program:
    """Read a program file; raises :class:`ProgramFileError` naming what is damaged if it is not a valid one.

    Checked: the archive and its compression, the header (a JSON object with every field of the
    right type), the config, member shapes and dtypes (uint8 vectors), instruction bytes against
    the DRAM image, buffers inside the image with numeric dtypes, expected outputs matching them.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"program file {str(path)!r} does not exist")
    if not path.is_file() or not zipfile.is_zipfile(path):
        raise _fail(path, "not a vta program file (not an .npz archive)")
    return program_from_arrays(_read_arrays(path), path)


def program_from_arrays(arrays: dict[str, np.ndarray], path) -> Program:
    """A :class:`Program` from archive members (as :func:`program_arrays` writes them), with every check of
    :func:`load_program`; ``path`` names the source in error messages."""
    for key in ("header", "insns", "dram"):
        if key not in arrays:
            raise _fail(path, f"not a vta program file (no {key!r} array)")
        a = arrays[key]
        if a.dtype != np.uint8 or a.ndim != 1:
            raise _fail(path, f"corrupt: member {key!r} is {a.dtype} with shape {a.shape}; must be a uint8 vector")
    try:
        header = json.loads(arrays["header"].tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(path, f"unreadable header ({exc})") from None
    if not isinstance(header, dict):
        raise _fail(path, f"corrupt header: must be a JSON object, got {type(header).__name__}")
    if header.get("format") != FORMAT:
        raise _fail(path, f"format {header.get('format')!r} is not {FORMAT!r}")
    if header.get("version") != VERSION:
        raise _fail(path, f"format version {header.get('version')!r}; this runtime reads {VERSION}")
    if not isinstance(header.get("config"), dict):
        raise _fail(path, f"corrupt header: 'config' must be a JSON object, got {header.get('config')!r:.60}")
    try:
        cfg = make_config(header["config"])
    except ConfigError as exc:
        raise _fail(path, f"bad config: {exc}") from None
    insns, dram = arrays["insns"], arrays["dram"]
    addr, n = _int_field(header, "insn_addr", path), _int_field(header, "n_insns", path, lo=1)
    if addr % INSN_BYTES:
        raise _fail(path, f"corrupt header: insn_addr={addr} must be a multiple of {INSN_BYTES}")
    if "dram_bytes" in header and _int_field(header, "dram_bytes", path) != dram.size:
        raise _fail(path, f"corrupt: the header says {header['dram_bytes']} DRAM bytes, the image has {dram.size}")
    if insns.size != n * INSN_BYTES or not np.array_equal(dram[addr:addr + insns.size], insns):
        raise _fail(path, f"corrupt: the instruction bytes do not match the DRAM image at {addr:#x}")
    buffers = _buffers(header, dram.size, path)
    expected = _expected(header, arrays, buffers, path)
    name, runtime = header.get("name", "program"), header.get("runtime", {})
    if not isinstance(name, str) or not isinstance(runtime, dict):
        raise _fail(path, f"corrupt header: 'name' must be a string and 'runtime' an object, got {name!r:.40}, "
                          f"{runtime!r:.40}")
    return Program(cfg, insns, dram, addr, n, buffers, expected, runtime, name)
