"""The Zynq shell: the accelerator in a block design with the processing system, for PYNQ overlays.

A :class:`Shell` is a small model of the block design (cells, interface and signal connections,
address assignments) built from a :class:`Board` and an ``HwConfig``. It is written out as Vivado
Tcl (:meth:`Shell.bd_tcl`) and, for the RTL-backed pynq shim, as the hardware handoff a Vivado
build of the same design describes (:meth:`Shell.hwh`). The design:

- the PS (``processing_system7`` on Zynq-7000, ``zynq_ultra_ps_e`` on Zynq UltraScale+) with its first
  PL clock at the config's ``clock_mhz``;
- the accelerator (module reference ``vta_accel``, :func:`wrapper_verilog`) with its AXI4-Lite slave
  behind M_AXI_GP0 (M_AXI_HPM0_FPD), its AXI4 master on S_AXI_HP0 (S_AXI_HP0_FPD) at the config's bus
  width, and its level interrupt through an ``axi_intc`` (what PYNQ's ``Interrupt`` needs) on IRQ_F2P
  (pl_ps_irq0);
- a ``proc_sys_reset`` for the PL clock domain.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

from hw.accel_wrapper import accel_verilog as wrapper_verilog  # noqa: F401 - the module reference
from isa.config import HwConfig
from isa.registers import IP_NAME, REG_SPAN
from isa.signature import config_signature

#: Zynq-7000 PS settings every PYNQ-Z1/Z2 overlay shares (UART0, SD0, USB0, ENET0 on their MIO pins).
ZYNQ7_PS_BASE = {
    "PCW_UART0_PERIPHERAL_ENABLE": "1", "PCW_UART0_UART0_IO": "MIO 14 .. 15",
    "PCW_SD0_PERIPHERAL_ENABLE": "1", "PCW_SD0_SD0_IO": "MIO 40 .. 45",
    "PCW_USB0_PERIPHERAL_ENABLE": "1", "PCW_ENET0_PERIPHERAL_ENABLE": "1", "PCW_ENET0_ENET0_IO": "MIO 16 .. 27",
    "PCW_PRESET_BANK1_VOLTAGE": "LVCMOS 1.8V",
}


@dataclass(frozen=True)
class Family:
    """Names of the PS ports and settings on one Zynq family."""

    ps_ip: str
    ps_cell: str
    gp_port: str
    gp_aclk: str
    hp_port: str
    hp_aclk: str
    hp_segment: str  # <interface>/<segment> of DDR behind the HP port
    irq_pin: str
    clk_pin: str
    rstn_pin: str
    hp_widths: tuple[int, ...]
    ctrl_base: int
    intc_base: int
    shim_phys_base: int  # where the RTL shim's contiguous memory sits (a DDR address the HP port reaches)
    arch: str

    def ps_settings(self, cfg: HwConfig) -> dict[str, str]:
        mhz = f"{cfg.clock_mhz:g}"
        if self.ps_ip == "processing_system7":
            return {"PCW_USE_M_AXI_GP0": "1", "PCW_USE_S_AXI_HP0": "1",
                    "PCW_S_AXI_HP0_DATA_WIDTH": str(cfg.bus_width), "PCW_USE_FABRIC_INTERRUPT": "1",
                    "PCW_IRQ_F2P_INTR": "1", "PCW_EN_CLK0_PORT": "1", "PCW_EN_RST0_PORT": "1",
                    "PCW_FPGA0_PERIPHERAL_FREQMHZ": mhz}
        return {"PSU__USE__M_AXI_GP0": "1", "PSU__MAXIGP0__DATA_WIDTH": "32", "PSU__USE__M_AXI_GP1": "0",
                "PSU__USE__M_AXI_GP2": "0", "PSU__USE__S_AXI_GP2": "1",
                "PSU__SAXIGP2__DATA_WIDTH": str(cfg.bus_width), "PSU__USE__IRQ0": "1",
                "PSU__FPGA_PL0_ENABLE": "1", "PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ": mhz}

    @property
    def fclk_setting(self) -> str:
        return "PCW_FPGA0_PERIPHERAL_FREQMHZ" if self.ps_ip == "processing_system7" else \
            "PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"


FAMILIES = {
    "zynq7": Family("processing_system7", "processing_system7_0", "M_AXI_GP0", "M_AXI_GP0_ACLK", "S_AXI_HP0",
                    "S_AXI_HP0_ACLK", "S_AXI_HP0/HP0_DDR_LOWOCM", "IRQ_F2P", "FCLK_CLK0", "FCLK_RESET0_N", (32, 64),
                    0x43C0_0000, 0x4180_0000, 0x1800_0000, "zynq"),
    "zynqmp": Family("zynq_ultra_ps_e", "zynq_ultra_ps_e_0", "M_AXI_HPM0_FPD", "maxihpm0_fpd_aclk",
                     "S_AXI_HP0_FPD", "saxihp0_fpd_aclk", "SAXIGP2/HP0_DDR_LOW", "pl_ps_irq0", "pl_clk0", "pl_resetn0",
                     (32, 64, 128), 0xA000_0000, 0xA001_0000, 0x6000_0000, "zynquplus"),
}


@dataclass(frozen=True)
class Board:
    """One PYNQ board: its part, the Vivado board part (used when installed), PS settings, DDR size."""

    name: str
    family: str
    part: str
    board_part: str
    default_config: str
    ddr_bytes: int
    ps_config: dict = field(default_factory=dict)

    @property
    def fam(self) -> Family:
        return FAMILIES[self.family]

    def check_config(self, cfg: HwConfig) -> None:
        """Reject a config the shell cannot connect (bus width not an HP port width)."""
        if cfg.bus_width not in self.fam.hp_widths:
            raise ValueError(f"config {cfg.name!r}: bus_width {cfg.bus_width} cannot sit on {self.name}'s "
                             f"{self.fam.hp_port} port, whose data width is one of {self.fam.hp_widths} bits; "
                             f"choose a config with one of those bus widths")


#: The address window of the accelerator's registers on the control bus (a Vivado segment, >= REG_SPAN).
CTRL_RANGE = 0x1_0000
INTC_RANGE = 0x1_0000
ACCEL_CELL, INTC_CELL, CTRL_IC, MEM_IC, RESET_CELL = "vta_0", "axi_intc_0", "ctrl_interconnect", "mem_interconnect", \
    "proc_sys_reset_0"


@dataclass
class Shell:
    """The block design of the accelerator on ``board`` for ``cfg``."""

    board: Board
    cfg: HwConfig
    design: str = "vta"

    def __post_init__(self) -> None:
        self.board.check_config(self.cfg)
        assert CTRL_RANGE >= REG_SPAN

    # ------------------------------------------------------------------ the model
    @property
    def ps(self) -> str:
        return self.board.fam.ps_cell

    def cells(self) -> list[tuple[str, str, dict[str, str]]]:
        """``(name, kind, config)``: kind ``ip:<name>`` (the latest installed version) or ``module:<name>``."""
        f = self.board.fam
        return [(self.ps, f"ip:{f.ps_ip}", {**self.board.ps_config, **f.ps_settings(self.cfg)}),
                (ACCEL_CELL, f"module:{IP_NAME}", {}),
                (CTRL_IC, "ip:axi_interconnect", {"NUM_SI": "1", "NUM_MI": "2"}),
                (MEM_IC, "ip:axi_interconnect", {"NUM_SI": "1", "NUM_MI": "1"}),
                (INTC_CELL, "ip:axi_intc", {"C_IRQ_CONNECTION": "1", "C_KIND_OF_INTR": "0xFFFFFFFE"}),
                (RESET_CELL, "ip:proc_sys_reset", {})]

    def intf_nets(self) -> list[tuple[str, str]]:
        """AXI connections, master -> slave."""
        f = self.board.fam
        return [(f"{self.ps}/{f.gp_port}", f"{CTRL_IC}/S00_AXI"), (f"{CTRL_IC}/M00_AXI", f"{ACCEL_CELL}/s_axil"),
                (f"{CTRL_IC}/M01_AXI", f"{INTC_CELL}/s_axi"), (f"{ACCEL_CELL}/m_axi", f"{MEM_IC}/S00_AXI"),
                (f"{MEM_IC}/M00_AXI", f"{self.ps}/{f.hp_port}")]

    def nets(self) -> list[tuple[str, list[str]]]:
        """Signal nets: ``(driver, [loads])``."""
        f, ps = self.board.fam, self.ps
        clk_loads = [f"{ps}/{f.gp_aclk}", f"{ps}/{f.hp_aclk}", f"{ACCEL_CELL}/aclk", f"{INTC_CELL}/s_axi_aclk",
                     f"{RESET_CELL}/slowest_sync_clk"]
        for ic, n_mi in ((CTRL_IC, 2), (MEM_IC, 1)):
            clk_loads += [f"{ic}/ACLK", f"{ic}/S00_ACLK"] + [f"{ic}/M{i:02d}_ACLK" for i in range(n_mi)]
        periph = [f"{ACCEL_CELL}/aresetn", f"{INTC_CELL}/s_axi_aresetn"]
        for ic, n_mi in ((CTRL_IC, 2), (MEM_IC, 1)):
            periph += [f"{ic}/S00_ARESETN"] + [f"{ic}/M{i:02d}_ARESETN" for i in range(n_mi)]
        return [(f"{ps}/{f.clk_pin}", clk_loads), (f"{ps}/{f.rstn_pin}", [f"{RESET_CELL}/ext_reset_in"]),
                (f"{RESET_CELL}/interconnect_aresetn", [f"{CTRL_IC}/ARESETN", f"{MEM_IC}/ARESETN"]),
                (f"{RESET_CELL}/peripheral_aresetn", periph),
                (f"{ACCEL_CELL}/irq", [f"{INTC_CELL}/intr"]), (f"{INTC_CELL}/irq", [f"{ps}/{f.irq_pin}"])]

    def address_map(self) -> list[tuple[str, str, int, int]]:
        """``(address space, segment, offset, range)``."""
        f = self.board.fam
        return [(f"{self.ps}/Data", f"{ACCEL_CELL}/s_axil/reg0", f.ctrl_base, CTRL_RANGE),
                (f"{self.ps}/Data", f"{INTC_CELL}/S_AXI/Reg", f.intc_base, INTC_RANGE),
                (f"{ACCEL_CELL}/m_axi", f"{self.ps}/{f.hp_segment}", 0, self.board.ddr_bytes)]

    # ------------------------------------------------------------------ Tcl
    def bd_tcl(self) -> str:
        """The block design as Vivado Tcl (sourced by :func:`project_tcl` after the sources are added)."""
        b = self.board
        out = [f"# Block design {self.design!r}: vta accelerator ({self.cfg.name}) on {b.name} ({b.part})",
               "# generated by vta-stack (fpga/zynq_shell.py); config signature "
               f"0x{config_signature(self.cfg):08X}",
               "proc latest_vlnv {name} {",
               "  set defs [lsort -dictionary [get_ipdefs -all -quiet xilinx.com:ip:${name}:*]]",
               "  if {[llength $defs] == 0} { error \"IP xilinx.com:ip:${name} is not in this Vivado installation\" }",
               "  return [lindex $defs end]",
               "}",
               "# build.tcl sets use_board_preset (1 when the board files are installed); sourced alone: 0",
               "if {![info exists use_board_preset]} { set use_board_preset 0 }",
               f"create_bd_design {self.design}"]
        for name, kind, conf in self.cells():
            what, ip = kind.split(":", 1)
            if what == "ip":
                out.append(f"create_bd_cell -type ip -vlnv [latest_vlnv {ip}] {name}")
            else:
                out.append(f"create_bd_cell -type module -reference {ip} {name}")
            if name == self.ps:
                # [list ...], not braces: Tcl substitutes $use_board_preset only outside braces
                if b.family == "zynq7":
                    auto = "processing_system7 -config [list make_external \"FIXED_IO, DDR\" apply_board_preset " \
                           "$use_board_preset]"
                else:
                    auto = "zynq_ultra_ps_e -config [list apply_board_preset $use_board_preset]"
                out.append(f"apply_bd_automation -rule xilinx.com:bd_rule:{auto} [get_bd_cells {name}]")
            if conf:
                items = " ".join(f"CONFIG.{k} {{{v}}}" for k, v in conf.items())
                out.append(f"set_property -dict [list {items}] [get_bd_cells {name}]")
        for m, s in self.intf_nets():
            out.append(f"connect_bd_intf_net [get_bd_intf_pins {m}] [get_bd_intf_pins {s}]")
        for drv, loads in self.nets():
            pins = " ".join(f"[get_bd_pins {p}]" for p in [drv] + loads)
            out.append(f"connect_bd_net {pins}")
        for space, seg, off, rng in self.address_map():
            out.append(f"assign_bd_address -offset 0x{off:08X} -range 0x{rng:08X} "
                       f"-target_address_space [get_bd_addr_spaces {space}] [get_bd_addr_segs {seg}] -force")
        out += ["validate_bd_design", "save_bd_design", ""]
        return "\n".join(out)

    # ------------------------------------------------------------------ hardware handoff (for the shim)
    def hwh(self) -> str:
        """The subset of a Vivado ``.hwh`` that pynq reads (PS memory map, cells, interrupt nets), for the
        RTL-backed shim; a Vivado build writes the real one."""
        f, ps = self.board.fam, self.ps
        ps_params = {**self.board.ps_config, **f.ps_settings(self.cfg)}

        def module(inst: str, modtype: str, vlnv: str, inner: str) -> str:
            return (f'    <MODULE FULLNAME="/{inst}" INSTANCE="{inst}" MODTYPE="{modtype}" VLNV="{vlnv}">\n'
                    f'{inner}    </MODULE>\n')

        def port(name: str, direction: str, sigis: str, net: str, conns: list[tuple[str, str]]) -> str:
            c = "".join(f'<CONNECTION INSTANCE="{i}" PORT="{p}"/>' for i, p in conns)
            return (f'        <PORT DIR="{direction}" NAME="{name}" SIGIS="{sigis}" SIGNAME="{net}">'
                    f'<CONNECTIONS>{c}</CONNECTIONS></PORT>\n')

        params = "".join(f"        <PARAMETER NAME={quoteattr(k)} VALUE={quoteattr(v)}/>\n" for k, v in ps_params.items())
        ranges = ""
        for _, seg, off, rng in self.address_map()[:2]:
            inst, intf, block = seg.split("/")
            ranges += (f'        <MEMRANGE ADDRESSBLOCK="{block}" BASENAME="C_BASEADDR" BASEVALUE="0x{off:08X}" '
                       f'HIGHNAME="C_HIGHADDR" HIGHVALUE="0x{off + rng - 1:08X}" INSTANCE="{inst}" '
                       f'IS_DATA="TRUE" MASTERBUSINTERFACE="{f.gp_port}" MEMTYPE="REGISTER" '
                       f'SLAVEBUSINTERFACE="{intf}"/>\n')
        mods = module(ps, f.ps_ip, f"xilinx.com:ip:{f.ps_ip}:0.0",
                      f"      <PARAMETERS>\n{params}      </PARAMETERS>\n      <MEMORYMAP>\n{ranges}      </MEMORYMAP>\n"
                      f"      <PORTS>\n{port(f.irq_pin, 'I', 'INTERRUPT', 'axi_intc_0_irq', [(INTC_CELL, 'irq')])}"
                      f"      </PORTS>\n")
        mods += module(ACCEL_CELL, IP_NAME, f"xilinx.com:module_ref:{IP_NAME}:1.0",
                       f"      <PORTS>\n{port('irq', 'O', 'INTERRUPT', 'vta_0_irq', [(INTC_CELL, 'intr')])}"
                       f"      </PORTS>\n")
        mods += module(INTC_CELL, "axi_intc", "xilinx.com:ip:axi_intc:0.0",
                       f"      <PORTS>\n{port('intr', 'I', 'INTERRUPT', 'vta_0_irq', [(ACCEL_CELL, 'irq')])}"
                       f"{port('irq', 'O', 'INTERRUPT', 'axi_intc_0_irq', [(ps, f.irq_pin)])}      </PORTS>\n")
        return ('<?xml version="1.0" encoding="UTF-8" standalone="no" ?>\n'
                f'<EDKSYSTEM EDWVERSION="1.2" TIMESTAMP="vta-stack" VIVADOVERSION="none (vta-stack RTL shim)">\n'
                f'  <SYSTEMINFO ARCH="{f.arch}" BOARD="{self.board.board_part}" DEVICE="{self.board.part}" '
                f'NAME="{self.design}"/>\n  <MODULES>\n{mods}  </MODULES>\n</EDKSYSTEM>\n')
