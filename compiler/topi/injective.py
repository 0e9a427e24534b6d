"""Default schedules of elementwise (injective) stages on the CPU and GPU targets."""
from __future__ import annotations

from compiler.te import Tensor

VECTOR = 8          # float32 lanes of one AVX2 register
# Loops smaller than this stay on the calling thread: handing them to the runtime's thread pool
# (compiler.backend.llvm.parallel) on a shared 2-core machine cost more than they saved (MobileNetV2: 89 vs 63 ms
# with a 1M multiply-add threshold).
PARALLEL_MIN = 1 << 20
"""Elements of an elementwise loop, or a pooling's work (output elements x window taps; float32 pools and the int8
``PackedMaxPool``), from which the loop runs parallel."""
PARALLEL_MIN_MACS = 8 << 20  # multiply-adds of a convolution / dense
COPY_PARALLEL_ELEMENTS = 1 << 18
"""Elements of an int8 pipeline's data-movement loop (the packed activation copy ``PackActivation``, the packed
int8 conv's int16 padded input copy) from which it runs parallel: ~20 us of one thread's copying at ~14 G
elements/s (MobileNetV2's 56x56 int16 copies: 0.45M elements), where the hand-off to a spinning worker (a few us,
far more on a loaded machine) pays off. The float32 conv's padded copy has its own, lower threshold
(:data:`compiler.topi.conv2d_direct.PAD_PARALLEL_MIN`)."""
GPU_THREADS = 256


def fuse_all(stage):
    """Fuse the stage's data loops (outermost first) into one; returns it."""
    axes = list(stage.leaf_iter_vars)
    fused = axes[0]
    for ax in axes[1:]:
        fused = stage.fuse(fused, ax)
    return fused


def schedule_injective_cpu(s, t: Tensor, vector: bool = True) -> None:
    """One flat loop: vectorized by 8 when it divides (and ``vector``), parallel over 2 cores when large."""
    st = s[t]
    flat = fuse_all(st)
    size = flat.extent
    if vector and size % VECTOR == 0 and size >= VECTOR:
        outer, inner = st.split(flat, VECTOR)
        st.vectorize(inner)
    else:
        outer = flat
    if size >= PARALLEL_MIN:
        st.parallel(outer)


def schedule_injective_gpu(s, t: Tensor) -> None:
    """One flat loop bound to blockIdx.x / threadIdx.x."""
    st = s[t]
    flat = fuse_all(st)
    threads = min(GPU_THREADS, flat.extent)
    bx, tx = st.split(flat, threads)
    st.bind(bx, "blockIdx.x")
    st.bind(tx, "threadIdx.x")


def schedule_data_gpu(s, stages, threads: int = 64) -> None:
    """Each stage's data loops fused and bound to blockIdx.x / threadIdx.x (``threads`` a block); a reduction
    stage's reduce loops stay serial inside its thread (row reductions: softmax, layer norm; small products)."""
    for t in stages:
        st = s[t]
        data = [a for a in st.leaf_iter_vars if a.kind == "data"]
        flat = data[0]
        for a in data[1:]:
            flat = st.fuse(flat, a)
        bx, tx = st.split(flat, min(threads, flat.extent))
        st.bind(bx, "blockIdx.x")
        st.bind(tx, "threadIdx.x")


def schedule_injective(s, t: Tensor, target: str, vector: bool = True) -> None:
    """The default schedule of elementwise stage ``t`` for ``target`` ("llvm" or "cuda")."""
    if target == "cuda":
        schedule_injective_gpu(s, t)
    else:
        schedule_injective_cpu(s, t, vector)
