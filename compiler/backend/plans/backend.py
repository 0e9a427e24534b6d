"""``TargetCpuBackend``: runs a model's nodes with operator-library kernels compiled for "llvm" or "cuda".

Plans are made (and kernels compiled) for every node at build time from the graph's static shapes
(:meth:`prepare`), so a target that cannot run here (cuda without a GPU) still compiles everything,
and unsupported nodes are reported before anything runs. Metadata reshapes run as numpy views, and
data movement plus the int8 pipeline's remaining glue (:data:`~compiler.backend.plans.plans.NUMPY_GLUE_OPS`)
by the numpy reference kernels; ``last_backend`` says which ran the last node ("llvm"/"cuda", "view" or "numpy").
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from compiler.graph.cpu_backend import NumpyCpuBackend
from compiler.graph.ir import Graph, Node
from compiler.backend.plans.compile import compile_plan
from compiler.backend.plans.plans import NUMPY_GLUE_OPS, VIEW_OPS, OpPlan, UnsupportedOnTarget, plan_node


class TargetCpuBackend:
    """The CpuBackend protocol (``supports``/``run_node``) on library kernels for ``target``."""

    def __init__(self, target: str = "llvm") -> None:
        if target not in ("llvm", "cuda"):
            raise ValueError(f"unknown kernel target {target!r}; allowed: llvm, cuda")
        self.target = target
        self.name = target
        self.last_backend = target
        self.fallback = NumpyCpuBackend()
        self._plans: dict[int, tuple[OpPlan, Callable]] = {}

    def supports(self, op: str) -> bool:
        from compiler.backend.plans.plans import PLANNERS

        return op in PLANNERS or op in VIEW_OPS or op in NUMPY_GLUE_OPS

    def prepare(self, g: Graph) -> None:
        """Plan and compile every CPU node of ``g``; raises :class:`UnsupportedOnTarget` listing all bad nodes."""
        from compiler.graph.partition import node_target

        errors = []
        for n in g.nodes:
            if node_target(n) != "cpu" or n.op in VIEW_OPS or n.op in NUMPY_GLUE_OPS:
                continue
            infos = [g.tensors.get(i) if i else None for i in n.inputs]
            try:
                plan = plan_node(n, infos, g.constants, self.target)
            except UnsupportedOnTarget as exc:
                errors.append(str(exc))
                continue
            fn = compile_plan(plan, self.target)
            self._plans[id(n)] = (plan, fn)
            if self.target == "cuda":
                fn.pin(*_plan_constants(plan, n, g))
        if errors:
            raise UnsupportedOnTarget(f"{len(errors)} node(s) cannot run on target {self.target!r}:\n  "
                                      + "\n  ".join(errors))

    def run_node_into(self, node: Node, inputs: Sequence[np.ndarray | None],
                      outs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        """``run_node``, writing a library kernel's result into ``outs[0]`` when given (same shape and dtype as
        the node's output): the executor passes its arena slots, so no copy follows."""
        entry = self._plans.get(id(node))
        dst = outs[0] if outs else None
        if entry is None or dst is None or dst.dtype != entry[0].out_dtype or not dst.flags.c_contiguous:
            return self.run_node(node, inputs)
        plan, fn = entry
        kernel_out = fn.func.args[fn.func.num_inputs]
        if np.dtype(kernel_out.dtype) != dst.dtype or int(np.prod(kernel_out.shape)) != dst.size:
            return self.run_node(node, inputs)
        self.last_backend = self.target
        fn(*plan.args(inputs), out=dst.reshape(kernel_out.shape))
        return [dst]

    def run_node(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        if node.op in VIEW_OPS:
            self.last_backend = "view"
            return self.fallback.run_node(node, inputs)
        if node.op in NUMPY_GLUE_OPS:
            self.last_backend = "numpy"
            return self.fallback.run_node(node, inputs)
        entry = self._plans.get(id(node))
        if entry is None:
            raise RuntimeError(f"node {node.name!r} ({node.op}) was not prepared for target {self.target!r}: build the "
                               f"module with compiler.executor.build(..., target={self.target!r})")
        plan, fn = entry
        self.last_backend = self.target
        out = fn(*plan.args(inputs))
        out = np.asarray(out)
        if out.dtype != plan.out_dtype:  # uint8 results are computed through a wider integer
            out = out.astype(plan.out_dtype)
        return [out.reshape(plan.out_shape)]


def _plan_constants(plan: OpPlan, node: Node, g: Graph) -> list[np.ndarray]:
    """The kernel arguments of ``plan`` that do not depend on the node's runtime inputs (packed weights,
    biases): ``plan.args`` called on two sets of placeholder inputs returns the very same arrays for them."""
    def placeholders() -> list[np.ndarray | None]:
        vals = []
        for name in node.inputs:
            info = g.tensors.get(name) if name else None
            if name in g.constants:
                vals.append(np.asarray(g.constants[name]))
            elif info is None or any(not isinstance(d, int) for d in info.shape):
                return []
            else:
                vals.append(np.zeros(info.shape, info.dtype))
        return vals

    first, second = placeholders(), placeholders()
    if not first or not second:
        return []
    try:
        a, b = plan.args(first), plan.args(second)
    except (ValueError, TypeError, IndexError, KeyError):  # placeholders a planner cannot take: nothing is pinned
        return []
    return [x for x, y in zip(a, b) if x is y and isinstance(x, np.ndarray)]
