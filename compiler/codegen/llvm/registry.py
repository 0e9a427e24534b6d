"""Which ops the LLVM backend generates kernels for, and which it runs as zero-copy views."""
from __future__ import annotations

from typing import Callable

from compiler.codegen.llvm.elementwise import plan_binary, plan_clip
from compiler.codegen.llvm.layout import plan_pack, plan_unpack
from compiler.codegen.llvm.pool import plan_global_avg_pool, plan_maxpool
from compiler.codegen.llvm.qelementwise import plan_qadd, plan_qlookup, plan_qmul
from compiler.codegen.llvm.quant import plan_dequantize, plan_quantize
from compiler.codegen.llvm.softmax import plan_softmax

PLANNERS: dict[str, Callable] = {
    "Relu": plan_clip, "Clip": plan_clip,
    "Add": plan_binary, "Sub": plan_binary, "Mul": plan_binary, "Div": plan_binary,
    "MaxPool": plan_maxpool, "GlobalAveragePool": plan_global_avg_pool,
    "QuantizeLinear": plan_quantize, "DequantizeLinear": plan_dequantize,
    "PackActivation": plan_pack, "UnpackActivation": plan_unpack,
    "Softmax": plan_softmax, "QAdd": plan_qadd,
    "QMul": plan_qmul, "QLookup": plan_qlookup,
}

# metadata-only reshapes: the numpy kernel returns a view of the input, no data moves
VIEW_OPS = frozenset({"Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze"})
