"""A small graph IR: tensors with static shapes/dtypes, constants, and nodes in topological order."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np


@dataclass
class TensorInfo:
    """Static type of a tensor value: shape (ints) and numpy dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __post_init__(self) -> None:
        self.shape = tuple(int(d) for d in self.shape)
        self.dtype = np.dtype(self.dtype)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass(eq=False)
class Node:
    """One operator application. ``op`` is an ONNX op type or an internal op (e.g. ``QConv2D``)."""

    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def __repr__(self) -> str:
        return f"Node({self.name}: {self.op} {self.inputs} -> {self.outputs})"


class Graph:
    """A dataflow graph; ``nodes`` is kept in topological order. An empty input name means 'absent'."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.constants: dict[str, np.ndarray] = {}
        self.tensors: dict[str, TensorInfo] = {}
        self.value_shaped: set[str] = set()  # tensors whose shape the inputs' values set (no memory-plan slot)
        self._ids = itertools.count()

    # -- construction helpers -------------------------------------------------
    def fresh_name(self, base: str) -> str:
        """A tensor/node name not used yet in this graph."""
        while True:
            cand = f"{base}#{next(self._ids)}"
            if cand not in self.tensors and cand not in self.constants:
                return cand

    def add_constant(self, name: str, value: np.ndarray) -> str:
        value = np.asarray(value)
        self.constants[name] = value
        self.tensors[name] = TensorInfo(value.shape, value.dtype)
        return name

    def set_info(self, name: str, shape: Iterable[int], dtype) -> None:
        self.tensors[name] = TensorInfo(tuple(shape), np.dtype(dtype))

    def info(self, name: str) -> TensorInfo:
        return self.tensors[name]

    # -- queries --------------------------------------------------------------
    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        cons: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    cons.setdefault(i, []).append(n)
        return cons

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    # -- maintenance ----------------------------------------------------------
    def toposort(self) -> None:
        """Re-order nodes topologically (stable w.r.t. the current order)."""
        avail = set(self.inputs) | set(self.constants) | {""}
        pending = list(self.nodes)
        ordered: list[Node] = []
        while pending:
            rest = []
            for n in pending:
                if all(i in avail for i in n.inputs):
                    ordered.append(n)
                    avail.update(n.outputs)
                else:
                    rest.append(n)
            if len(rest) == len(pending):
                missing = sorted({i for n in rest for i in n.inputs if i not in avail})
                raise ValueError(f"graph has a cycle or undefined tensors: {missing[:10]}")
            pending = rest
        self.nodes = ordered

    def remove_dead(self) -> None:
        """Drop nodes whose outputs are never used, and unused constants/tensor infos."""
        live = set(self.outputs)
        kept: list[Node] = []
        for n in reversed(self.nodes):
            if any(o in live for o in n.outputs):
                kept.append(n)
                live.update(i for i in n.inputs if i)
        self.nodes = kept[::-1]
        live.update(self.inputs)
        self.constants = {k: v for k, v in self.constants.items() if k in live}
        self.tensors = {k: v for k, v in self.tensors.items() if k in live}

    def copy(self) -> "Graph":
        g = Graph(self.name)
        g.nodes = [Node(n.op, list(n.inputs), list(n.outputs), dict(n.attrs), n.name) for n in self.nodes]
        g.inputs, g.outputs = list(self.inputs), list(self.outputs)
        g.constants = dict(self.constants)
        g.tensors = {k: TensorInfo(v.shape, v.dtype) for k, v in self.tensors.items()}
        g.value_shaped = set(self.value_shaped)
        g._ids = itertools.count(next(self._ids))
        return g

    def __repr__(self) -> str:
        return f"Graph({self.name}: {len(self.nodes)} nodes, inputs={self.inputs}, outputs={self.outputs})"
