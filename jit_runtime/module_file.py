"""The exported-module file (``.vtamod``, a NumPy ``.npz`` archive): a compiled model as data.

Written by ``compiler`` (``Module.export`` / ``vta build``), read here with numpy alone: loading and
running it needs the runtime layer only (:mod:`jit_runtime.exported`, the host-op kernels of
:mod:`jit_runtime.host_ops`, a device), never the compiler, the HDL tools or onnxruntime.

Members (format ``vta-module``, version 1):

* ``header``: UTF-8 JSON as uint8 -- ``{"format", "version", "name", "config": HwConfig dict, "signature"
  (hex of ``isa.config_signature``), "inputs"/"outputs": [{"name", "shape", "dtype"}], "constants":
  {tensor: member}, "programs": count, "steps": [...], "producer": {...}}``
* ``prog.<j>.header`` / ``.insns`` / ``.dram``: program ``j`` exactly as a ``.vtaprog`` holds it
  (:func:`jit_runtime.program.program_arrays`): the instruction stream, its micro-kernels and the DRAM
  image with the layer's weights and constants in place
* ``const.<k>``: constant tensors the steps read; ``attr.<k>``: array attributes of host ops;
  ``idx.<k>``: int32/int64 gather indices (``-1``: a zero byte lane)

A step is ``{"kind": "host", "name", "op", "inputs", "outputs", "attrs"}`` (a host-op kernel) or
``{"kind": "accel", "name", "op", "inputs", "output", "shape", "dtype", "macs", "intrinsic", "calls",
"out_index"}``: each call fills the program's input slots from the step's inputs (``"source"``: one input's
bytes as they are; ``"index"``: elements gathered from the concatenated inputs), runs it, and reads buffer
``"out"``; the layer output is the calls' outputs concatenated (or gathered by ``out_index``).
See docs/runtime.md ("Exported modules").
"""
from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from isa import make_config
from isa.errors import ConfigError
from isa.signature import config_signature
from jit_runtime.errors import ModuleFileError, ProgramFileError
from jit_runtime.program import Program
from jit_runtime.program import program_arrays, program_from_arrays

FORMAT = "vta-module"
VERSION = 1
SUFFIX = ".vtamod"


def _attr_types() -> dict[str, type]:
    """The dataclasses a host op's attributes may hold (all defined in the runtime layer)."""
    from jit_runtime.host_ops.int_elementwise import QAddParams, QAvgPoolParams, QMulParams, QPoolParams
    from jit_runtime.host_ops.int_transformer import QGeluParams, QLayerNormParams, QSoftmaxParams
    from jit_runtime.host_ops.pooling import PoolAxis
    from jit_runtime.host_ops.requant import Requant

    return {c.__name__: c for c in (Requant, QAddParams, QMulParams, QPoolParams, QAvgPoolParams, PoolAxis,
                                    QSoftmaxParams, QLayerNormParams, QGeluParams)}


