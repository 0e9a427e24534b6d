"""PTX from llvmlite's nvptx64 target (no CUDA toolkit needed): a float32 elementwise kernel."""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

F32, I32, I64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
TRIPLE = "nvptx64-nvidia-cuda"


def _tid(m: ir.Module, b: ir.IRBuilder, reg: str) -> ir.Value:
    fn = m.declare_intrinsic(f"llvm.nvvm.read.ptx.sreg.{reg}", (), ir.FunctionType(I32, []))
    return b.zext(b.call(fn, []), I64)


def clip_kernel_ir(n: int, lo: float | None = 0.0, hi: float | None = None, name: str = "vta_clip") -> ir.Module:
    """``y[i] = min(max(x[i], lo), hi)`` for i < n, one thread per element, as an NVPTX kernel."""
    m = ir.Module(name)
    m.triple = TRIPLE
    p = F32.as_pointer(1)  # global address space
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [p, p]), name)
    fn.calling_convention = "ptx_kernel"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i = b.add(b.mul(_tid(m, b, "ctaid.x"), _tid(m, b, "ntid.x")), _tid(m, b, "tid.x"))
    body, done = fn.append_basic_block("body"), fn.append_basic_block("done")
    b.cbranch(b.icmp_signed("<", i, ir.Constant(I64, n)), body, done)
    b.position_at_end(body)
    v = b.load(b.gep(fn.args[0], [i], inbounds=True))
    if lo is not None:
        c = ir.Constant(F32, lo)
        v = b.select(b.fcmp_ordered("<", v, c), c, v)
    if hi is not None:
        c = ir.Constant(F32, hi)
        v = b.select(b.fcmp_ordered(">", v, c), c, v)
    b.store(v, b.gep(fn.args[1], [i], inbounds=True))
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return m


def emit_ptx(mod: ir.Module, cpu: str = "sm_80") -> str:
    """PTX assembly of an NVPTX llvmlite module, optimized at -O3."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=cpu, opt=3)
    ref = llvm.parse_assembly(str(mod))
    ref.triple = TRIPLE
    ref.data_layout = str(tm.target_data)
    ref.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(ref, pb)
    return tm.emit_assembly(ref)
