"""A GPU schedule checked without a GPU: its loop IR with every thread/block loop run serially on the CPU gives the
same values (shared-memory fills become redundant), so the lowering (cache regions, indices) is checked anywhere."""
from __future__ import annotations

import functools

from compiler.backend.build import CpuOp
from compiler.backend.llvm.codegen import generate
from compiler.tir import For, IfThen, lower_loops

SM_REGISTERS = 65536  # a block's 32-bit registers at most, every CUDA GPU since sm_50
SM_STATIC_SHARED = 48 << 10  # a block's static shared memory at most


def gpu_matmul(m: int = 64, n: int = 48, k: int = 80, t: int = 16, chained: bool = False):
    """A ``t x t``-tiled GPU matmul schedule of ``(m, k) @ (k, n)`` float32 whose A and B chunks are staged in shared
    memory per ``t``-deep reduction step; ``chained``: A's chunk is staged twice, the second fill reading the first."""
    from compiler import te
    from compiler.schedule import create_schedule

    a = te.placeholder((m, k), "float32", "A")
    b = te.placeholder((k, n), "float32", "B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    s = create_schedule(c)
    io, jo, ii, ji = s[c].tile(*c.op.axes, t, t)
    for iv, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        s[c].bind(iv, tag)
    ko, _ = s[c].split(r, t)
    first = s.cache_read(a, "shared", [c])
    fills = [first, s.cache_read(first, "shared", [c])] if chained else [first]
    for sh in fills + [s.cache_read(b, "shared", [c])]:
        s[sh].compute_at(s[c], ko)
        s[sh].bind(s[sh].op.axes[0], "threadIdx.y")
        s[sh].bind(s[sh].op.axes[1], "threadIdx.x")
    return s


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
        assert r.registers * int(np.prod(k.block)) <= SM_REGISTERS, (k, r)


def shared_races(func) -> list[str]:
    """Where a GPU function's loop IR touches a shared-memory buffer with no ``sync_threads`` since another access
    that conflicts with it, every thread of a block running every statement: a read after a write (the fill not
    yet finished) or a write after a read (the next fill overwriting what a slower thread still reads). Loop bodies
    are walked twice, so a write at the top of an iteration meets the reads at the bottom of the one before. The
    GPU's own barrier semantics, checked without a GPU (the emulator runs each thread alone and cannot see a
    missing barrier); indices are not looked at, so a thread reading only what it wrote would be flagged too."""
    from compiler.te.expr import walk
    from compiler.tir.ir import BufLoad, Store, Sync

    def shared_reads(e):
        for n in walk(e):
            if isinstance(n, BufLoad):
                if n.buffer.scope == "shared":
                    yield n.buffer.name
                yield from shared_reads(n.index)

    found: list[str] = []
    written: set[str] = set()
    read: set[str] = set()

    def reads(bufs, where, what=""):
        for b in bufs:
            if b in written:
                found.append(f"{where}: {b} read{what} after a write with no sync between")
            read.add(b)

    def visit(body, where):
        for s in body:
            if isinstance(s, Sync):
                written.clear()
                read.clear()
            elif isinstance(s, Store):
                reads({*shared_reads(s.value), *shared_reads(s.index)}, where)
                if s.buffer.scope == "shared":
                    if s.buffer.name in read:
                        found.append(f"{where}: {s.buffer.name} written after a read with no sync between")
                    written.add(s.buffer.name)
            elif isinstance(s, For):
                for _ in range(2):
                    visit(s.body, f"{where}/{s.var.name}")
            elif isinstance(s, IfThen):
                reads(set(shared_reads(s.cond)), where, " (in a guard)")
                visit(s.body, where)

    for k, root in enumerate(func.body):
        written.clear()
        read.clear()
        visit([root], f"kernel {k}")
    return sorted(set(found))


@functools.lru_cache(maxsize=None)
def model_cuda_ops(model: str) -> tuple:
    """The CudaOps of a whole-model cuda build (compiled here, no GPU needed), built once per process:
    ``"resnet18"`` (32 px, base width 16) or ``"mobilenet_v2"`` (MobileNetV2-small); with ``"_int8"`` appended,
    the model quantized by onnxruntime's defaults (its int8 convs' kernels)."""
    import warnings

    import numpy as np

    from compiler.backend.cuda.runtime import CudaOp
    from compiler.executor import build
    from compiler.quant.ort_tools import ort_quantize_static
    from compiler.zoo import mobilenet_v2_small, resnet18

    name, int8 = model.removesuffix("_int8"), model.endswith("_int8")
    m = resnet18(1, image_size=32, num_classes=10, base_width=16, seed=0) if name == "resnet18" \
        else mobilenet_v2_small()
    if int8:
        rng = np.random.default_rng(0)
        calib = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = ort_quantize_static(m, calib, per_channel=False, defaults=True)
    return tuple(fn for _, fn in build(m, target="cuda", progress=False).cpu._plans.values() if isinstance(fn, CudaOp))
