"""A complete Vivado project for a PYNQ overlay: sources, block design, build script producing ``<name>.bit``
and ``<name>.hwh`` (the two files ``pynq.Overlay`` loads).

Files written to the output directory:

| file | what |
|---|---|
| ``vta_top.v`` | the accelerator (Amaranth-generated Verilog) |
| ``vta_accel.v`` | the module reference: AXI interface annotations, active-low reset, level interrupt |
| ``bd.tcl`` | the block design (:class:`fpga.zynq_shell.Shell`) |
| ``build.tcl`` | creates the project, sources ``bd.tcl``, synthesizes, implements, writes the bitstream and copies ``<name>.bit``/``<name>.hwh`` here |
| ``build.sh`` | ``vivado -mode batch -source build.tcl`` |
| ``report.json`` | board, part, config, signature, address map, the command to run |
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from fpga.boards import get_board
from fpga.zynq_shell import ACCEL_CELL, Shell, wrapper_verilog
from isa import make_config
from isa.config import HwConfig
from isa.registers import REGISTERS
from isa.signature import config_signature


def build_tcl(shell: Shell, name: str) -> str:
    b = shell.board
    return "\n".join([
        f"# Vivado build of the vta-stack PYNQ overlay {name!r} for {b.name} ({b.part}), config {shell.cfg.name}",
        "# Run: vivado -mode batch -source build.tcl   (in this directory)",
        "set here [file normalize [file dirname [info script]]]",
        f"create_project -force {name}_prj $here/vivado -part {b.part}",
        "set use_board_preset 0",
        f"if {{[llength [get_board_parts -quiet {b.board_part}]]}} {{",
        f"  set_property board_part {b.board_part} [current_project]",
        "  set use_board_preset 1",
        "} else {",
        f"  puts \"board files for {b.board_part} are not installed: the PS keeps the settings in bd.tcl\"",
        "}",
        "add_files -norecurse [list $here/vta_top.v $here/vta_accel.v]",
        "update_compile_order -fileset sources_1",
        "source $here/bd.tcl",
        f"set bd [get_files {shell.design}.bd]",
        "generate_target all $bd",
        "set wrapper [make_wrapper -files $bd -top]",
        "add_files -norecurse $wrapper",
        f"set_property top {shell.design}_wrapper [current_fileset]",
        "update_compile_order -fileset sources_1",
        "launch_runs impl_1 -to_step write_bitstream -jobs 4",
        "wait_on_run impl_1",
        "if {[get_property PROGRESS [get_runs impl_1]] != \"100%\"} { error \"implementation failed: see vivado/*.runs\" }",
        "open_run impl_1",
        "report_timing_summary -file $here/timing.rpt",
        "report_utilization -file $here/utilization.rpt",
        f"file copy -force [glob $here/vivado/{name}_prj.runs/impl_1/*.bit] $here/{name}.bit",
        f"set hwh [glob -nocomplain $here/vivado/{name}_prj.gen/sources_1/bd/{shell.design}/hw_handoff/*.hwh "
        f"$here/vivado/{name}_prj.srcs/sources_1/bd/{shell.design}/hw_handoff/*.hwh]",
        "if {[llength $hwh] == 0} { error \"no .hwh written by Vivado\" }",
        f"file copy -force [lindex $hwh 0] $here/{name}.hwh",
        f"puts \"wrote $here/{name}.bit and $here/{name}.hwh\"",
        ""])


def write_project(board: str, out_dir: str | Path, cfg: HwConfig | None = None, name: str = "vta",
                  run: bool | None = None) -> dict:
    """Write the Vivado project for ``board`` into ``out_dir``; run Vivado when ``run`` (default: when
    ``vivado`` is on PATH). Returns the report (also ``report.json``)."""
    from hw.cosim.runner import verilog_for

    b = get_board(board)
    cfg = cfg or make_config(b.default_config)
    if not name.isidentifier():
        raise ValueError(f"project name {name!r} must be a plain identifier (letters, digits, _)")
    shell = Shell(b, cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    shutil.copy(verilog_for(cfg), out / "vta_top.v")  # cached by design key
    (out / "vta_accel.v").write_text(wrapper_verilog(cfg))
    (out / "bd.tcl").write_text(shell.bd_tcl())
    (out / "build.tcl").write_text(build_tcl(shell, name))
    (out / "build.sh").write_text("#!/bin/sh\n# builds <name>.bit and <name>.hwh with Vivado\n"
                                  "cd \"$(dirname \"$0\")\" && exec vivado -mode batch -source build.tcl\n")
    (out / "build.sh").chmod(0o755)
    amap = [{"space": sp, "segment": seg, "offset": off, "range": rng} for sp, seg, off, rng in shell.address_map()]
    rep_check = check_tcl(out, b)
    vivado = shutil.which("vivado")
    run = bool(vivado) if run is None else run
    command = f"cd {out.resolve()} && vivado -mode batch -source build.tcl"
    rep = {"board": b.name, "part": b.part, "family": b.family, "config": cfg.name, "clock_mhz": cfg.clock_mhz,
           "bus_width": cfg.bus_width, "signature": f"0x{config_signature(cfg):08X}", "dir": str(out),
           "accelerator": ACCEL_CELL, "registers": REGISTERS, "address_map": amap,
           "bitstream": str(out / f"{name}.bit"), "hwh": str(out / f"{name}.hwh"), "command": command,
           "files": sorted(p.name for p in out.iterdir() if p.is_file() and p.name != "report.json") + ["report.json"],
           "vivado_ran": False, "tcl_check": rep_check}
    if run:
        if not vivado:
            raise FileNotFoundError("vivado is not on PATH; run the project's build.sh on a machine that has it")
        proc = subprocess.run(["vivado", "-mode", "batch", "-source", "build.tcl"], cwd=out)
        if proc.returncode != 0:
            raise RuntimeError(f"Vivado failed with exit code {proc.returncode}: see {out / 'vivado.log'}")
        rep["vivado_ran"] = True
    rep["seconds"] = round(time.time() - t0, 1)
    (out / "report.json").write_text(json.dumps(rep, indent=1))
    return rep


def check_tcl(out: Path, board) -> str:
    """Run the written project's Tcl in Tcl 8.6 against the Vivado stand-ins (:mod:`fpga.tcl_check`), without and
    with the board files installed; raises :class:`fpga.tcl_check.TclCheckError` on what Vivado would reject.
    Returns what was checked ("skipped: ..." where Python has no tkinter, e.g. on some board images)."""
    try:
        import tkinter  # noqa: F401
    except ImportError:
        return "skipped: this Python has no tkinter (Tcl)"
    from fpga.tcl_check import check_project

    for parts in ((), (board.board_part,)):
        check_project(out, board_parts=parts)
    return "passed (Tcl 8.6, with and without the board files)"


def write_sim_overlay(board: str, cfg: HwConfig, out_dir: str | Path, name: str = "vta",
                      signature_cfg: HwConfig | None = None) -> Path:
    """The stand-in overlay the RTL-backed pynq shim loads: ``<name>.hwh`` (the address map and interrupt nets a
    Vivado build of :class:`Shell` describes) and ``<name>.bit`` naming the config to simulate. Returns the .bit path.

    ``signature_cfg`` (tests) builds the simulated design for another config than ``cfg``'s shell."""
    from hw.cosim.pynq_shim import write_sim_bitstream

    b = get_board(board)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.hwh").write_text(Shell(b, cfg).hwh())
    return write_sim_bitstream(out / f"{name}.bit", signature_cfg or cfg, b.fam.shim_phys_base, b.ddr_bytes)
