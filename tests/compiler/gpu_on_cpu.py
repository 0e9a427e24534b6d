"""A GPU schedule checked without a GPU: its loop IR with every thread/block loop run serially on the CPU gives the
same values (shared-memory fills become redundant), so the lowering (cache regions, indices) is checked anywhere."""
from __future__ import annotations

from compiler.backend.build import CpuOp
from compiler.backend.llvm.codegen import generate
from compiler.tir import For, IfThen, lower_loops


def serial_on_cpu(s, args=None) -> CpuOp:
    """Lower schedule ``s`` (over ``args``), make every bound loop serial and compile it for this CPU."""
    func = lower_loops(s, args) if args is not None else lower_loops(s)

    def walk(body):
        for st in body:
            if isinstance(st, For):
                st.kind = "serial"
                walk(st.body)
            elif isinstance(st, IfThen):
                walk(st.body)

    walk(func.body)
    mod, sym = generate(func)
    return CpuOp(func, mod, sym)


def assert_assembles_without_spills(op) -> None:
    """Where ``ptxas`` is installed: the CUDA op's PTX assembles for its architecture, no kernel spills registers
    (``ptxas -v``: its accumulators stay in registers) and a block of each kernel fits an SM's registers."""
    import numpy as np

    from compiler.backend.cuda.nvcc import have_ptxas, ptx_resources

    if not have_ptxas():
        return
    res = ptx_resources(op.ptx, op.arch)
    for k in op.kernels:
        r = res[k.name]
        assert r.spill_bytes == 0, (k, r)
        assert r.registers * int(np.prod(k.block)) <= 65536, (k, r)