# ---- attribute encoding ----------------------------------------------------------------------------------
def encode_attr(value: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    """``value`` as JSON (arrays go to ``arrays`` as ``attr.<k>``); raises ValueError naming ``where`` for a type
    an exported module cannot hold."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, np.generic):
        return value
    if isinstance(value, np.generic):
        return {"__np__": value.dtype.str, "v": value.item()}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise ValueError(f"{where}: array of dtype {value.dtype} cannot be exported (numeric arrays only)")
        key = f"attr.{len([k for k in arrays if k.startswith('attr.')])}"
        arrays[key] = value
        return {"__array__": key}
    if isinstance(value, tuple):
        return {"__tuple__": [encode_attr(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode_attr(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError(f"{where}: dict keys must be strings to be exported, got {list(value)[:4]}")
        return {"__dict__": {k: encode_attr(v, arrays, f"{where}.{k}") for k, v in value.items()}}
    types = _attr_types()
    if dataclasses.is_dataclass(value) and types.get(type(value).__name__) is type(value):
        return {"__dataclass__": type(value).__name__,
                "fields": {f.name: encode_attr(getattr(value, f.name), arrays, f"{where}.{f.name}")
                           for f in dataclasses.fields(value)}}
    raise ValueError(f"{where}: a {type(value).__module__}.{type(value).__name__} cannot be exported; host-op "
                     f"attributes may hold numbers, strings, arrays, lists, tuples, dicts and {sorted(types)}")


def decode_attr(value: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    """Inverse of :func:`encode_attr`; raises :class:`ModuleFileError` on anything it did not write."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [decode_attr(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict) or len(value) not in (1, 2):
        raise ModuleFileError(f"{where}: corrupt attribute {value!r:.80}")
    if "__array__" in value:
        arr = arrays.get(value["__array__"]) if isinstance(value["__array__"], str) else None
        if arr is None or not value["__array__"].startswith("attr."):
            raise ModuleFileError(f"{where}: attribute array {value['__array__']!r:.40} is missing")
        return arr
    if "__tuple__" in value and isinstance(value["__tuple__"], list):
        return tuple(decode_attr(v, arrays, f"{where}[{i}]") for i, v in enumerate(value["__tuple__"]))
    if "__dict__" in value and isinstance(value["__dict__"], dict):
        return {k: decode_attr(v, arrays, f"{where}.{k}") for k, v in value["__dict__"].items()}
    if "__np__" in value and "v" in value:
        try:
            return np.dtype(value["__np__"]).type(value["v"])
        except (TypeError, ValueError) as exc:
            raise ModuleFileError(f"{where}: corrupt scalar {value!r:.60} ({exc})") from None
    if "__dataclass__" in value and isinstance(value.get("fields"), dict):
        cls = _attr_types().get(value["__dataclass__"])
        if cls is None:
            raise ModuleFileError(f"{where}: unknown attribute type {value['__dataclass__']!r:.40}; allowed: "
                                  f"{sorted(_attr_types())}")
        names = {f.name for f in dataclasses.fields(cls)}
        fields = value["fields"]
        if set(fields) - names:
            raise ModuleFileError(f"{where}: {cls.__name__} has no fields {sorted(set(fields) - names)}")
        try:
            return cls(**{k: decode_attr(v, arrays, f"{where}.{k}") for k, v in fields.items()})
        except (TypeError, ValueError) as exc:
            raise ModuleFileError(f"{where}: invalid {cls.__name__} ({exc})") from None
    raise ModuleFileError(f"{where}: corrupt attribute {value!r:.80}")


# ---- save ------------------------------------------------------------------------------------------------
def save_module_file(path: str | Path, header: dict, programs: list[Program], arrays: dict[str, np.ndarray]) -> Path:
    """Write a module file: ``header`` (format, version, config and signature are filled in here from the
    programs' config), its programs and the ``const.*``/``attr.*``/``idx.*`` arrays."""
    if not programs:
        raise ValueError("an exported module needs at least one accelerator program (the model has no "
                         "accelerator layers)")
    cfg = programs[0].cfg
    header = {"format": FORMAT, "version": VERSION, **header, "config": cfg.to_dict(),
              "signature": f"{config_signature(cfg):#x}", "programs": len(programs)}
    members = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)}
    for j, prog in enumerate(programs):
        for k, a in program_arrays(prog).items():
            members[f"prog.{j}.{k}"] = a
    members.update(arrays)
    path = Path(path)
    with open(path, "wb") as fh:  # a file object keeps numpy from appending ".npz"
        np.savez_compressed(fh, **members)
    return path


# ---- load ------------------------------------------------------------------------------------------------
def peek_format(path: str | Path) -> str | None:
    """The ``format`` of an archive's header (``"vta-module"``, ``"vta-program"``), or None when ``path`` is not a
    readable archive with a JSON header (the full loaders then say what is wrong)."""
    try:
        with zipfile.ZipFile(path) as z, z.open("header.npy") as fh:
            header = json.loads(np.lib.format.read_array(fh, allow_pickle=False).tobytes().decode())
        return header.get("format") if isinstance(header, dict) else None
    except Exception:  # not a zip, no header, damaged: not recognisable here
        return None


