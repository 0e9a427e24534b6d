"""The CPU that LLVM code is compiled for: the host by default, or a forced x86-64 feature level.

``$VTA_LLVM_CPU`` picks the target CPU: ``host`` (default: this machine's CPU name and features, as
``llvm.get_host_cpu_features`` reports them) or one of the x86-64 feature levels ``x86-64``,
``x86-64-v2`` (SSE4.2), ``x86-64-v3`` (AVX2 + FMA), ``x86-64-v4`` (AVX-512 F/BW/CD/DQ/VL).
``$VTA_LLVM_FEATURES`` adds or removes LLVM features on top (``+avx512vnni,-fma``). In-process,
:func:`use_cpu` does the same for a block of code (tests run every level this way).

Schedules read their vector width from :func:`target_cpu`, never from the host directly. Code compiled for
a target whose features the host lacks is compiled (and can be inspected) but never executed:
:func:`missing_features` lists what the host lacks and the JIT refuses to run such code
(:class:`HostLacksFeatures`).
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
from dataclasses import dataclass

import llvmlite.binding as llvm

from compiler.tir.errors import TirError

_V1 = ("cmov", "cx8", "fxsr", "mmx", "sse", "sse2")
_V2 = _V1 + ("cx16", "sahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3")
_V3 = _V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
#: the x86-64 micro-architecture levels (psABI) and the LLVM features each one implies
LEVELS: dict[str, frozenset] = {"x86-64": frozenset(_V1), "x86-64-v2": frozenset(_V2), "x86-64-v3": frozenset(_V3),
                                "x86-64-v4": frozenset(_V4)}
CPU_CHOICES = ("host",) + tuple(LEVELS)
_FEATURE_ITEM = re.compile(r"^[+-][a-z0-9][a-z0-9._-]*$")


class HostLacksFeatures(TirError):
    """Code compiled for CPU features this machine does not have was about to run."""


@dataclass(frozen=True)
class CpuTarget:
    """What LLVM compiles for: ``cpu`` name, ``features`` string for the target machine, and the set of
    enabled ``enabled`` feature names that schedules and the runnable check read."""

    label: str  # "host" or a level name
    cpu: str
    features: str
    enabled: frozenset

    @property
    def key(self) -> tuple:
        return (self.cpu, self.features)

    def describe(self) -> str:
        extra = f" {self.features}" if self.label != "host" and self.features else ""
        return f"{self.label} ({self.cpu}){extra}" if self.label == "host" else f"{self.label}{extra}"


@functools.lru_cache(maxsize=1)
def host_cpu() -> tuple[str, frozenset]:
    """``(cpu name, enabled feature names)`` of this machine."""
    llvm.initialize_native_target()
    feats = llvm.get_host_cpu_features()
    return llvm.get_host_cpu_name(), frozenset(k for k, v in feats.items() if v)


@functools.lru_cache(maxsize=1)
def _host_target() -> CpuTarget:
    llvm.initialize_native_target()
    name, enabled = host_cpu()
    return CpuTarget("host", name, llvm.get_host_cpu_features().flatten(), enabled)


@functools.lru_cache(maxsize=1)
def _known_features() -> frozenset:
    llvm.initialize_native_target()
    return frozenset(llvm.get_host_cpu_features()) | LEVELS["x86-64-v4"] | {"avx512vnni", "avxvnni", "evex512"}


@functools.lru_cache(maxsize=32)
def make_target(cpu: str = "host", features: str = "") -> CpuTarget:
    """The target for ``cpu`` (``host`` or an x86-64 level) with ``features`` (``+name``/``-name``, comma-separated)
    applied on top; raises ``ValueError`` naming what is allowed."""
    cpu = (cpu or "host").strip()
    if cpu not in CPU_CHOICES:
        raise ValueError(f"LLVM target CPU {cpu!r} is not supported; choose one of {', '.join(CPU_CHOICES)} "
                         f"($VTA_LLVM_CPU)")
    host = _host_target()
    items = [f.strip() for f in (features or "").split(",") if f.strip()]
    known = _known_features()
    for it in items:
        if not _FEATURE_ITEM.match(it) or it[1:] not in known:
            raise ValueError(f"LLVM target feature {it!r} is not valid: write +name or -name with an x86 feature LLVM "
                             f"knows (e.g. +avx512vnni, -fma) ($VTA_LLVM_FEATURES)")
    enabled = set(host.enabled if cpu == "host" else LEVELS[cpu])
    for it in items:
        (enabled.add if it[0] == "+" else enabled.discard)(it[1:])
    if cpu == "host":
        if not items:
            return host
        base = {f[1:]: f[0] for f in host.features.split(",") if f}
        base.update({it[1:]: it[0] for it in items})
        return CpuTarget("host", host.cpu, ",".join(s + k for k, s in sorted(base.items())), frozenset(enabled))
    return CpuTarget(cpu, cpu, ",".join(items), frozenset(enabled))


_OVERRIDE: list[CpuTarget] = []


def target_cpu() -> CpuTarget:
    """The CPU that LLVM code is compiled for now: :func:`use_cpu`, else ``$VTA_LLVM_CPU``/``$VTA_LLVM_FEATURES``,
    else the host."""
    if _OVERRIDE:
        return _OVERRIDE[-1]
    return make_target(os.environ.get("VTA_LLVM_CPU", "host"), os.environ.get("VTA_LLVM_FEATURES", ""))


@contextlib.contextmanager
def use_cpu(cpu: str = "host", features: str = ""):
    """Compile for ``cpu``/``features`` inside the block (kernels compiled before keep their target)."""
    _OVERRIDE.append(make_target(cpu, features))
    try:
        yield _OVERRIDE[-1]
    finally:
        _OVERRIDE.pop()


# the features whose absence makes code of a target unrunnable (instruction-set extensions; tuning flags aside)
_ISA = LEVELS["x86-64-v4"] | {"avx512vnni", "avxvnni", "avx512vbmi", "avx512bf16", "avx512fp16", "amx-int8", "sha",
                              "aes", "pclmul", "vpclmulqdq", "gfni", "vaes"}


def missing_features(target: CpuTarget | None = None) -> list[str]:
    """Instruction-set features ``target`` (default: the current one) uses that this machine lacks (empty: runnable)."""
    t = target or target_cpu()
    if t.label == "host" and t.features == _host_target().features:
        return []
    return sorted((t.enabled & _ISA) - host_cpu()[1])


def check_runnable(target: CpuTarget | None = None, what: str = "code") -> None:
    """Raise :class:`HostLacksFeatures` when ``target``'s code cannot run on this machine."""
    t = target or target_cpu()
    miss = missing_features(t)
    if miss:
        raise HostLacksFeatures(f"{what} was compiled for {t.describe()}, which uses {', '.join(miss)}; this machine "
                                f"({host_cpu()[0]}) lacks them, so it is compiled only and never run. Run it under "
                                f"$VTA_LLVM_CPU=host or a level this machine has")


def vector_bits(target: CpuTarget | None = None) -> int:
    """Widest SIMD register of the target CPU in bits: 512 (AVX-512F), 256 (AVX/AVX2), else 128."""
    f = (target or target_cpu()).enabled
    if "avx512f" in f:
        return 512
    if "avx" in f or "avx2" in f:
        return 256
    return 128


def float_lanes(target: CpuTarget | None = None) -> int:
    """float32 lanes of one SIMD register of the target CPU (8 on AVX2, 16 on AVX-512, 4 on SSE)."""
    return vector_bits(target) // 32


def int8_dot(target: CpuTarget | None = None) -> str | None:
    """The target's u8 x s8 -> s32 dot-product instruction set: ``"avx512vnni"`` (``vpdpbusd`` on zmm),
    ``"avxvnni"`` (the VEX form on ymm), or None (widening multiplies)."""
    f = (target or target_cpu()).enabled
    if "avx512vnni" in f and "avx512f" in f:
        return "avx512vnni"
    if "avxvnni" in f:
        return "avxvnni"
    return None
