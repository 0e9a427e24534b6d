"""The JSON-lines result log of a sweep: one record per evaluation, keyed by design hash; a rerun resumes from it.

Only the process that drives a sweep writes its log, one line per result as it arrives (one ``write`` in append
mode, flushed and fsynced), so a retried or re-queued task never writes twice. A run killed mid-line leaves a
damaged last line: the next load skips it (``damaged`` counts such lines) and the next append starts a new line.
A synthesis cache shared by several sweeps is the same kind of file; :meth:`ResultLog.refresh` reads what other
processes appended since.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class ResultLog:
    """Records by key (``record["key"]``), loaded from ``path`` if it exists; :meth:`append` adds one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: dict[str, dict] = {}
        self.duplicates = 0  # keys seen more than once in the file (a log written by one sweep has none)
        self.damaged = 0  # lines that are not a JSON record (cut by a killed run)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.refresh()

    def refresh(self) -> None:
        """(Re)read the file: records appended by other processes become visible."""
        self.records, self.duplicates, self.damaged = {}, 0, 0
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    rec = None
                if not line.endswith(b"\n") or not isinstance(rec, dict) or "key" not in rec:
                    self.damaged += 1
                    continue
                if rec["key"] in self.records:
                    self.duplicates += 1
                self.records[rec["key"]] = rec

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` (it must carry a ``key`` not yet in the log)."""
        key = record["key"]
        if key in self.records:
            raise ValueError(f"record {key} is already in {self.path}")
        line = json.dumps(record, sort_keys=True) + "\n"
        with self.path.open("ab") as f:
            if f.tell() > 0:  # a damaged last line (no newline): end it, so this record starts its own line
                with self.path.open("rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        line = "\n" + line
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())
        self.records[key] = record
