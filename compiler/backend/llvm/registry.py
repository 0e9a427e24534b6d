"""Which ops the LLVM backend generates kernels for itself, and which it runs as zero-copy views."""
from __future__ import annotations

from typing import Callable

from compiler.backend.llvm.pool import plan_global_avg_pool

# generated here (numpy's pairwise summation order); every other compiled op comes from the operator library
# (compiler.backend.llvm.backend.LIBRARY_OPS)
PLANNERS: dict[str, Callable] = {"GlobalAveragePool": plan_global_avg_pool}

# metadata-only reshapes: the numpy kernel returns a view of the input, no data moves
VIEW_OPS = frozenset({"Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze"})
