"""The generated Vivado project run in a real Tcl 8.6 interpreter (fpga.tcl_check): it passes on every PYNQ board
with and without the board files installed, and each deliberately broken form of the Tcl or of the module
reference is rejected with a message naming the problem."""
from __future__ import annotations

import re
import shutil

import pytest

from fpga.boards import board_names, get_board
from fpga.tcl_check import TclCheckError, check_project
from isa import make_config

CFG = make_config("tiny")  # the Tcl does not depend on the accelerator's size; tiny's Verilog is cached


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    from fpga.vivado_project import write_project

    out = {}
    for b in board_names():
        d = tmp_path_factory.mktemp(b)
        write_project(b, d, cfg=CFG, run=False)
        out[b] = d
    return out


@pytest.mark.parametrize("board", board_names())
@pytest.mark.parametrize("installed", [False, True])
def test_generated_project_passes_on_every_board(projects, board, installed):
    b = get_board(board)
    r = check_project(projects[board], board_parts=(b.board_part,) if installed else ())
    assert r.outputs == ["vta.bit", "vta.hwh"]  # copied from where Vivado writes them
    assert r.board_part == (b.board_part if installed else "")
    (rule, conf), = r.automation
    assert conf["apply_board_preset"] == ("1" if installed else "0")  # substituted, not the literal $variable
    f = b.fam
    spaces = {(sp, seg): (off, rng) for sp, seg, off, rng in r.addresses}
    assert spaces[(f"{f.ps_cell}/Data", "vta_0/s_axil/reg0")][0] == f.ctrl_base
    assert spaces[("vta_0/m_axi", f"{f.ps_cell}/{f.hp_segment}")] == (0, b.ddr_bytes)
    assert ("vta_0/m_axi", "mem_interconnect/S00_AXI") in r.intf_nets


def copy_with(src, tmp_path, file, old, new, count=1):
    dst = tmp_path / "broken"
    shutil.copytree(src, dst)
    text = (dst / file).read_text()
    assert text.count(old) >= 1, f"{old!r} not in {file}"
    (dst / file).write_text(text.replace(old, new, count))
    return dst


def test_brace_variable_is_rejected(projects, tmp_path):
    """The form the generator wrote before: `-config {... apply_board_preset $use_board_preset}`."""
    src = projects["pynq-z1"]
    text = (src / "bd.tcl").read_text()
    m = re.search(r"-config \[list (.*?)\]", text)
    d = copy_with(src, tmp_path, "bd.tcl", m.group(0), "-config {" + m.group(1) + "}")
    with pytest.raises(TclCheckError, match=r"unsubstituted Tcl variable '\$use_board_preset'"):
        check_project(d)


_Z1, _U96 = get_board("pynq-z1").fam, get_board("ultra96").fam

# (id, board, file, the text replaced, its replacement, what the error must say)
BROKEN = [
    ("brace-variable-in-a-dict", "zcu104", "bd.tcl", "CONFIG.NUM_MI {2}", "CONFIG.NUM_MI {$n_mi}",
     r"unsubstituted Tcl variable '\$n_mi'"),
    ("misspelt-pin", "pynq-z1", "bd.tcl", "[get_bd_pins vta_0/aclk]", "[get_bd_pins vta_0/aclck]",
     r"pin 'vta_0/aclck' does not exist.*aclk"),
    # IRQ_F2P exists only when the PS config enables fabric interrupts
    ("pin-of-a-disabled-ps-port", "pynq-z2", "bd.tcl", "CONFIG.PCW_USE_FABRIC_INTERRUPT {1}",
     "CONFIG.PCW_USE_FABRIC_INTERRUPT {0}", r"pin 'processing_system7_0/IRQ_F2P' does not exist"),
    ("overlapping-segments", "pynq-z1", "bd.tcl", f"-offset 0x{_Z1.intc_base:08X}", f"-offset 0x{_Z1.ctrl_base:08X}",
     r"overlaps vta_0/s_axil/reg0"),
    ("misaligned-segment", "ultra96", "bd.tcl", f"-offset 0x{_U96.ctrl_base:08X}",
     f"-offset 0x{_U96.ctrl_base + 0x1000:08X}", r"not aligned to its range"),
    ("segment-out-of-window", "ultra96", "bd.tcl", f"-offset 0x{_U96.ctrl_base:08X}", "-offset 0x80000000",
     r"outside the window of zynq_ultra_ps_e_0/M_AXI_HPM0_FPD"),
    ("unassociated-axi-clock", "pynq-z1", "vta_accel.v", "ASSOCIATED_BUSIF s_axil:m_axi", "ASSOCIATED_BUSIF s_axil",
     r"m_axi is not associated with any clock"),
    ("unconnected-clock", "pynq-z1", "bd.tcl", " [get_bd_pins axi_intc_0/s_axi_aclk]", "",
     r"axi_intc_0/s_axi_aclk is not connected"),
    ("board-preset-without-board-part", "zcu104", "build.tcl", "set use_board_preset 0", "set use_board_preset 1",
     r"apply_board_preset 1 but the project has no board part"),
]


@pytest.mark.parametrize("board, file, old, new, message", [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_form_is_rejected(projects, tmp_path, board, file, old, new, message):
    d = copy_with(projects[board], tmp_path, file, old, new)
    with pytest.raises(TclCheckError, match=message):
        check_project(d)


def test_bd_tcl_sourced_alone_defaults_to_no_preset(projects, tmp_path):
    """bd.tcl sourced without build.tcl (e.g. into an open project) must not reference an unset variable."""
    d = tmp_path / "alone"
    shutil.copytree(projects["pynq-z1"], d)
    (d / "alone.tcl").write_text(
        f"create_project -force p $::env(HOME) -part {get_board('pynq-z1').part}\n"
        f"add_files -norecurse [list {d}/vta_top.v {d}/vta_accel.v]\n"
        f"source {d}/bd.tcl\n")
    with pytest.raises(TclCheckError, match=r"validated True, saved True, built False"):
        check_project(d, script="alone.tcl")
