"""One process-wide MCJIT engine: compile llvmlite IR modules at -O3 and hand back function addresses."""
from __future__ import annotations

import ctypes
import threading
from typing import Callable

import llvmlite.binding as llvm
from llvmlite import ir

_LOCK = threading.Lock()
_JIT: "Jit | None" = None


class Jit:
    """An MCJIT engine targeting the host CPU; modules are added one by one (names must be unique)."""

    def __init__(self) -> None:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        self.tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                               features=llvm.get_host_cpu_features().flatten(), opt=3)
        self.triple = llvm.get_process_triple()
        backing = llvm.parse_assembly("")
        backing.triple = self.triple
        self.engine = llvm.create_mcjit_compiler(backing, self.tm)
        self.compiled = 0

    def optimize(self, mod: ir.Module) -> llvm.ModuleRef:
        """Parse, verify and run the -O3 pipeline (loop + SLP vectorization on) over ``mod``."""
        ref = llvm.parse_assembly(str(mod))
        ref.triple = self.triple
        ref.data_layout = str(self.tm.target_data)
        ref.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(ref, pb)
        return ref

    def compile(self, mod: ir.Module, name: str, nargs: int) -> Callable[..., None]:
        """Compile ``mod`` and return its ``void name(i8*, ...)`` as a ctypes function of ``nargs`` pointers."""
        ref = self.optimize(mod)
        with _LOCK:
            self.engine.add_module(ref)
            self.engine.finalize_object()
            addr = self.engine.get_function_address(name)
            self.compiled += 1
        if not addr:
            raise RuntimeError(f"LLVM JIT: function {name!r} not found after compiling its module")
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))
        return proto(addr)

    def asm(self, mod: ir.Module) -> str:
        """Optimized host assembly of ``mod`` (for inspection: vectorization, etc.)."""
        return self.tm.emit_assembly(self.optimize(mod))


def get_jit() -> Jit:
    """The shared engine (created on first use)."""
    global _JIT
    with _LOCK:
        if _JIT is None:
            _JIT = Jit()
        return _JIT
