"""Lowering: schedule -> loop IR, with bound inference, DMA/ALU injection, tensorize, uop folding,
virtual-thread interleaving, dependency tokens and scratchpad allocation."""
from compiler.lower.build import lower
from compiler.lower.errors import AllocationError, LowerError, TensorizeError
from compiler.lower.ir import LoweredFunc, format_ir

__all__ = ["lower", "LowerError", "TensorizeError", "AllocationError", "LoweredFunc", "format_ir"]
