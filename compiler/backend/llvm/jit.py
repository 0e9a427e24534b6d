"""MCJIT engines, one per target CPU (:mod:`compiler.backend.llvm.host`): compile llvmlite IR modules at -O3 and hand
back function addresses. Code for a target this machine cannot run is compiled but never called: its functions
raise :class:`~compiler.backend.llvm.host.HostLacksFeatures` instead."""
from __future__ import annotations

import ctypes
import threading
from typing import Callable

import llvmlite.binding as llvm
from llvmlite import ir

from compiler.backend.llvm.host import CpuTarget, check_runnable, make_target, missing_features, target_cpu

_LOCK = threading.Lock()
_JITS: dict[tuple, "Jit"] = {}


class Jit:
    """An MCJIT engine targeting one CPU (default: the current target); modules are added one by one
    (names must be unique)."""

    def __init__(self, target: CpuTarget | None = None) -> None:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.target = target or target_cpu()
        self.key = self.target.key
        self.runnable = not missing_features(self.target)
        tgt = llvm.Target.from_default_triple()
        self.tm = tgt.create_target_machine(cpu=self.target.cpu, features=self.target.features, opt=3)
        self.triple = llvm.get_process_triple()
        backing = llvm.parse_assembly("")
        backing.triple = self.triple
        self.engine = llvm.create_mcjit_compiler(backing, self.tm)
        self.compiled = 0

    def optimize(self, mod: "ir.Module | str") -> llvm.ModuleRef:
        """Parse, verify and run the -O3 pipeline (loop + SLP vectorization on) over ``mod`` (a module or its
        text)."""
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
        """Compile ``mod`` and return its ``void name(i8*, ...)`` as a ctypes function of ``nargs`` pointers
        (on a target this machine cannot run: a function that raises ``HostLacksFeatures``)."""
        ref = self.optimize(mod)
        with _LOCK:
            self.engine.add_module(ref)
            self.engine.finalize_object()
            addr = self.engine.get_function_address(name)
            self.compiled += 1
        if not addr:
            raise RuntimeError(f"LLVM JIT: function {name!r} not found after compiling its module")
        if not self.runnable:
            target = self.target

            def refuse(*_args) -> None:
                check_runnable(target, f"kernel {name}")
            return refuse
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))
        return proto(addr)

    def asm(self, mod: "ir.Module | str") -> str:
        """Optimized assembly of ``mod`` for this engine's target (to inspect vectorization, etc.)."""
        return self.tm.emit_assembly(self.optimize(mod))


def get_jit(target: CpuTarget | None = None) -> Jit:
    """The shared engine of ``target`` (default: the current target CPU), created on first use."""
    t = target or target_cpu()
    with _LOCK:
        jit = _JITS.get(t.key)
        if jit is None:
            jit = _JITS[t.key] = Jit(t)
        return jit


def get_host_jit() -> Jit:
    """The engine of this machine's own CPU (for runtime code that must always run, e.g. the thread pool)."""
    return get_jit(make_target("host"))
