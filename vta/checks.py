"""Checks the ``vta`` commands run on their file arguments before any work.

Output paths must be writable files in existing folders and never one of the command's
inputs (``vta run --trace model.onnx`` would otherwise overwrite the model); arrays read
from ``.npy``/``.npz`` files must be numeric and at least 1-D; calibration data must also be finite
(model inputs with NaN/Inf are reported by ``Module.set_input`` with a ``NonFiniteInputWarning``).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np


class OutputPathError(ValueError):
    """An output path that cannot be written, or that names one of the command's inputs."""


class InputArrayError(ValueError):
    """An array file that is unreadable, not numeric, 0-d, or (where finite values are required) holds NaN/Inf."""


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output_path(path: str | Path, option: str, inputs: dict[str, str | Path | None], force: bool = False) -> Path:
    """``path`` can be written as a file, is none of ``inputs`` (option -> path) and, unless ``force``, does not exist
    yet (no command overwrites a file it did not create without ``--force``); raises :class:`OutputPathError`."""
    p = Path(path)
    for what, src in inputs.items():
        if src is None:
            continue
        s = Path(src)
        if p.resolve() == s.resolve() or _same(p, s):
            raise OutputPathError(f"{option} {p} is the same file as the {what} ({s}): it would be overwritten; "
                                  f"choose another output path")
    if p.is_dir():
        raise OutputPathError(f"{option} {p} is a folder; give a file path")
    if p.exists() and not force:
        raise OutputPathError(f"{option} {p} already exists; pass --force to overwrite it, or choose another path")
    parent = p.resolve().parent
    if not parent.is_dir():
        raise OutputPathError(f"{option} {p}: the folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OutputPathError(f"{option} {p} is not writable (permissions of {p if p.exists() else parent})")
    return p


def check_output_paths(outputs: dict[str, str | Path | None], inputs: dict[str, str | Path | None],
                       force: bool = False) -> None:
    """:func:`check_output_path` for every given output (option -> path), and no two outputs name the same file;
    run before any work."""
    given = {opt: Path(p) for opt, p in outputs.items() if p}
    for opt, p in given.items():
        check_output_path(p, opt, inputs, force)
    seen: dict[Path, str] = {}
    for opt, p in given.items():
        other = seen.setdefault(p.resolve(), opt)
        if other != opt:
            raise OutputPathError(f"{other} and {opt} name the same file {p}; give each output its own path")


def check_array(a: np.ndarray, what: str, finite: bool = True) -> np.ndarray:
    """``a`` is a numeric array of rank >= 1 (with only finite values if ``finite``); raises :class:`InputArrayError`."""
    if a.dtype.kind not in "biuf":
        raise InputArrayError(f"{what} has dtype {a.dtype}; allowed: numeric arrays (bool, int*, uint*, float*)")
    if a.ndim == 0:
        raise InputArrayError(f"{what} is a 0-d array (a scalar); save the array with its full shape")
    if finite and a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        bad = ~np.isfinite(a)
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputArrayError(f"{what} holds {int(bad.sum())} NaN/Inf value(s) (first at index {first}); "
                              f"this data must be finite")
    return a


def load_arrays(path: str | Path, what: str, finite: bool = True) -> np.ndarray | dict[str, np.ndarray]:
    """Read a ``.npy`` (one array) or ``.npz`` (name -> array) file without pickles; every array is checked
    (NaN/Inf refused if ``finite``)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} file not found: {p}")
    try:
        data = np.load(p, allow_pickle=False)
        if isinstance(data, np.ndarray):
            return check_array(data, f"{what} {p}", finite)
        with data:
            return {k: check_array(data[k], f"{what} {p} array {k!r}", finite) for k in data.files}
    except InputArrayError:
        raise
    except Exception as exc:  # truncated files, pickled object arrays, bad zip members: many exception types
        raise InputArrayError(f"{what} {p} is not a readable .npy/.npz file of numeric arrays "
                              f"({type(exc).__name__}: {exc})") from None
