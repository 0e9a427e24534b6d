"""Compile CUDA C to PTX with nvcc and assemble PTX with ptxas (both optional tools on PATH)."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

DEFAULT_ARCH = "sm_80"


class CudaToolError(RuntimeError):
    """nvcc/ptxas is missing or rejected the input."""


def have_nvcc() -> bool:
    return shutil.which("nvcc") is not None


def have_ptxas() -> bool:
    return shutil.which("ptxas") is not None


def _run(cmd: list[str], what: str) -> str:
    """Run ``cmd`` (its tool from PATH); its stderr (``ptxas -v`` reports)."""
    if shutil.which(cmd[0]) is None:
        raise CudaToolError(f"{cmd[0]} not found on PATH: install the CUDA toolkit to {what}")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise CudaToolError(f"{cmd[0]} failed ({what}):\n{proc.stderr.strip()}")
    return proc.stderr


def compile_cuda(src: str, arch: str = DEFAULT_ARCH) -> str:
    """PTX text of CUDA C ``src`` (``nvcc -ptx -O3 -arch=<arch>``)."""
    with tempfile.TemporaryDirectory() as d:
        cu, ptx = Path(d) / "k.cu", Path(d) / "k.ptx"
        cu.write_text(src)
        _run(["nvcc", "-ptx", "-O3", f"-arch={arch}", str(cu), "-o", str(ptx)], "compile CUDA C to PTX")
        return ptx.read_text()


def assemble_ptx(ptx: str, arch: str = DEFAULT_ARCH) -> bytes:
    """A cubin from PTX text (``ptxas -arch=<arch>``): proves the PTX is valid for that GPU."""
    return _assemble(ptx, arch, [])[0]


class KernelResources(NamedTuple):
    """What ``ptxas`` allotted one kernel: registers a thread, static shared memory and spilled bytes."""

    registers: int
    shared_bytes: int
    spill_bytes: int


def ptx_resources(ptx: str, arch: str = DEFAULT_ARCH) -> dict[str, KernelResources]:
    """Kernel name -> its :class:`KernelResources` (``ptxas -v -arch=<arch>``): whether a block of its threads fits
    an SM (65,536 registers and 48 KiB of static shared memory a block on every CUDA GPU since sm_50)."""
    return parse_ptxas_report(_assemble(ptx, arch, ["-v"])[1])


def parse_ptxas_report(report: str) -> dict[str, KernelResources]:
    """Kernel name -> :class:`KernelResources` from ``ptxas -v`` output (per entry function: its spill line, then
    its ``Used N registers[, ...][, M bytes smem]`` line)."""
    out: dict[str, KernelResources] = {}
    name, spill = None, 0
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name, spill = m.group(1), 0
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            spill = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and name is not None:
            smem = re.search(r"(\d+) bytes smem", line)
            out[name] = KernelResources(int(m.group(1)), int(smem.group(1)) if smem else 0, spill)
            name = None
    return out


def _assemble(ptx: str, arch: str, flags: list[str]) -> tuple[bytes, str]:
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        report = _run(["ptxas", *flags, f"-arch={arch}", str(src), "-o", str(out)], "assemble PTX")
        return out.read_bytes(), report
