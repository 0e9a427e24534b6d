"""Target-independent loop IR for the CPU and GPU targets: lowering of TE schedules to loops, loads and stores."""
from compiler.tir.errors import TirError
from compiler.tir.ir import Allocate, BufLoad, Buffer, For, IfThen, PrimFunc, Store, Sync, format_func
from compiler.tir.lower import lower_loops

__all__ = ["TirError", "Allocate", "BufLoad", "Buffer", "For", "IfThen", "PrimFunc", "Store", "Sync", "format_func",
           "lower_loops"]
