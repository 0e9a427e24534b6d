"""Compile operator-library plans with ``compiler.build_op`` (TE -> LLVM / CUDA), once per kernel key."""
from __future__ import annotations

import threading
from typing import Callable

from compiler.backend.plans.plans import OpPlan, build_schedule

_KERNELS: dict[tuple, Callable] = {}
_LOCK = threading.Lock()


def compiled_kernels() -> int:
    """How many distinct host-op kernels this process has compiled (library ones and hand-written ones)."""
    from compiler.backend.llvm.plan import compiled_count

    return len(_KERNELS) + compiled_count()


def _cpu_key() -> tuple:
    from compiler.backend.llvm.host import target_cpu

    return target_cpu().key


def compile_plan(plan: OpPlan, target: str) -> Callable:
    """The compiled kernel of ``plan`` for ``target``: ``fn(*args) -> output array`` (cached by ``plan.key``)."""
    key = (plan.key, target, _cpu_key() if target == "llvm" else None)  # llvm kernels per target CPU
    fn = _KERNELS.get(key)
    if fn is None:
        with _LOCK:
            fn = _KERNELS.get(key)
            if fn is None:
                from compiler.backend.build import build_op

                s, args = build_schedule(plan)
                fn = build_op(s, args=args, target=target)
                _KERNELS[key] = fn
    return fn
