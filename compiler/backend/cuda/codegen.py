"""NVPTX (CUDA) kernels from loop IR through llvmlite: one ``ptx_kernel`` per root stage nest.

Loops bound to ``blockIdx.*``/``threadIdx.*`` read the PTX special registers; the launch shape of a
kernel is the largest extent bound to each tag (a loop bound with a smaller extent is guarded). Other
loops run serially in each thread (``vectorize``/``parallel`` are CPU notions: ``vectorize`` runs
serially here, ``parallel`` is an error). ``local`` buffers live on the thread's stack, ``shared`` ones in
a ``__shared__`` array (address space 3); ``Sync`` is ``__syncthreads``. Compiled to PTX text with the
llvmlite NVPTX target, no CUDA toolkit needed.
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from compiler.backend.llvm.codegen import F32, I64, LlvmCodegen, _Ctx, mem_type
from compiler.tir.errors import TirError
from compiler.tir.ir import Allocate, Buffer, For, IfThen, PrimFunc, Sync

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
_SREG = {"blockIdx": "ctaid", "threadIdx": "tid"}


@dataclass
class KernelInfo:
    """One kernel of a CUDA op: its symbol and launch shape (grid and block dims, x/y/z)."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


def _tags(body: list, out: dict) -> dict:
    for s in body:
        if isinstance(s, For):
            if s.kind.startswith(("blockIdx", "threadIdx")):
                out[s.kind] = max(out.get(s.kind, 0), s.extent)
            _tags(s.body, out)
        elif isinstance(s, IfThen):
            _tags(s.body, out)
    return out


SM_REGISTERS = 65536  # 32-bit registers a block may use, every CUDA GPU since sm_50
MAX_THREAD_REGISTERS = 255  # ptxas's most registers a thread


