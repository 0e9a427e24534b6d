"""The Zynq shell's block design, read back from the generated Tcl by an independent parser: the PS, the
accelerator's AXI-Lite behind GP0, its AXI master on HP0, its interrupt on IRQ_F2P, FCLK0 at the config's
clock, and an address map that holds the driver's registers."""
from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from fpga.boards import board_names, get_board
from isa import make_config
from isa.registers import REGISTERS

PS_PORTS = {  # family -> (PS IP, control master, memory slave, interrupt pin, clock pin, FCLK setting, HP width setting)
    "zynq7": ("processing_system7", "M_AXI_GP0", "S_AXI_HP0", "IRQ_F2P", "FCLK_CLK0",
              "PCW_FPGA0_PERIPHERAL_FREQMHZ", "PCW_S_AXI_HP0_DATA_WIDTH"),
    "zynqmp": ("zynq_ultra_ps_e", "M_AXI_HPM0_FPD", "S_AXI_HP0_FPD", "pl_ps_irq0", "pl_clk0",
               "PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ", "PSU__SAXIGP2__DATA_WIDTH"),
}


def parse_bd(tcl: str) -> dict:
    """cells {name: (kind, ip)}, config {cell: {key: value}}, intf edges, nets (lists of pins), addresses."""
    cells, config, edges, nets, addrs = {}, defaultdict(dict), [], [], []
    for line in tcl.splitlines():
        if m := re.match(r"create_bd_cell -type ip -vlnv \[latest_vlnv (\w+)\] (\w+)$", line):
            cells[m[2]] = ("ip", m[1])
        elif m := re.match(r"create_bd_cell -type module -reference (\w+) (\w+)$", line):
            cells[m[2]] = ("module", m[1])
        elif m := re.match(r"set_property -dict \[list (.*)\] \[get_bd_cells (\w+)\]$", line):
            config[m[2]].update(dict(re.findall(r"CONFIG\.(\w+) \{([^}]*)\}", m[1])))
        elif line.startswith("connect_bd_intf_net"):
            edges.append(tuple(re.findall(r"\[get_bd_intf_pins ([\w/]+)\]", line)))
        elif line.startswith("connect_bd_net"):
            nets.append(re.findall(r"\[get_bd_pins ([\w/]+)\]", line))
        elif m := re.match(r"assign_bd_address -offset (0x[0-9A-F]+) -range (0x[0-9A-F]+) -target_address_space "
                           r"\[get_bd_addr_spaces ([\w/]+)\] \[get_bd_addr_segs ([\w/]+)\]", line):
            addrs.append((m[3], m[4], int(m[1], 16), int(m[2], 16)))
    return {"cells": cells, "config": config, "edges": edges, "nets": nets, "addrs": addrs}


def reaches(bd: dict, src: str, dst: str) -> bool:
    """An AXI path from interface pin ``src`` to ``dst``, through interconnects (S* -> any M*)."""
    frontier, seen = [src], set()
    while frontier:
        pin = frontier.pop()
        if pin == dst:
            return True
        if pin in seen:
            continue
        seen.add(pin)
        for a, b in bd["edges"]:
            if a == pin:
                frontier.append(b)
        cell, port = pin.split("/")
        if bd["cells"].get(cell) == ("ip", "axi_interconnect") and port.startswith("S"):
            frontier += [b for a, b in bd["edges"] if a.startswith(cell + "/M")]
            frontier += [a for a, b in bd["edges"] if a.startswith(cell + "/M")]
    return False


def same_net(bd: dict, a: str, b: str) -> bool:
    return any(a in n and b in n for n in bd["nets"])


