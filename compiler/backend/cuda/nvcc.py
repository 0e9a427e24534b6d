"""Compile CUDA C to PTX with nvcc and assemble PTX with ptxas (both optional tools on PATH)."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

DEFAULT_ARCH = "sm_80"


class CudaToolError(RuntimeError):
    """nvcc/ptxas is missing or rejected the input."""


def have_nvcc() -> bool:
    return shutil.which("nvcc") is not None


def have_ptxas() -> bool:
    return shutil.which("ptxas") is not None


def _run(cmd: list[str], what: str) -> None:
    if shutil.which(cmd[0]) is None:
        raise CudaToolError(f"{cmd[0]} not found on PATH: install the CUDA toolkit to {what}")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise CudaToolError(f"{cmd[0]} failed ({what}):\n{proc.stderr.strip()}")


def compile_cuda(src: str, arch: str = DEFAULT_ARCH) -> str:
    """PTX text of CUDA C ``src`` (``nvcc -ptx -O3 -arch=<arch>``)."""
    with tempfile.TemporaryDirectory() as d:
        cu, ptx = Path(d) / "k.cu", Path(d) / "k.ptx"
        cu.write_text(src)
        _run(["nvcc", "-ptx", "-O3", f"-arch={arch}", str(cu), "-o", str(ptx)], "compile CUDA C to PTX")
        return ptx.read_text()


def assemble_ptx(ptx: str, arch: str = DEFAULT_ARCH) -> bytes:
    """A cubin from PTX text (``ptxas -arch=<arch>``): proves the PTX is valid for that GPU."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        _run(["ptxas", f"-arch={arch}", str(src), "-o", str(out)], "assemble PTX")
        return out.read_bytes()
