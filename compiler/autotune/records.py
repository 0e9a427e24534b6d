"""Tuning records: one JSON line per trial, and the best record per task read back for a build.

A line: ``{"vta_tuning": 1, "hw": {"name", "hash"}, "task": {...}, "config": {knobs}, "result":
{"cycles", "gops"} | null, "error": str | null, "time": unix seconds, "tuner": name}``.
Reading never raises on bad content: a line that is not JSON, not a tuning record, for another
hardware config, or with knobs the task cannot use is skipped with a :class:`TuningLogWarning` naming
``FILE:LINE``; lines skipped for the same reason share one warning (:class:`SkippedLines`: a log of another
hardware config is one warning, not one per line).
"""
from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from compiler.autotune.measure import Result
from compiler.autotune.task import Task, config_hash, shape_from_ident
from compiler.topi.knobs import ConvKnobs
from isa import HwConfig

FORMAT = 1
KNOB_FIELDS = ("oc_tile", "h_tile", "ic_tile", "vthreads", "vthread_axis", "order", "epilogue")


class TuningLogWarning(UserWarning):
    """A tuning-log line that was skipped, or a task that no record covers."""


@dataclass
class Record:
    """One trial: task identity (JSON), knobs, cycles (None on error), error text, time, tuner; ``where``: FILE:LINE."""

    task: dict
    knobs: ConvKnobs
    cycles: int | None
    error: str | None
    time: float
    tuner: str = ""
    where: str = ""

    @property
    def task_key(self) -> str:
        return json.dumps(self.task, sort_keys=True)


def gops(task: Task, cycles: int) -> float:
    """Giga-operations per second (2 per MAC) at the config's clock."""
    return 2 * task.macs() / (cycles / (task.cfg.clock_mhz * 1e6)) / 1e9


def record_line(task: Task, knobs: ConvKnobs, res: Result, tuner: str = "") -> str:
    """The JSON line of one trial."""
    result = None if res.cycles is None else {"cycles": int(res.cycles), "gops": round(gops(task, res.cycles), 4)}
    return json.dumps({"vta_tuning": FORMAT, "hw": {"name": task.cfg.name, "hash": config_hash(task.cfg)},
                       "task": task.ident, "config": asdict(knobs), "result": result, "error": res.error,
                       "time": round(time.time(), 3), "seconds": round(res.seconds, 3), "tuner": tuner},
                      sort_keys=True)


MAX_RANGES = 8  # line ranges a grouped warning lists before "..."


def line_ranges(wheres: list[str]) -> str:
    """``FILE:LINE`` locations (one file) as their sorted line numbers in ranges: ``"3-7, 9, 12-40"`` (at most
    :data:`MAX_RANGES` ranges, then ``", ..."``); locations without a line number are listed as they are."""
    tails = [w.rsplit(":", 1)[-1] for w in wheres]
    if not all(t.isdigit() for t in tails):
        return ", ".join(wheres[:MAX_RANGES]) + (", ..." if len(wheres) > MAX_RANGES else "")
    lines = sorted({int(t) for t in tails})
    runs: list[list[int]] = []
    for n in lines:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:MAX_RANGES]]
    return ", ".join(text) + (", ..." if len(runs) > MAX_RANGES else "")


class SkippedLines:
    """A tuning log's skipped lines by reason. :meth:`warn` emits one :class:`TuningLogWarning` per reason, at its
    first line (``"FILE:LINE: reason; skipped"``, with that line's ``detail``) and naming the other lines skipped for
    the same reason, so a log of another CPU, device or hardware config, or of another target, is one warning."""

    def __init__(self) -> None:
        self._by_reason: dict[str, list[tuple[str, str]]] = {}

    def add(self, where: str, reason: str, detail: str = "") -> None:
        """Skip the line at ``where`` (``FILE:LINE``) for ``reason``; ``detail`` is shown for the first such line."""
        self._by_reason.setdefault(reason, []).append((where, detail))

    def warn(self, stacklevel: int = 3) -> None:
        """Emit the warnings and forget them; ``stacklevel`` as ``warnings.warn`` takes it, from this method (3: the
        warning points at the caller of the function that calls this)."""
        for reason, lines in self._by_reason.items():
            (where, detail), rest = lines[0], lines[1:]
            more = (f" (as are {len(rest)} more line(s) for the same reason: {line_ranges([w for w, _ in rest])})"
                    if rest else "")
            warnings.warn(f"{where}: {reason}{detail}; skipped{more}", TuningLogWarning, stacklevel=stacklevel)
        self._by_reason.clear()


