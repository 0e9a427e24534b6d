"""Static memory planning: place intermediate tensors in one arena, reusing dead buffers."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.graph.accel_interface import ceil_to
from compiler.graph.ir import Graph

ALIGN = 64


@dataclass(frozen=True)
class Allocation:
    tensor: str
    offset: int
    size: int
    start: int  # index of the producing node
    end: int    # index of the last reading node (len(nodes) for graph outputs)


@dataclass
class MemoryPlan:
    allocations: dict[str, Allocation]
    peak_bytes: int
    no_reuse_bytes: int

    @property
    def saving(self) -> float:
        return 1.0 - self.peak_bytes / self.no_reuse_bytes if self.no_reuse_bytes else 0.0


def lifetimes(g: Graph) -> dict[str, tuple[int, int]]:
    """[producer index, last use index] of every node-produced tensor."""
    life: dict[str, list[int]] = {}
    for idx, n in enumerate(g.nodes):
        for o in n.outputs:
            if o:
                life[o] = [idx, idx]
        for i in n.inputs:
            if i in life:
                life[i][1] = idx
    for o in g.outputs:
        if o in life:
            life[o][1] = len(g.nodes)
    return {k: (v[0], v[1]) for k, v in life.items()}


def plan_memory(g: Graph) -> MemoryPlan:
    """Greedy by size: biggest tensors first, each at the lowest offset free during its lifetime.

    Outputs that nothing reads and that are not graph outputs (an unused Dropout mask, MaxPool
    indices) get no slot: the executor drops them right after their node runs; nor do tensors whose shape the
    inputs' values set (``g.value_shaped``): they stay the arrays their kernels return.
    """
    read = {i for n in g.nodes for i in n.inputs if i} | set(g.outputs)
    dynamic = getattr(g, "value_shaped", set())  # sized at run time: kept as the kernels return them
    life = {t: v for t, v in lifetimes(g).items() if t in read and t not in dynamic}
    missing = sorted(t for t in life if t not in g.tensors)
    if missing:
        raise ValueError(f"memory plan: no shape/dtype known for tensors {missing[:10]}; run shape inference first")
    sizes = {t: ceil_to(max(g.tensors[t].nbytes, 1), ALIGN) for t in life}
    placed: list[Allocation] = []
    for t in sorted(life, key=lambda k: (-sizes[k], life[k][0])):
        s, e = life[t]
        busy = sorted((a.offset, a.offset + a.size) for a in placed if a.start <= e and s <= a.end)
        off = 0
        for lo, hi in busy:
            if off + sizes[t] <= lo:
                break
            off = max(off, hi)
        placed.append(Allocation(t, off, sizes[t], s, e))
    peak = max((a.offset + a.size for a in placed), default=0)
    return MemoryPlan({a.tensor: a for a in placed}, peak, sum(sizes.values()))


def check_plan(plan: MemoryPlan) -> None:
    """Raise if two tensors alive at the same time overlap in memory."""
    allocs = list(plan.allocations.values())
    for i, a in enumerate(allocs):
        for b in allocs[i + 1:]:
            if a.start <= b.end and b.start <= a.end and a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                raise AssertionError(f"tensors {a.tensor} and {b.tensor} overlap in time and memory")
