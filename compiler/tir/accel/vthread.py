"""Virtual-thread interleaving: merge the per-thread operation lists into one program.

Each virtual thread owns its copy of every buffer inside the thread loop, so threads are
independent. Each thread's list is cut into *segments* that end with a GEMM (with its epilogue ALU
operations, if they follow, unless they are marked ``deferred``: then they form a segment of their own):
the loads feeding it, then the compute. Resets and stores
open the next segment, so a thread's accumulator reset comes after the other thread's
GEMM, by which time the store that frees the accumulator has finished. Segments are
taken from the threads in turn: the load unit fetches one thread's operands while the
other computes. Dependency tokens are inserted afterwards on the merged program
(:mod:`compiler.tir.accel.tokens`), which makes any interleaving correct.
"""
from __future__ import annotations

from compiler.tir.accel.tokens import Op


def _is_work(op: Op) -> bool:
    return op.unit == "compute" and (op.kind == "alu" or (op.kind == "gemm" and not op.args.get("reset")))


def segments(ops: list[Op]) -> list[list[Op]]:
    """Cut after each GEMM (or run of ALU ops) that is not followed by another (non-deferred, after a GEMM) ALU op."""
    nxt: list[Op | None] = [None] * len(ops)
    following = None
    for k in range(len(ops) - 1, -1, -1):
        nxt[k] = following
        if ops[k].unit == "compute" and ops[k].kind != "load":
            following = ops[k]
    out: list[list[Op]] = [[]]
    for k, op in enumerate(ops):
        out[-1].append(op)
        nx = nxt[k]
        joins = nx is not None and nx.kind == "alu" and (op.kind == "alu" or not nx.args.get("deferred"))
        if _is_work(op) and not op.args.get("cont") and not joins:
            out.append([])
    return [s for s in out if s]


def interleave(threads: list[list[Op]]) -> list[Op]:
    """Round-robin merge of the threads' segments (each thread keeps its order)."""
    segs = [segments(t) for t in threads]
    out: list[Op] = []
    k = 0
    while any(k < len(s) for s in segs):
        for s in segs:
            if k < len(s):
                out += s[k]
        k += 1
    return out
