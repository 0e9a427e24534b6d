"""The loop IR: lowering of TE schedules to loops, loads and stores for the CPU and GPU targets, the accelerator's
lowering passes (:mod:`compiler.tir.accel`), and the index arithmetic and bound inference both share."""
from compiler.tir.errors import TirError
from compiler.tir.ir import Allocate, BufLoad, Buffer, For, IfThen, PrimFunc, Store, Sync, format_func
from compiler.tir.lower import lower_loops

__all__ = ["TirError", "Allocate", "BufLoad", "Buffer", "For", "IfThen", "PrimFunc", "Store", "Sync", "format_func",
           "lower_loops"]
