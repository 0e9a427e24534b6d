"""``build_op``: compile a TE schedule for ``llvm`` (the host CPU) or ``cuda`` into a callable on numpy arrays."""
from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Callable

import numpy as np

from compiler.backend.op_args import NP_DTYPES, OpInputError, check_inputs, check_outputs  # noqa: F401  (re-exported)
from compiler.tir.errors import TirError
from compiler.tir.ir import PrimFunc, format_func, structural_key
from compiler.tir.lower import lower_loops
from jit_runtime.host_arrays import aligned_empty

if TYPE_CHECKING:
    from compiler.schedule.schedule import Schedule
    from compiler.te.tensor import Tensor

TARGETS = ("llvm", "cuda")
_COMPILED: dict[tuple, tuple] = {}  # (target CPU, structural key of a loop-IR function) -> (module, symbol, ctypes function)
_COMPILED_LOCK = threading.Lock()


def compiled_count() -> int:
    """How many distinct CPU kernels this process has compiled (``build_op`` reuses structurally equal ones)."""
    return len(_COMPILED)


class CpuOp:
    """A compiled CPU operator: ``op(*inputs, out=None)`` returns the output array (a tuple if several).

    A function structurally equal to one compiled before in this process (same loops, shapes and arithmetic, any
    tensor names) reuses that machine code."""

    target = "llvm"

    def __init__(self, func: PrimFunc, module=None, symbol: str | None = None) -> None:
        from compiler.backend.llvm.jit import get_jit
        from compiler.backend.llvm import parallel
        from compiler.backend.llvm.codegen import generate

        self.func = func
        self._jit = get_jit()
        key = (self._jit.key, structural_key(func))  # machine code per target CPU
        with _COMPILED_LOCK:
            hit = _COMPILED.get(key) if module is None else None
            if hit is None:
                if module is None:
                    module, symbol = generate(func)
                nbuf = len(func.args) + len(func.temps)
                # the IR kept as text: the llvmlite module's Python objects took ~40x its size (an unrolled
                # Winograd conv: ~60 MB for 1.1 MB of IR), kept for every kernel a tuner tried
                hit = (str(module), symbol, self._jit.compile(module, symbol, nbuf + 1))
                _COMPILED.setdefault(key, hit)
        self.llvm_ir, self.symbol, self._cfunc = hit
        self._launch = parallel.launch_address()

    def __call__(self, *inputs: np.ndarray, out=None):
        from compiler.backend.llvm.plan import ptr

        ins = check_inputs(self.func, inputs)
        outs = check_outputs(self.func, out)
        self._cfunc(self._launch, *[ptr(a) for a in ins], *[ptr(a) for a in outs], *self._temps())
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _temps(self) -> list[int]:
        """Addresses of the kernel's scratch buffers (e.g. a padded input), allocated once per calling thread: a
        fresh multi-megabyte array per call cost page faults on every call."""
        if not self.func.temps:
            return []
        local = self.__dict__.setdefault("_local", threading.local())
        addrs = getattr(local, "addrs", None)
        if addrs is None:
            local.arrays = [aligned_empty(b.shape, NP_DTYPES[b.dtype]) for b in self.func.temps]
            addrs = local.addrs = [a.ctypes.data for a in local.arrays]
        return addrs

    def bind(self, *inputs: np.ndarray, out) -> "Callable[[], None] | None":
        """A call of this kernel on exactly these arrays, checked and addressed once (the caller keeps them alive and
        in place, and calls it from this thread: the scratch buffers are this thread's); None where an input would
        need a contiguous copy (the call would then read a stale copy)."""
        from compiler.backend.llvm.plan import ptr

        ins = check_inputs(self.func, inputs)
        if any(a is not b for a, b in zip(ins, inputs)):
            return None
        outs = check_outputs(self.func, out)
        addrs = (self._launch, *[ptr(a) for a in ins], *[ptr(a) for a in outs], *self._temps())
        cfunc = self._cfunc

        def call() -> None:
            cfunc(*addrs)

        call.arrays = (ins, outs)  # type: ignore[attr-defined]  (alive as long as the call)
        call.op = self  # type: ignore[attr-defined]  (its code and this thread's scratch buffers: the same)
        call.native = self.native_call(addrs[1:])  # type: ignore[attr-defined]  (for the executor's native replay)
        return call

    def native_call(self, addresses: "list[int] | tuple[int, ...]"):
        """:meth:`run_addresses` on ``addresses`` as a :class:`~compiler.backend.llvm.native_replay.KernelCall`
        (the kernel's machine code and every argument, the thread pool's launch first), for a native caller; None
        where the kernel was compiled for a CPU this machine cannot run."""
        from compiler.backend.llvm.native_replay import KernelCall

        if not self._jit.runnable:
            return None
        return KernelCall(ctypes.cast(self._cfunc, ctypes.c_void_p).value, (self._launch, *addresses))

    def temp_arrays(self) -> list[np.ndarray]:
        """Fresh scratch arrays of the kernel's temporary buffers (for :meth:`run_prepared`)."""
        return [np.empty(b.shape, NP_DTYPES[b.dtype]) for b in self.func.temps]

    def run_prepared(self, arrays: list[np.ndarray]) -> None:
        """Run on ``arrays`` = inputs, outputs, then :meth:`temp_arrays`, which the caller has checked (C-contiguous,
        the kernel's shapes and dtypes): no checks and no allocation, for per-layer calls in a model."""
        self._cfunc(self._launch, *[a.ctypes.data for a in arrays])

    def run_addresses(self, addresses: "list[int] | tuple[int, ...]") -> None:
        """:meth:`run_prepared` on the arrays' data addresses (a caller that keeps its fixed arrays' addresses:
        ``ndarray.ctypes.data`` costs ~3 us an array)."""
        self._cfunc(self._launch, *addresses)

    @property
    def loop_ir(self) -> str:
        return format_func(self.func)

    def asm(self) -> str:
        """Host assembly of the kernel (to inspect vectorization)."""
        return self._jit.asm(self.llvm_ir)


def build_op(sched: "Schedule", target: str = "llvm", args: "list[Tensor] | None" = None, name: str = "op"):
    """Compile ``sched`` for ``target``: ``"llvm"`` (this CPU) or ``"cuda"``.

    ``args`` orders the tensors of the callable: placeholders are its inputs (in that order), the
    schedule's outputs are returned; by default inputs are the placeholders in schedule order.
    """
    if target not in TARGETS:
        raise TirError(f"build_op: unknown target {target!r}; targets: {TARGETS}")
    func = lower_loops(sched, args, name)
    if target == "llvm":
        return CpuOp(func)
    from compiler.backend.cuda.runtime import CudaOp

    return CudaOp(func)


def lower(sched: "Schedule", args: "list[Tensor] | None" = None, name: str = "op") -> str:
    """The loop IR of ``sched`` as text (what ``build_op`` compiles)."""
    return format_func(lower_loops(sched, args, name))


__all__ = ["build_op", "lower", "CpuOp", "OpInputError", "TARGETS"]
