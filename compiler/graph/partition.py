"""Partition a graph into maximal runs of accelerator and CPU nodes (in execution order)."""
from __future__ import annotations

from dataclasses import dataclass, field

from compiler.graph.ir import Graph, Node

ACCEL_OPS = frozenset({"AccelConv2D", "AccelDense"})


def node_target(n: Node) -> str:
    return "accel" if n.op in ACCEL_OPS else "cpu"


@dataclass
class Partition:
    """A run of consecutive nodes for one target, with the tensors crossing its boundary."""

    target: str
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def partition_graph(g: Graph) -> list[Partition]:
    """Split ``g.nodes`` into target runs; inputs/outputs are the non-constant boundary tensors."""
    parts: list[Partition] = []
    for n in g.nodes:
        t = node_target(n)
        if not parts or parts[-1].target != t:
            parts.append(Partition(t))
        parts[-1].nodes.append(n)
    users: dict[str, set[int]] = {}
    for pi, p in enumerate(parts):
        for n in p.nodes:
            for i in n.inputs:
                if i and i not in g.constants:
                    users.setdefault(i, set()).add(pi)
    for pi, p in enumerate(parts):
        made = {o for n in p.nodes for o in n.outputs}
        p.inputs = sorted({i for n in p.nodes for i in n.inputs if i and i not in g.constants and i not in made})
        p.outputs = sorted(o for o in made if o in g.outputs or users.get(o, set()) - {pi})
    return parts
