"""CPU (LLVM) and GPU (CUDA) targets for TE schedules: ``build_op(schedule, target)``."""
from compiler.backend.build import TARGETS, CpuOp, OpInputError, build_op, lower
from compiler.backend.llvm.host import HostLacksFeatures, target_cpu, use_cpu
from compiler.backend.llvm.parallel import num_threads, set_num_threads

__all__ = ["TARGETS", "CpuOp", "HostLacksFeatures", "OpInputError", "build_op", "lower", "num_threads",
           "set_num_threads", "target_cpu", "use_cpu"]
