"""The host CPU as llvmlite sees it: name, features, SIMD width."""
from __future__ import annotations

import functools

import llvmlite.binding as llvm


@functools.lru_cache(maxsize=1)
def host_cpu() -> tuple[str, frozenset]:
    """``(cpu name, enabled feature names)`` of this machine."""
    llvm.initialize_native_target()
    feats = llvm.get_host_cpu_features()
    return llvm.get_host_cpu_name(), frozenset(k for k, v in feats.items() if v)


def vector_bits() -> int:
    """Widest SIMD register in bits: 512 (AVX-512F), 256 (AVX/AVX2), else 128."""
    _, f = host_cpu()
    if "avx512f" in f:
        return 512
    if "avx" in f or "avx2" in f:
        return 256
    return 128


def float_lanes() -> int:
    """float32 lanes of one SIMD register (8 on AVX2)."""
    return vector_bits() // 32


def has_fma() -> bool:
    return "fma" in host_cpu()[1]
