"""A recorded run as one native function: the inputs staged, then every kernel call in order, each one timed.

The executor replays a run whose every node is a call bound to fixed addresses
(:meth:`compiler.executor.module.Module.run`). Where each of those calls is native (a compiled kernel on fixed
pointer arguments, :class:`KernelCall`, or a byte copy, :class:`ByteCopy`, :data:`NO_OP` for nothing),
:func:`compile_replay` makes them one function that the executor calls once a run. That function first makes an
optional native call (the thread pool's wake, so its workers wake while the inputs are copied), then copies each
input given this run into the module's own buffer, counting float NaN/Inf values in the same pass, and then runs
the steps, reading ``clock_gettime(CLOCK_MONOTONIC)`` before each and after the last (the profile's times).

Why: after an idle pause the CPU runs everything slowly at first, and the interpreter's path around the kernels
(wake the pool, copy and check the input, a ctypes call and two clock reads per node) is mostly cold memory:
MobileNetV2 fp32 on two threads after 0.3 s pauses spent ~0.3 ms of its ~2.8 ms there.
"""
from __future__ import annotations

import ctypes
import sys
from typing import NamedTuple, Sequence

import numpy as np
from llvmlite import ir

I8P = ir.IntType(8).as_pointer()
I16, I32, I64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
CLOCK_MONOTONIC = 1  # Linux and the BSDs/macOS differ; only Linux's value is used (see clock_address)
# float dtypes whose inputs are checked: (integer type of an element, exponent mask); an all-ones exponent is NaN/Inf
FLOAT_BITS = {"float16": (I16, 0x7C00), "float32": (I32, 0x7F800000), "float64": (I64, 0x7FF0000000000000)}


class KernelCall(NamedTuple):
    """``func(*args)``: a compiled ``void func(i8*, ...)`` on fixed pointer-sized arguments."""

    func: int
    args: tuple[int, ...]


class ByteCopy(NamedTuple):
    """``memmove(dst, src, nbytes)`` (nothing where ``nbytes`` is 0)."""

    dst: int
    src: int
    nbytes: int


NO_OP = ByteCopy(0, 0, 0)  # a step that does nothing (a view whose result is its input's memory)


class InputCopy(NamedTuple):
    """An input's buffer: ``nbytes`` at ``dst``; ``dtype`` (numpy name) decides whether NaN/Inf are counted."""

    dst: int
    nbytes: int
    dtype: str


Step = KernelCall | ByteCopy


def clock_address() -> int:
    """The address of libc's ``clock_gettime`` on 64-bit Linux (its ``timespec`` is two int64), else 0."""
    if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_void_p) != 8:
        return 0
    try:
        return ctypes.cast(ctypes.CDLL(None).clock_gettime, ctypes.c_void_p).value or 0
    except (OSError, AttributeError):
        return 0


class NativeReplay:
    """The compiled replay of ``steps`` (see the module docstring); :meth:`run` executes it once."""

    def __init__(self, steps: Sequence[Step], inputs: Sequence[InputCopy], first: KernelCall | None = None) -> None:
        from compiler.backend.llvm.jit import get_host_jit

        clock = clock_address()
        if not clock:
            raise RuntimeError("native replay: needs clock_gettime from libc on 64-bit Linux")
        for s in steps:
            if not isinstance(s, (KernelCall, ByteCopy)):
                raise TypeError(f"native replay: a step must be a KernelCall or a ByteCopy, got {s!r}")
        self.steps = tuple(steps)
        self.inputs = tuple(inputs)
        # [0, n]: clock before step k / after the last (ns); [n + 1]: NaN/Inf values found in the copied inputs
        self.times = np.zeros(len(self.steps) + 2, np.int64)
        self.sources = (ctypes.c_int64 * max(1, len(self.inputs)))()
        self._fn = get_host_jit().compile(_emit(self.steps, self.inputs, first, clock), "vta_replay", 2)
        self._times_addr = self.times.ctypes.data
        self._sources_addr = ctypes.addressof(self.sources)

    def run(self, sources: Sequence[int]) -> int:
        """Run once; ``sources[i]``: the address to copy input ``i`` from (0: already in place, not copied).
        Returns how many NaN/Inf values the copied inputs held."""
        src = self.sources
        for i, a in enumerate(sources):
            src[i] = a
        self._fn(self._sources_addr, self._times_addr)
        return int(self.times[-1])

    def step_seconds(self) -> np.ndarray:
        """Each step's time in the last run (seconds)."""
        return np.diff(self.times[:-1]) * 1e-9


