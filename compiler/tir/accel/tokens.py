"""Dependency-token insertion between the load, compute and store units.

Every operation lists the scratchpad buffers (copies) it reads and writes. For each
operation ``c`` and each neighbouring unit ``v``, the latest earlier operation on ``v`` that
conflicts with ``c`` (read-after-write, write-after-read or write-after-write) must finish
first. Tokens are counters, so the k-th pop of a queue is satisfied by its k-th push: the
pass walks the program in order, and when ``c`` needs an operation ``r`` not yet covered by
an earlier pop of the same queue, ``r`` pushes one token and ``c`` pops it. All
dependencies point backward in program order, so the result cannot deadlock. Loop-carried
dependencies (a buffer reused by the next tile) are the same rule across iterations, since
the program is the unrolled host loop nest.
"""
from __future__ import annotations

from dataclasses import dataclass, field

NEIGHBOURS = {"load": ("compute",), "compute": ("load", "store"), "store": ("compute",)}


@dataclass(eq=False)
class Op:
    """One accelerator operation in program order (emitted later as one runtime call)."""

    unit: str
    kind: str
    args: dict
    reads: tuple = ()
    writes: tuple = ()
    pops: list = field(default_factory=list)     # units this op waits for
    pushes: list = field(default_factory=list)   # units this op signals


def insert_tokens(ops: list[Op]) -> dict[str, int]:
    """Set ``pops``/``pushes`` on ``ops``; returns the number of tokens per queue."""
    last_w: dict = {}   # (unit, key) -> op index
    last_r: dict = {}
    covered: dict = {}  # (from, to) -> op index already waited for
    counts: dict[str, int] = {}
    for ci, c in enumerate(ops):
        for v in NEIGHBOURS[c.unit]:
            r = -1
            for key in c.reads:
                r = max(r, last_w.get((v, key), -1))
            for key in c.writes:
                r = max(r, last_w.get((v, key), -1), last_r.get((v, key), -1))
            if r > covered.get((v, c.unit), -1):
                ops[r].pushes.append(c.unit)
                c.pops.append(v)
                covered[(v, c.unit)] = r
                q = f"{v}->{c.unit}"
                counts[q] = counts.get(q, 0) + 1
        for key in c.reads:
            last_r[(c.unit, key)] = ci
        for key in c.writes:
            last_w[(c.unit, key)] = ci
    return counts