def _fail(path, msg: str) -> ModuleFileError:
    return ModuleFileError(f"{path}: {msg}")


def _is_int(v, lo: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _spec(item, where: str, path) -> dict:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not isinstance(item.get("shape"), list) \
            or not all(_is_int(d) for d in item["shape"]) or not isinstance(item.get("dtype"), str):
        raise _fail(path, f"corrupt header: {where} must be {{name, shape: [ints >= 0], dtype}}, got {item!r:.80}")
    try:
        dt = np.dtype(item["dtype"])
    except (TypeError, ValueError):
        raise _fail(path, f"corrupt header: {where} dtype {item['dtype']!r:.30} is not a dtype") from None
    if dt.kind not in "biufc":
        raise _fail(path, f"corrupt header: {where} dtype {dt} is not numeric")
    return {"name": item["name"], "shape": tuple(item["shape"]), "dtype": dt}


def read_module_file(path: str | Path) -> tuple[dict, list[Program], dict[str, np.ndarray]]:
    """Read and check a module file: (header, programs, other arrays). Raises :class:`ModuleFileError` naming
    what is damaged or mismatched (format, version, config signature, programs, steps, indices)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"module file {str(path)!r} does not exist")
    if not path.is_file() or not zipfile.is_zipfile(path):
        raise _fail(path, "not a vta module file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # a damaged archive raises zlib.error, BadZipFile, EOFError, ValueError...
        raise _fail(path, f"not a readable vta module file ({type(exc).__name__}: {exc})") from None
    raw = arrays.pop("header", None)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
        raise _fail(path, "not a vta module file (no uint8 'header' member)")
    try:
        header = json.loads(raw.tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(path, f"unreadable header ({exc})") from None
    if not isinstance(header, dict):
        raise _fail(path, f"corrupt header: must be a JSON object, got {type(header).__name__}")
    if header.get("format") != FORMAT:
        hint = " (a single program: use vta sim / vta disasm)" if header.get("format") == "vta-program" else ""
        raise _fail(path, f"format {header.get('format')!r:.40} is not {FORMAT!r}{hint}")
    if header.get("version") != VERSION:
        raise _fail(path, f"format version {header.get('version')!r:.20}; this runtime reads version {VERSION} "
                          f"(re-export the model with this version of vta-stack)")
    if not isinstance(header.get("config"), dict):
        raise _fail(path, f"corrupt header: 'config' must be a JSON object, got {header.get('config')!r:.60}")
    try:
        cfg = make_config(header["config"])
    except (ConfigError, TypeError, ValueError) as exc:
        raise _fail(path, f"bad config: {exc}") from None
    want = f"{config_signature(cfg):#x}"
    if header.get("signature") != want:
        raise _fail(path, f"config signature {header.get('signature')!r:.30} does not match its config "
                          f"{cfg.name!r} ({want}): the file is damaged or was edited")
    n_prog = header.get("programs")
    if not _is_int(n_prog, 1):
        raise _fail(path, f"corrupt header: 'programs' = {n_prog!r:.30}; must be an integer >= 1")
    programs = []
    for j in range(n_prog):
        members = {k[len(f"prog.{j}."):]: arrays.pop(k) for k in list(arrays) if k.startswith(f"prog.{j}.")}
        try:
            prog = program_from_arrays(members, f"{path} program {j}")
        except ProgramFileError as exc:
            raise ModuleFileError(str(exc)) from None
        if prog.cfg.to_dict() != cfg.to_dict():
            raise _fail(path, f"program {j} was compiled for config {prog.cfg.name!r}, the module for {cfg.name!r}")
        if "out" not in prog.buffers:
            raise _fail(path, f"program {j} has no 'out' buffer (buffers: {sorted(prog.buffers)})")
        programs.append(prog)
    stray = [k for k in arrays if not k.startswith(("const.", "attr.", "idx."))]
    if stray:
        raise _fail(path, f"unexpected members {stray[:4]} (programs {n_prog})")
    return header, programs, arrays


__all__ = ["FORMAT", "VERSION", "SUFFIX", "peek_format", "save_module_file", "read_module_file", "encode_attr", "decode_attr"]
