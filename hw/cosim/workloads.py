"""Workloads for co-simulation: blocked GEMMs from the runtime's instruction suite (the compiled conv2d layer is
:func:`compiler.backend.accel.conv_job.compiled_conv2d`)."""
from __future__ import annotations

from isa.config import HwConfig


def blocked_gemms(cfg: HwConfig) -> list[tuple[str, object]]:
    """``(name, Program)``: the instruction suite's two blocked GEMMs and the default-plan blocked GEMM."""
    from jit_runtime.blocked_gemm import blocked_gemm
    from jit_runtime.suite import suite_cases

    cases = suite_cases(cfg)
    return [(n, cases[n]()[0]) for n in ("gemm_vt1", "gemm_vt2")] + [("blocked_gemm", blocked_gemm(cfg)[0])]