@pytest.mark.parametrize("board", board_names())
def test_block_design_connects_the_accelerator_to_the_ps(board):
    """Each board with its default config (pynq-z1: 64-bit HP0; ultra96: 128-bit HP0_FPD; FCLK0 at its clock_mhz)."""
    from fpga.zynq_shell import Shell

    b = get_board(board)
    cfg = make_config(b.default_config)
    bd = parse_bd(Shell(b, cfg).bd_tcl())
    ps_ip, gp, hp, irq, clk, fclk, hpw = PS_PORTS[b.family]
    ps = [c for c, kind in bd["cells"].items() if kind == ("ip", ps_ip)]
    acc = [c for c, kind in bd["cells"].items() if kind == ("module", "vta_accel")]
    assert len(ps) == 1 and len(acc) == 1, bd["cells"]
    ps, acc = ps[0], acc[0]
    # AXI: GP0 -> accelerator AXI-Lite, accelerator AXI master -> HP0 (never the other way round)
    assert reaches(bd, f"{ps}/{gp}", f"{acc}/s_axil")
    assert reaches(bd, f"{acc}/m_axi", f"{ps}/{hp}")
    assert not reaches(bd, f"{acc}/m_axi", f"{acc}/s_axil")
    # interrupt: accelerator irq -> axi_intc (what pynq.Interrupt needs) -> IRQ_F2P / pl_ps_irq0
    intc = [c for c, kind in bd["cells"].items() if kind == ("ip", "axi_intc")][0]
    assert same_net(bd, f"{acc}/irq", f"{intc}/intr") and same_net(bd, f"{intc}/irq", f"{ps}/{irq}")
    assert reaches(bd, f"{ps}/{gp}", f"{intc}/s_axi")
    # clock: FCLK0 at the config's clock, driving the accelerator; HP port at the config's bus width
    assert float(bd["config"][ps][fclk]) == cfg.clock_mhz
    assert same_net(bd, f"{ps}/{clk}", f"{acc}/aclk")
    assert int(bd["config"][ps][hpw]) == cfg.bus_width
    # address map: the register window holds every register the driver uses; DDR behind HP0 for the master
    regs = [(sp, seg, off, rng) for sp, seg, off, rng in bd["addrs"] if seg.startswith(f"{acc}/s_axil/")]
    assert len(regs) == 1 and regs[0][0] == f"{ps}/Data"
    _, _, base, rng = regs[0]
    assert base % rng == 0 and rng >= 256 and all(o % 4 == 0 and o + 4 <= rng for o in REGISTERS.values())
    windows = [(off, off + r) for sp, _, off, r in bd["addrs"] if sp == f"{ps}/Data"]
    assert all(a >= e2 or b <= s2 for (a, b) in windows for (s2, e2) in windows if (a, b) != (s2, e2))  # no overlap
    mem = [(seg, off, r) for sp, seg, off, r in bd["addrs"] if sp == f"{acc}/m_axi"]
    assert len(mem) == 1 and mem[0][0].startswith(f"{ps}/") and "HP0" in mem[0][0] and mem[0][1:] == (0, b.ddr_bytes)


@pytest.mark.parametrize("board", ["pynq-z2", "ultra96"])
def test_vta_hw_build_writes_the_vivado_project(board, tmp_path, capsys):
    """Without Vivado on PATH the command writes the project and prints the one command to run."""
    from vta.cli import main

    assert main(["hw", "build", "--board", board, "--config", "tiny", "-o", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    rep = json.loads(out.strip().splitlines()[-1])
    b = get_board(board)
    bd = parse_bd((tmp_path / "bd.tcl").read_text())
    assert float(bd["config"][b.fam.ps_cell][PS_PORTS[b.family][5]]) == make_config("tiny").clock_mhz
    (_, _, base, _), = [a for a in bd["addrs"] if a[1].startswith("vta_0/s_axil/")]
    assert rep["address_map"][0]["offset"] == base and rep["signature"].startswith("0x")
    assert rep["tcl_check"].startswith("passed")  # the written Tcl ran in Tcl 8.6 against the Vivado stand-ins
    build = (tmp_path / "build.tcl").read_text()
    assert b.part in build and "write_bitstream" in build and "vta.bit" in build and "vta.hwh" in build
    assert "source $here/bd.tcl" in build and "vta_accel.v" in build
    assert "vta_top core" in (tmp_path / "vta_accel.v").read_text()
    assert "module vta_top" in (tmp_path / "vta_top.v").read_text()
    if not rep["vivado_ran"]:
        assert f"cd {tmp_path.resolve()} && vivado -mode batch -source build.tcl" in out


def test_shim_handoff_matches_the_block_design(tmp_path):
    """The .hwh the shim reads names the same register window as the block design assigns."""
    from fpga.vivado_project import write_sim_overlay
    from fpga.zynq_shell import Shell
    from hw.cosim.pynq_shim import parse_hwh

    cfg = make_config("tiny")
    for board in board_names():
        bit = write_sim_overlay(board, cfg, tmp_path / board)
        ip_dict, pins = parse_hwh(bit.with_suffix(".hwh"))
        bd = parse_bd(Shell(get_board(board), cfg).bd_tcl())
        (_, seg, off, rng), = [a for a in bd["addrs"] if a[1].startswith("vta_0/s_axil/")]
        assert (ip_dict["vta_0"]["phys_addr"], ip_dict["vta_0"]["addr_range"]) == (off, rng)
        assert "vta_accel" in ip_dict["vta_0"]["type"] and "vta_0/irq" in pins


def test_bus_width_that_no_hp_port_has_is_rejected(tmp_path):
    from fpga.vivado_project import write_project

    with pytest.raises(ValueError, match=r"bus_width 128 cannot sit on pynq-z1's S_AXI_HP0.*\(32, 64\)"):
        write_project("pynq-z1", tmp_path, make_config("ultra96"))
    with pytest.raises(ValueError, match="unknown PYNQ board 'pynq-z9'.*pynq-z1"):
        write_project("pynq-z9", tmp_path)
