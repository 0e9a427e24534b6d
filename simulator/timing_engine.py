"""The discrete-event timing engine: docs/timing.md, implemented event by event (not cycle by cycle).

Every visited cycle ``t`` is processed in four phases, which is the order of the
same-cycle dependencies of the contract:

1. instructions (and fetch bursts) ending at ``t`` finish; their tokens are pushed;
2. idle units take the head of their command queue (if written before ``t``) and start it
   if every token queue it pops is non-empty (tokens are consumed); DMA starts request the port;
3. if the DRAM port is free, it is granted to the highest-priority request (store, compute, load, fetch);
4. fetch dispatches at most one instruction (if its queue has space).

Then the engine jumps to the next cycle at which anything can happen.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from isa.config import HwConfig
from isa.timing import fetch_cycles
from simulator.budget import past_budget
from simulator.errors import DeadlockError, TokenOverflowError
from simulator.program import QUEUES, UNITS, InsnInfo

IDLE, WAIT_TOKEN, WAIT_PORT, RUN = 0, 1, 2, 3
_PRIORITY = (2, 1, 0)  # store, compute, load (fetch is last)


@dataclass
class Timeline:
    """Cycle stamps of one run; lists indexed by instruction, -1 where not applicable."""

    dispatch: list[int]
    take: list[int]
    start: list[int]
    grant: list[int]
    end: list[int]
    #: fetch bursts: (first instruction, count, request, grant, end)
    bursts: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    fetch_stall_queue: int = 0
    cycles: int = 0


def _overflow(info: InsnInfo, idx: int, q: int, t: int, depth: int) -> TokenOverflowError:
    return TokenOverflowError(
        f"instruction {idx} ({info.kind}) pushes a token onto {QUEUES[q]} at cycle {t}, but the queue already "
        f"holds {depth} tokens (dep_queue_depth={depth}); the consumer must pop before more are pushed")


def run_timed(cfg: HwConfig, infos: list[InsnInfo], execute: Callable[[int], None],
              max_cycles: int | None = None) -> Timeline:
    """Simulate the program's timing; ``execute(i)`` applies instruction ``i``'s effect at its start (DMA: grant).

    Raises :class:`BudgetError` when simulated time passes ``max_cycles`` (None: no limit)."""
    limit = float("inf")
    if max_cycles is not None:
        limit = max_cycles
    n = len(infos)
    Q, F, depth = cfg.cmd_queue_depth, cfg.fetch_burst, cfg.dep_queue_depth
    tl = Timeline([-1] * n, [-1] * n, [-1] * n, [-1] * n, [-1] * n)
    disp, take, start, grant, end = tl.dispatch, tl.take, tl.start, tl.grant, tl.end
    queues = [deque(), deque(), deque()]
    takes: list[list[int]] = [[], [], []]
    ndisp = [0, 0, 0]
    phase = [IDLE, IDLE, IDLE]
    cur = [-1, -1, -1]
    cend = [0, 0, 0]
    tok = [0, 0, 0, 0]
    port_free = 0
    fetch_next, fetch_req, fetch_end = 0, 0, -1
    burst: deque[int] = deque()
    pending_burst: tuple[int, int] = (0, 0)
    disp_ready = 0
    done = 0
    stall_q = 0
    t = 0
    inf = float("inf")
    while True:
        # 1. ends
        pushed = False  # a unit waiting for tokens can only start in a cycle that pushed one (or took it)
        for u in range(3):
            if phase[u] == RUN and cend[u] == t:
                idx = cur[u]
                info = infos[idx]
                for q in info.pushes:
                    if tok[q] >= depth:
                        raise _overflow(info, idx, q, t, depth)
                    tok[q] += 1
                    pushed = True
                end[idx] = t
                phase[u], cur[u] = IDLE, -1
                done += 1
        if fetch_end == t:
            first, cnt = pending_burst
            burst.extend(range(first, first + cnt))
            disp_ready, fetch_end = t, -1
        # 2. take and start
        for u in range(3):
            ph = phase[u]
            taken = ph == IDLE and queues[u] and queues[u][0] < t
            if taken:
                queues[u].popleft()  # dispatch cycle
                idx = queues[u].popleft()
                take[idx] = t
                takes[u].append(t)
                cur[u], phase[u] = idx, WAIT_TOKEN
            if (taken or (pushed and ph == WAIT_TOKEN)):
                idx = cur[u]
                info = infos[idx]
                pops = info.pops
                for q in pops:
                    if not tok[q]:
                        break
                else:
                    for q in pops:
                        tok[q] -= 1
                    start[idx] = t
                    if info.port:
                        phase[u] = WAIT_PORT
                    else:
                        execute(idx)
                        cend[u], phase[u] = t + info.dur, RUN
        # 3. DRAM port arbitration
        if port_free <= t:
            for u in _PRIORITY:
                if phase[u] == WAIT_PORT:
                    idx = cur[u]
                    grant[idx] = t
                    execute(idx)
                    cend[u] = port_free = t + infos[idx].dur
                    phase[u] = RUN
                    break
            else:
                if fetch_req >= 0 and fetch_req <= t:
                    cnt = min(F, n - fetch_next)
                    fetch_end = port_free = t + fetch_cycles(cfg, cnt)
                    tl.bursts.append((fetch_next, cnt, fetch_req, t, fetch_end))
                    pending_burst = (fetch_next, cnt)
                    fetch_next += cnt
                    fetch_req = -1
        # 4. dispatch
        if burst and disp_ready <= t:
            idx = burst[0]
            u = infos[idx].unit
            j = ndisp[u]
            if j < Q or (len(takes[u]) > j - Q and takes[u][j - Q] < t):
                burst.popleft()
                queues[u].append(t)  # queue holds (dispatch cycle, index) pairs, flattened
                queues[u].append(idx)
                disp[idx] = t
                ndisp[u] += 1
                stall_q += t - disp_ready
                disp_ready = t + 1
                if not burst and fetch_next < n:
                    fetch_req = t + 1
        if done == n:
            break
        # next cycle at which something can happen
        nt = inf
        for u in range(3):
            ph = phase[u]
            if ph == RUN:
                c = cend[u]
            elif ph == IDLE and queues[u]:
                c = queues[u][0] + 1
            elif ph == WAIT_PORT:
                c = port_free
            else:
                continue
            if c < nt:
                nt = c
        if 0 <= fetch_end < nt:
            nt = fetch_end
        if fetch_req >= 0:
            c = fetch_req if fetch_req > port_free else port_free
            if c < nt:
                nt = c
        if burst:
            u = infos[burst[0]].unit
            j = ndisp[u]
            if j < Q:
                if disp_ready < nt:
                    nt = disp_ready
            elif len(takes[u]) > j - Q:
                c = takes[u][j - Q] + 1
                if disp_ready > c:
                    c = disp_ready
                if c < nt:
                    nt = c
        if nt == inf:
            raise _deadlock(t, infos, phase, cur, tok, burst, ndisp, Q)
        if nt > limit:
            raise past_budget(int(nt), max_cycles)
        t = int(nt)
    tl.fetch_stall_queue = stall_q
    tl.cycles = max(end)
    return tl


def _deadlock(t, infos, phase, cur, tok, burst, ndisp, Q) -> DeadlockError:
    parts = []
    for u in range(3):
        if phase[u] == WAIT_TOKEN:
            info = infos[cur[u]]
            empty = [QUEUES[q] for q in info.pops if tok[q] == 0]
            parts.append(f"the {UNITS[u]} unit waits at instruction {cur[u]} ({info.kind}) to pop a token from "
                         f"{' and '.join(empty)} (empty, and no instruction that could push it can run)")
    if burst:
        idx = burst[0]
        u = infos[idx].unit
        parts.append(f"fetch waits to dispatch instruction {idx} ({infos[idx].kind}) into the full {UNITS[u]} "
                     f"command queue (depth {Q})")
    state = ", ".join(f"{QUEUES[q]}={tok[q]}" for q in range(4))
    return DeadlockError(f"deadlock at cycle {t}: " + "; ".join(parts) + f". Token counts: {state}")
