"""Functional mode: runs every instruction once, in an order the tokens allow, without timing.

Fetch dispatches in program order into command queues of depth ``cmd_queue_depth``
(instruction ``j`` of a unit waits until instruction ``j - Q`` has been taken, i.e. the
unit finished ``j - Q - 1``), units run in order when their tokens are there. So the
deadlocks are exactly those of the timed run. A push onto a full token queue waits
instead of failing (overflow depends on timing); it is reported only if it never resolves.
"""
from __future__ import annotations

from collections import deque
from typing import Callable

from isa.config import HwConfig
from simulator.errors import DeadlockError, TokenOverflowError
from simulator.program import QUEUES, UNITS, InsnInfo


def run_functional(cfg: HwConfig, infos: list[InsnInfo], execute: Callable[[int], None]) -> None:
    """Execute the program's effects; raises DeadlockError / TokenOverflowError if it cannot finish."""
    n, Q, depth = len(infos), cfg.cmd_queue_depth, cfg.dep_queue_depth
    queues = [deque(), deque(), deque()]
    ndisp, ndone, tok = [0, 0, 0], [0, 0, 0], [0, 0, 0, 0]
    p = 0
    while True:
        progress = False
        while p < n:
            u = infos[p].unit
            if ndisp[u] >= Q and ndone[u] < ndisp[u] - Q:
                break
            queues[u].append(p)
            ndisp[u] += 1
            p += 1
            progress = True
        for u in (0, 1, 2):
            q = queues[u]
            while q:
                info = infos[q[0]]
                if not all(tok[x] for x in info.pops) or any(tok[x] >= depth for x in info.pushes):
                    break
                for x in info.pops:
                    tok[x] -= 1
                execute(q.popleft())
                for x in info.pushes:
                    tok[x] += 1
                ndone[u] += 1
                progress = True
        if p == n and not any(queues):
            return
        if not progress:
            raise _stuck(infos, queues, tok, depth, p, Q)


def _stuck(infos, queues, tok, depth, p, Q):
    parts, overflow = [], False
    for u in range(3):
        if queues[u]:
            idx = queues[u][0]
            info = infos[idx]
            empty = [QUEUES[x] for x in info.pops if tok[x] == 0]
            full = [QUEUES[x] for x in info.pushes if tok[x] >= depth]
            if empty:
                parts.append(f"the {UNITS[u]} unit waits at instruction {idx} ({info.kind}) to pop a token from "
                             f"{' and '.join(empty)} (empty, and no instruction that could push it can run)")
            else:
                overflow = True
                parts.append(f"instruction {idx} ({info.kind}) of the {UNITS[u]} unit pushes onto "
                             f"{' and '.join(full)}, which already holds {depth} tokens (dep_queue_depth={depth})")
    if p < len(infos):
        u = infos[p].unit
        parts.append(f"fetch waits to dispatch instruction {p} ({infos[p].kind}) into the full {UNITS[u]} "
                     f"command queue (depth {Q})")
    state = ", ".join(f"{QUEUES[x]}={tok[x]}" for x in range(4))
    cls = TokenOverflowError if overflow else DeadlockError
    return cls(("token queue overflow: " if overflow else "deadlock: ") + "; ".join(parts) + f". Token counts: {state}")