def fastest_per_task(tasks: list, rows, path: str | Path, reject: Callable, fallback: str, what: str = "",
                     skip: frozenset = frozenset()) -> dict:
    """Task key -> knobs of its fastest usable record. ``rows``: ``(task key, knobs, cost, FILE:LINE, label)`` of the
    log at ``path`` (``label`` names a record's task where the model lacks it); ``reject(task, knobs)``: why the task
    cannot use the knobs, or None. Warns (:class:`TuningLogWarning`, at the caller's caller) for records of tasks not
    in ``tasks``, knobs a task rejects, and tasks no record covers (they use ``fallback``); tasks whose key is in
    ``skip`` are left out without a warning. ``what`` names the records in that last warning (``"llvm "``)."""
    by_key = {t.key: t for t in tasks}
    chosen: dict = {}
    skipped = SkippedLines()
    for key, knobs, _cost, where, label in sorted(rows, key=lambda r: r[2]):
        task = by_key.get(key)
        if task is None:
            skipped.add(where, "record for a task that is not in this model", f" ({label})")
            continue
        if key in chosen or key in skip:
            continue
        why = reject(task, knobs)
        if why:
            skipped.add(where, f"knobs {knobs} cannot be used for {task.describe()} ({why})")
            continue
        chosen[key] = knobs
    skipped.warn(stacklevel=4)
    missing = [t for t in tasks if t.key not in chosen and t.key not in skip]
    if missing:
        warnings.warn(f"tuning log {path}: no usable {what}record for {len(missing)} of {len(tasks)} task(s) "
                      f"({'; '.join(t.describe() for t in missing[:4])}{'; ...' if len(missing) > 4 else ''}); "
                      f"they use {fallback}", TuningLogWarning, stacklevel=3)
    return chosen


def _parse(obj, where: str, cfg: HwConfig, skipped: SkippedLines) -> Record | None:
    if not isinstance(obj, dict) or obj.get("vta_tuning") is None:
        skipped.add(where, "not a vta-stack tuning record (no 'vta_tuning' field)")
        return None
    if obj["vta_tuning"] != FORMAT:
        skipped.add(where, f"tuning record format {obj['vta_tuning']!r}, this version reads {FORMAT}")
        return None
    if obj.get("target") is not None:  # the llvm and cuda targets' records name their target
        skipped.add(where, f"a record for target {obj['target']!r}, not the accelerator")
        return None
    missing = [f for f in ("hw", "task", "config", "result", "error", "time") if f not in obj]
    if missing:
        skipped.add(where, f"tuning record lacks fields {missing}")
        return None
    hw = obj["hw"]
    want = config_hash(cfg)
    if not isinstance(hw, dict) or hw.get("hash") != want:
        got = hw.get("name") if isinstance(hw, dict) else hw
        skipped.add(where, f"record for hardware config {got!r} (hash "
                           f"{hw.get('hash') if isinstance(hw, dict) else '?'}), but this build is for {cfg.name!r} "
                           f"(hash {want})")
        return None
    try:
        cs = shape_from_ident(obj["task"])
        conf = obj["config"]
        unknown = sorted(set(conf) - set(KNOB_FIELDS))
        if unknown:
            raise ValueError(f"unknown knobs {unknown}")
        knobs = ConvKnobs(**conf)
        knobs.check(cs)
        res = obj["result"]
        cycles = None if res is None else int(res["cycles"])
        if cycles is not None and cycles <= 0:
            raise ValueError(f"cycles {cycles} must be > 0")
        t = float(obj["time"])
        if obj["error"] is not None and not isinstance(obj["error"], str):
            raise TypeError(f"error must be a string or null, not {type(obj['error']).__name__}")
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        skipped.add(where, f"malformed tuning record ({type(exc).__name__}: {exc})")
        return None
    return Record(obj["task"], knobs, cycles, obj["error"], t, str(obj.get("tuner", "")), where)


def load_records(path: str | Path, cfg: HwConfig) -> list[Record]:
    """Every usable record of the log at ``path`` for hardware config ``cfg`` (bad lines: warnings, skipped)."""
    out = []
    skipped = SkippedLines()
    for where, obj in log_lines(path, skipped):
        rec = _parse(obj, where, cfg, skipped)
        if rec is not None:
            out.append(rec)
    skipped.warn()
    return out


def log_lines(path: str | Path, skipped: SkippedLines) -> Iterator[tuple[str, object]]:
    """``(FILE:LINE, object)`` for each JSON line of the tuning log at ``path``: blank lines are skipped, lines that
    are not JSON added to ``skipped``; a missing file is a FileNotFoundError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tuning log {path} does not exist")
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                skipped.add(where, f"not JSON ({exc.msg} at column {exc.colno})")
                continue
            yield where, obj


def best_records(records: list[Record]) -> dict[str, Record]:
    """The fastest successful record per task key (ties: the earliest line)."""
    best: dict[str, Record] = {}
    for r in records:
        if r.cycles is None:
            continue
        cur = best.get(r.task_key)
        if cur is None or r.cycles < cur.cycles:
            best[r.task_key] = r
    return best


class TuningLog:
    """Appends trial lines to a log file (created with its parents when missing)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, task: Task, knobs: ConvKnobs, res: Result, tuner: str = "") -> None:
        if self.path is None:
            return
        line = task.record_line(knobs, res, tuner) if hasattr(task, "record_line") else record_line(task, knobs, res, tuner)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
