"""The host-op kernel registry: ``KERNELS`` (IR op type -> numpy kernel) and the ``@kernel`` decorator that
fills it (:mod:`jit_runtime.host_ops.kernels` and :mod:`jit_runtime.host_ops.transformer_kernels` register into it)."""
from __future__ import annotations

from typing import Callable

Kernel = Callable[..., object]
KERNELS: dict[str, Kernel] = {}
# kernels of ops with optional extra outputs take ``n_outputs`` (how many outputs the node uses) as a keyword
TAKES_N_OUTPUTS: set[Kernel] = set()


def kernel(*ops: str, n_outputs: bool = False):
    def deco(fn):
        for op in ops:
            KERNELS[op] = fn
        if n_outputs:
            TAKES_N_OUTPUTS.add(fn)
        return fn
    return deco
