"""The accelerator's lowering, as passes over the loop IR: a schedule becomes host loops, DMA copies and
micro-kernels (:mod:`.lower`: tensorize to declared intrinsics, scratchpad scopes), with bound inference
(:mod:`.bounds`), DMA descriptors (:mod:`.dma`), micro-op loop folding (:mod:`.uop_fold`), virtual-thread
interleaving (:mod:`.vthread`), dependency tokens (:mod:`.tokens`) and scratchpad allocation (:mod:`.alloc`)."""
from compiler.schedule.errors import LowerError, TensorizeError
from compiler.tir.accel.alloc import AllocationError
from compiler.tir.accel.ir import LoweredFunc, format_ir
from compiler.tir.accel.lower import lower

__all__ = ["lower", "LowerError", "TensorizeError", "AllocationError", "LoweredFunc", "format_ir"]
