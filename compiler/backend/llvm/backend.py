"""``LlvmCpuBackend``: the CpuBackend protocol on JIT-compiled LLVM kernels, numpy for the rest.

``LIBRARY_OPS`` come from the operator library (:mod:`compiler.backend.plans.plans`, TE -> LLVM through
``compiler.build_op``); only ``GlobalAveragePool`` (numpy's pairwise summation order, bit-exact) is still
generated here (:mod:`compiler.backend.llvm.pool`)."""
from __future__ import annotations

import threading
import time
import weakref
from typing import Callable, Sequence

import numpy as np

from compiler.backend.llvm.jit import get_jit
from compiler.backend.llvm.plan import Plan, sig
from compiler.backend.llvm.registry import PLANNERS, VIEW_OPS
from compiler.graph.cpu_backend import NumpyCpuBackend
from compiler.graph.ir import Node

_KERNELS: dict[tuple, Callable] = {}  # process-wide: plan key -> compiled function
_LOCK = threading.Lock()


def compiled_kernels() -> int:
    """How many distinct kernels this process has compiled (generated here or from the operator library)."""
    from compiler.backend.plans.compile import compiled_kernels as library_kernels

    return len(_KERNELS) + library_kernels()


def compile_plan(plan: Plan) -> Callable:
    """The compiled function of ``plan`` (compiled once per key, -O3 MCJIT)."""
    jit = get_jit()
    key = (jit.key, plan.key)  # per target CPU
    fn = _KERNELS.get(key)
    if fn is None:
        with _LOCK:
            fn = _KERNELS.get(key)
            if fn is None:
                k = plan.emit()
                fn = jit.compile(k.finish(), k.name, len(k.args))
                _KERNELS[key] = fn
    return fn


# ops whose kernels come from the operator library (compiler.topi, TE -> LLVM through compiler.build_op)
LIBRARY_OPS = frozenset({"QConv2D", "QDense", "Relu", "Clip", "Add", "Sub", "Mul", "Div", "MaxPool", "QuantizeLinear",
                         "DequantizeLinear", "Softmax", "QAdd", "QMul", "QLookup", "PackActivation", "UnpackActivation"})


def _library_plan(node: Node, inputs: Sequence[np.ndarray | None]) -> tuple[Plan | None, Callable | None]:
    """A library kernel for ``node`` on these arrays (their values are the node's constants), or (None, None)."""
    from compiler.graph.ir import TensorInfo
    from compiler.backend.plans.compile import compile_plan as compile_library
    from compiler.backend.plans.plans import UnsupportedOnTarget, plan_node

    infos = [None if a is None else TensorInfo(a.shape, a.dtype) for a in inputs]
    consts = {name: a for name, a in zip(node.inputs, inputs) if name and a is not None}
    try:
        op = plan_node(node, infos, consts, "llvm")
    except UnsupportedOnTarget:
        return None, None
    fn = compile_library(op, "llvm")

    def run(fn, ins):
        return [np.asarray(fn(*op.args(ins))).reshape(op.out_shape).astype(op.out_dtype, copy=False)]

    return Plan(op.key, lambda: None, run), fn


class LlvmCpuBackend:
    """Runs CPU nodes with LLVM kernels specialized on (op, shapes, dtypes, attrs).

    Nodes the generators cannot handle run on ``fallback`` (numpy). After each ``run_node``,
    ``last_backend`` says who ran it: ``"llvm"``, ``"view"`` (zero-copy reshape) or ``"numpy"``.
    """

    name = "llvm"

    def __init__(self, fallback=None) -> None:
        self.fallback = fallback or NumpyCpuBackend()
        self.last_backend = "llvm"
        self.last_compile_s = 0.0  # JIT compilation inside the last run_node (reported apart from run time)
        self._plans: "weakref.WeakKeyDictionary[Node, tuple]" = weakref.WeakKeyDictionary()

    def supports(self, op: str) -> bool:
        """True for ops with an LLVM generator or a zero-copy view, else whether the fallback has it."""
        return op in PLANNERS or op in LIBRARY_OPS or op in VIEW_OPS or self.fallback.supports(op)

    def compiles(self, op: str) -> bool:
        """Whether ``op`` has an LLVM kernel (some shapes/dtypes may still fall back)."""
        return op in PLANNERS or op in LIBRARY_OPS

    def plan_for(self, node: Node, inputs: Sequence[np.ndarray | None]) -> tuple[Plan | None, Callable | None]:
        """The (plan, compiled function) for these inputs, or (None, None) when unsupported."""
        key = tuple(sig(a) for a in inputs)
        cached = self._plans.get(node)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        t0 = time.perf_counter()
        if node.op in LIBRARY_OPS:
            plan, fn = _library_plan(node, inputs)
        else:
            planner = PLANNERS.get(node.op)
            plan = planner(node, list(inputs)) if planner is not None else None
            fn = compile_plan(plan) if plan is not None else None
        self.last_compile_s += time.perf_counter() - t0
        self._plans[node] = (key, plan, fn)
        return plan, fn

    def run_node(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        self.last_compile_s = 0.0
        if node.op in VIEW_OPS:
            self.last_backend = "view"
            return self.fallback.run_node(node, inputs)
        ins = [None if a is None else np.asarray(a) for a in inputs]
        plan, fn = self.plan_for(node, ins)
        if plan is None:
            self.last_backend = self.fallback.name
            return self.fallback.run_node(node, inputs)
        self.last_backend = "llvm"
        return plan.run(fn, ins)