def _emit(steps: Sequence[Step], inputs: Sequence[InputCopy], first: KernelCall | None, clock: int) -> ir.Module:
    """``void vta_replay(i64* sources, i64* times)``: ``first``, the input copies, then the timed steps."""
    mod = ir.Module(name="vta_replay")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I8P, I8P]), "vta_replay")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    sources = b.bitcast(fn.args[0], I64.as_pointer())
    times = b.bitcast(fn.args[1], I64.as_pointer())
    memmove = mod.declare_intrinsic("llvm.memmove", [I8P, I8P, I64])
    no = ir.Constant(ir.IntType(1), 0)

    def c(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def call(k: KernelCall) -> None:
        ty = ir.FunctionType(ir.VoidType(), [I8P] * len(k.args))
        b.call(b.inttoptr(c(k.func), ty.as_pointer()), [b.inttoptr(c(a), I8P) for a in k.args])

    ts_ty = ir.ArrayType(I64, 2)
    ts = b.alloca(ts_ty)
    clock_ty = ir.FunctionType(I32, [I32, ts_ty.as_pointer()])
    clock_fn = b.inttoptr(c(clock), clock_ty.as_pointer())

    def stamp(k: int) -> None:
        b.call(clock_fn, [ir.Constant(I32, CLOCK_MONOTONIC), ts])
        sec = b.load(b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 0)]))
        nsec = b.load(b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 1)]))
        b.store(b.add(b.mul(sec, c(1_000_000_000)), nsec), b.gep(times, [c(k)]))

    if first is not None:
        call(first)
    bad = c(0)
    for i, inp in enumerate(inputs):
        src = b.load(b.gep(sources, [c(i)]))
        pre, copy, merge = b.block, fn.append_basic_block(f"in{i}"), fn.append_basic_block(f"in{i}_done")
        b.cbranch(b.icmp_unsigned("!=", src, c(0)), copy, merge)
        b.position_at_end(copy)
        found = _copy_counting(b, fn, b.inttoptr(src, I8P), b.inttoptr(c(inp.dst), I8P), inp, memmove, no)
        copied = b.block
        b.branch(merge)
        b.position_at_end(merge)
        got = b.phi(I64)
        got.add_incoming(found, copied)
        got.add_incoming(c(0), pre)
        bad = b.add(bad, got)
    for k, s in enumerate(steps):
        stamp(k)
        if isinstance(s, KernelCall):
            call(s)
        elif s.nbytes:
            b.call(memmove, [b.inttoptr(c(s.dst), I8P), b.inttoptr(c(s.src), I8P), c(s.nbytes), no])
    stamp(len(steps))
    b.store(bad, b.gep(times, [c(len(steps) + 1)]))
    b.ret_void()
    return mod


def _copy_counting(b: ir.IRBuilder, fn: ir.Function, src, dst, inp: InputCopy, memmove, no) -> ir.Value:
    """Copy ``inp.nbytes`` from ``src`` to ``dst``; for a float dtype count the elements whose exponent bits are all
    ones (NaN/Inf) in the same loop (LLVM vectorizes it); returns the count (i64)."""
    bits = FLOAT_BITS.get(np.dtype(inp.dtype).name)
    if bits is None or inp.nbytes % (bits[0].width // 8):
        b.call(memmove, [dst, src, ir.Constant(I64, inp.nbytes), no])
        return ir.Constant(I64, 0)
    ty, mask = bits
    n = inp.nbytes // (ty.width // 8)
    s, d = b.bitcast(src, ty.as_pointer()), b.bitcast(dst, ty.as_pointer())
    pre = b.block
    body, done = fn.append_basic_block("copy"), fn.append_basic_block("copied")
    b.branch(body if n else done)
    b.position_at_end(body)
    i = b.phi(I64)
    acc = b.phi(I64)
    v = b.load(b.gep(s, [i]), align=1)
    b.store(v, b.gep(d, [i]), align=1)
    m = ir.Constant(ty, mask)
    hit = b.zext(b.icmp_unsigned("==", b.and_(v, m), m), I64)
    acc2, i2 = b.add(acc, hit), b.add(i, ir.Constant(I64, 1))
    i.add_incoming(ir.Constant(I64, 0), pre)
    i.add_incoming(i2, body)
    acc.add_incoming(ir.Constant(I64, 0), pre)
    acc.add_incoming(acc2, body)
    b.cbranch(b.icmp_unsigned("<", i2, ir.Constant(I64, n)), body, done)
    b.position_at_end(done)
    if not n:
        return ir.Constant(I64, 0)
    out = b.phi(I64)
    out.add_incoming(acc2, body)
    return out
