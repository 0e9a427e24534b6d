"""Which ops the LLVM backend generates kernels for itself, and which it runs as zero-copy views."""
from __future__ import annotations

from typing import Callable

from compiler.codegen.llvm.layout import plan_pack, plan_unpack
from compiler.codegen.llvm.pool import plan_global_avg_pool
from compiler.codegen.llvm.qelementwise import plan_qadd, plan_qlookup, plan_qmul

# generated here; Relu/Clip/Add/Sub/Mul/Div/MaxPool/Quantize/Dequantize/Softmax/QConv2D come from the operator
# library (compiler.codegen.llvm.backend.LIBRARY_OPS)
PLANNERS: dict[str, Callable] = {
    "GlobalAveragePool": plan_global_avg_pool,
    "PackActivation": plan_pack, "UnpackActivation": plan_unpack,
    "QAdd": plan_qadd, "QMul": plan_qmul, "QLookup": plan_qlookup,
}

# metadata-only reshapes: the numpy kernel returns a view of the input, no data moves
VIEW_OPS = frozenset({"Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze"})