class CudaCodegen(LlvmCodegen):
    """Emits an NVPTX module with one kernel per root statement of the loop IR."""

    def _setup(self) -> None:
        self.module.triple = TRIPLE
        self.kernels: list[KernelInfo] = []
        self.c = None
        self.launch = None

    def generate(self) -> ir.Module:
        for k, stmt in enumerate(self.f.body):
            if isinstance(stmt, Allocate):
                raise TirError(f"cuda: buffer {stmt.buffer.name} is allocated outside any kernel; attach it with "
                               f"compute_at inside a bound loop")
            tags = _tags([stmt], {})
            if not tags:
                raise TirError(f"cuda: kernel {k} (loop {getattr(getattr(stmt, 'var', None), 'name', stmt)}) has no loop "
                               f"bound to blockIdx/threadIdx; bind its outer loops, e.g. "
                               f"s[T].bind(outer, 'blockIdx.x'); s[T].bind(inner, 'threadIdx.x')")
            name = f"{self.name}_k{k}"
            tys = [mem_type(b.dtype).as_pointer() for b in self.buffers]
            fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), tys), name)
            fn.calling_convention = "ptx_kernel"
            for a in fn.args:
                a.add_attribute("noalias")
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            self.c = _Ctx(fn, b, {}, dict(zip(self.buffers, fn.args)))
            self.launch_dims = tags
            self.stmt(stmt)
            b = self.c.b
            b.ret_void()
            grid, block = (tuple(tags.get(f"{kind}.{a}", 1) for a in "xyz") for kind in ("blockIdx", "threadIdx"))
            if block[0] * block[1] * block[2] > 1024:
                raise TirError(f"cuda: kernel {name} uses {block} threads per block; at most 1024")
            self.kernels.append(KernelInfo(name, grid, block))
        self._annotate()
        return self.module

    def _annotate(self) -> None:
        """Mark the kernels for the NVPTX backend (``nvvm.annotations``): each is a kernel, and one whose block has
        more threads than an SM's registers allow at ptxas's own limit (255 a thread: above 256 threads) declares
        its block as its most threads (PTX ``.maxntid``, CUDA C's ``__launch_bounds__``), so ``ptxas`` keeps its
        registers within what such a block may use (65,536 a block) rather than leave a kernel the launch refuses
        (``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES``: a 1,024-thread tile conv kernel took 66 registers a thread for
        sm_90 without it). Smaller blocks are left to ptxas: with ``.maxntid`` it also cut their registers for
        occupancy (72 -> 64 with spills at 128 threads); ``.maxnreg`` at the block's limit instead raised the
        registers of other kernels (240 tuner settings of ResNet-18's convs, both ways)."""
        md = self.module.add_named_metadata("nvvm.annotations")
        i32 = ir.IntType(32)
        for k in self.kernels:
            fn = self.module.get_global(k.name)
            md.add(self.module.add_metadata([fn, "kernel", ir.Constant(i32, 1)]))
            if k.block[0] * k.block[1] * k.block[2] * MAX_THREAD_REGISTERS > SM_REGISTERS:
                for axis, n in zip("xyz", k.block):
                    md.add(self.module.add_metadata([fn, f"maxntid{axis}", ir.Constant(i32, n)]))

    def stmt(self, s) -> None:
        if isinstance(s, Sync):
            fn = self.module.declare_intrinsic("llvm.nvvm.barrier0", (), ir.FunctionType(ir.VoidType(), []))
            self.c.b.call(fn, [])
            return
        super().stmt(s)

    def allocate(self, buf: Buffer) -> None:
        if buf.scope != "shared":
            super().allocate(buf)
            return
        ty = ir.ArrayType(mem_type(buf.dtype), buf.size)
        gv = ir.GlobalVariable(self.module, ty, f"{self.c.fn.name}_{buf.name}_shared".replace(".", "_"), addrspace=3)
        gv.align = 16
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ty, ir.Undefined)
        b = self.c.b
        p = b.gep(gv, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 0)])
        self.c.bufs[buf] = b.addrspacecast(p, mem_type(buf.dtype).as_pointer())

    def _nvvm(self, name: str, x: ir.Value) -> ir.Value:
        fn = self.module.globals.get(name) or ir.Function(self.module, ir.FunctionType(F32, [F32]), name)
        return self.c.b.call(fn, [x])

    def _math(self, name: str, x: ir.Value) -> ir.Value:
        """PTX has no libm: exp/log through ex2/lg2, sin/cos approximate, tanh and erf from exp (A&S 7.1.26,
        |error| < 1.5e-7)."""
        b = self.c.b

        def c(v: float) -> ir.Constant:
            return ir.Constant(F32, v)

        if name == "exp":
            return self._nvvm("llvm.nvvm.ex2.approx.ftz.f", b.fmul(x, c(1.4426950408889634)))
        if name == "log":
            return b.fmul(self._nvvm("llvm.nvvm.lg2.approx.ftz.f", x), c(0.6931471805599453))
        if name in ("sin", "cos"):  # PTX's sin/cos.approx: ~1e-6 absolute on [-pi, pi], coarser far from 0
            return self._nvvm(f"llvm.nvvm.{name}.approx.ftz.f", x)
        if name == "tanh":
            e2 = self._math("exp", b.fmul(x, c(2.0)))
            return b.fsub(c(1.0), b.fdiv(c(2.0), b.fadd(e2, c(1.0))))
        if name == "erf":
            ax = super()._math("abs", x)
            t = b.fdiv(c(1.0), b.fadd(c(1.0), b.fmul(ax, c(0.3275911))))
            poly = c(1.061405429)
            for a in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
                poly = b.fadd(b.fmul(poly, t), c(a))
            poly = b.fmul(poly, t)
            y = b.fsub(c(1.0), b.fmul(poly, self._math("exp", b.fsub(c(0.0), b.fmul(ax, ax)))))
            return b.select(b.fcmp_ordered("<", x, c(0.0)), b.fsub(c(0.0), y), y)
        return super()._math(name, x)

    def loop(self, s: For) -> None:
        kind = s.kind
        self.ranges[s.var] = s.extent
        if kind == "parallel":
            raise TirError(f"cuda: loop {s.var.name} is marked parallel (a CPU thread pool); bind it to blockIdx/"
                           f"threadIdx instead")
        if kind.startswith(("blockIdx", "threadIdx")):
            tag, axis = kind.split(".")
            b = self.c.b
            fn = self.module.declare_intrinsic(f"llvm.nvvm.read.ptx.sreg.{_SREG[tag]}.{axis}", (),
                                               ir.FunctionType(ir.IntType(32), []))
            idx = b.zext(b.call(fn, []), I64)
            self.c.env[s.var] = idx
            if s.extent < self.launch_dims[kind]:
                with b.if_then(b.icmp_signed("<", idx, ir.Constant(I64, s.extent))):
                    self.stmts(s.body)
            else:
                self.stmts(s.body)
            del self.c.env[s.var]
            return
        if kind == "vectorize":
            s = For(s.var, s.extent, s.body, "serial")
        super().loop(s)


def generate_ptx(f: PrimFunc, arch: str = DEFAULT_ARCH, name: str | None = None) -> tuple[str, list[KernelInfo], str]:
    """``(ptx text, kernels, llvm ir text)`` for ``f``."""
    cg = CudaCodegen(f, name)
    mod = cg.generate()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, opt=3)
    ref = llvm.parse_assembly(str(mod))
    ref.triple = TRIPLE
    ref.data_layout = str(tm.target_data)
    ref.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(ref, pb)
    return tm.emit_assembly(ref), cg.kernels, str(mod)
