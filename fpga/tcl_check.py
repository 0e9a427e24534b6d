"""Run a generated Vivado project's Tcl (``build.tcl``, which sources ``bd.tcl``) in a real Tcl 8.6 interpreter
(CPython's ``tkinter.Tcl()``, no display needed) with recording stand-ins for the Vivado commands it uses.

Tcl itself parses, quotes and substitutes (so a ``$var`` inside braces stays literal, exactly as in Vivado);
the stand-ins check what Vivado would reject or flag when the design is built:

- every ``-config``/``-dict`` argument is a well-formed Tcl list of key/value pairs with no unsubstituted ``$``
  and, for ``apply_bd_automation``, only the keys and values the rule takes;
- every cell, pin, interface pin, address space and segment named exists when it is named (IP pins appear
  only when the cell's CONFIG enables them, as on ``processing_system7``/``zynq_ultra_ps_e``/``axi_interconnect``);
  a module reference names a module of the added sources, whose ports and ``X_INTERFACE_INFO`` /
  ``X_INTERFACE_PARAMETER`` annotations define its interfaces;
- nets: one driver, the same signal type (clock, reset, interrupt) and reset polarity on every pin, no pin on
  two nets; interface nets join a master and a slave of the same protocol, each pin once;
- addresses: power-of-two ranges of at least 4 KiB, offsets aligned to their range, inside the window of the PS
  master the path starts from (Zynq-7000 M_AXI_GP0: 0x4000_0000..0x7FFF_FFFF; ZynqMP M_AXI_HPM0_FPD:
  0xA000_0000..0xAFFF_FFFF) or inside the DDR segment's region, each segment once per space, no overlap,
  and reachable from the address space through the interface nets;
- ``validate_bd_design``: every AXI interface of a module reference has an associated clock
  (``ASSOCIATED_BUSIF``) whose ``ASSOCIATED_RESET`` exists; the two ends of every interface net run on the same
  clock net; every clock input, every connected interface's reset and every module port is connected; every
  segment reachable from an address space is assigned in it;
- the build: ``apply_board_preset 1`` only with a board part set; the files added exist; the bitstream and
  hardware handoff are copied from where Vivado writes them (the stand-in ``wait_on_run`` writes them there).

The PS address windows and segment regions are the Zynq TRMs' (UG585, UG1085), not :mod:`fpga.zynq_shell`'s
values, so the checker does not share the generator's assumptions. What it cannot check (IP parameter
legality beyond the keys above, timing, placement, the board) is listed in docs/fpga.md.
"""
from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: Master windows of the PS address spaces (base, size) and the DDR segments' regions, from the TRMs.
PS_MASTER_WINDOWS = {"M_AXI_GP0": (0x4000_0000, 0x4000_0000), "M_AXI_HPM0_FPD": (0xA000_0000, 0x1000_0000)}
DDR_SEGMENTS = {"processing_system7": ("S_AXI_HP0", "HP0_DDR_LOWOCM", 0, 0x4000_0000),
                "zynq_ultra_ps_e": ("S_AXI_HP0_FPD", "HP0_DDR_LOW", 0, 0x8000_0000)}
PS_SEGMENT_INTF = {"SAXIGP2": "S_AXI_HP0_FPD", "S_AXI_HP0": "S_AXI_HP0"}  # memory-map name -> interface pin
KNOWN_IPS = {"processing_system7": "5.5", "zynq_ultra_ps_e": "3.3", "axi_interconnect": "2.1", "axi_intc": "4.1",
             "proc_sys_reset": "5.0"}
PART_FAMILY = {"xc7z": "processing_system7", "xczu": "zynq_ultra_ps_e"}
AUTOMATION_KEYS = {"processing_system7": {"make_external", "apply_board_preset", "Master", "Slave"},
                   "zynq_ultra_ps_e": {"apply_board_preset"}}


class TclCheckError(Exception):
    """What Vivado would reject (or flag as a critical warning) in the generated Tcl."""


@dataclass
class Pin:
    name: str
    direction: str  # "I" or "O"
    kind: str = "data"  # clk, rst, intr, data
    polarity: str = ""  # ACTIVE_LOW / ACTIVE_HIGH for resets
    busif: tuple = ()  # clocks: associated interfaces
    reset: str = ""  # clocks: associated reset


@dataclass
class Intf:
    name: str
    mode: str  # Master / Slave
    protocol: str = "aximm"
    clock: str = ""
    reset: str = ""
    segment: str = ""  # slave: "<map>/<block>"
    region: tuple = ()  # slave segment: fixed (base, size) or () when assignable anywhere


@dataclass
class Cell:
    name: str
    ip: str  # IP name or "module:<name>"
    config: dict = field(default_factory=dict)
    module: "ModuleRef | None" = None

    def pins(self) -> dict[str, Pin]:
        return _ip_model(self)[0]

    def intfs(self) -> dict[str, Intf]:
        return _ip_model(self)[1]

    def spaces(self) -> dict[str, list[str]]:
        """Address spaces: name -> master interfaces whose transactions they describe."""
        return _ip_model(self)[2]


@dataclass
class ModuleRef:
    name: str
    pins: dict
    intfs: dict


def _on(conf: dict, key: str, default: str = "0") -> bool:
    return str(conf.get(key, default)).strip() in ("1", "true", "TRUE")


def _ip_model(cell: Cell) -> tuple[dict, dict, dict]:
    c, pins, intfs, spaces = cell.config, {}, {}, {}

    def pin(n, d, kind="data", pol=""):
        pins[n] = Pin(n, d, kind, pol)

    if cell.module is not None:
        return cell.module.pins, cell.module.intfs, {n: [n] for n, i in cell.module.intfs.items() if i.mode == "Master"}
    if cell.ip == "processing_system7":
        intfs["DDR"] = Intf("DDR", "Master", "ddrx")
        intfs["FIXED_IO"] = Intf("FIXED_IO", "Master", "fixedio")
        if _on(c, "PCW_USE_M_AXI_GP0", "1"):
            pin("M_AXI_GP0_ACLK", "I", "clk")
            intfs["M_AXI_GP0"] = Intf("M_AXI_GP0", "Master", clock="M_AXI_GP0_ACLK")
            spaces["Data"] = ["M_AXI_GP0"]
        if _on(c, "PCW_USE_S_AXI_HP0"):
            if c.get("PCW_S_AXI_HP0_DATA_WIDTH", "64") not in ("32", "64"):
                raise TclCheckError(f"{cell.name}: PCW_S_AXI_HP0_DATA_WIDTH {c['PCW_S_AXI_HP0_DATA_WIDTH']!r} "
                                    f"is not 32 or 64")
            pin("S_AXI_HP0_ACLK", "I", "clk")
            intfs["S_AXI_HP0"] = Intf("S_AXI_HP0", "Slave", clock="S_AXI_HP0_ACLK", segment="S_AXI_HP0/HP0_DDR_LOWOCM",
                                      region=(0, 0x4000_0000))
        if _on(c, "PCW_EN_CLK0_PORT", "1"):
            pin("FCLK_CLK0", "O", "clk")
        if _on(c, "PCW_EN_RST0_PORT", "1"):
            pin("FCLK_RESET0_N", "O", "rst", "ACTIVE_LOW")
        if _on(c, "PCW_USE_FABRIC_INTERRUPT") and _on(c, "PCW_IRQ_F2P_INTR"):
            pin("IRQ_F2P", "I", "intr")
    elif cell.ip == "zynq_ultra_ps_e":
        masters = []
        for key, intf, clk in (("PSU__USE__M_AXI_GP0", "M_AXI_HPM0_FPD", "maxihpm0_fpd_aclk"),
                               ("PSU__USE__M_AXI_GP1", "M_AXI_HPM1_FPD", "maxihpm1_fpd_aclk"),
                               ("PSU__USE__M_AXI_GP2", "M_AXI_HPM0_LPD", "maxihpm0_lpd_aclk")):
            if _on(c, key, "1"):
                pin(clk, "I", "clk")
                intfs[intf] = Intf(intf, "Master", clock=clk)
                masters.append(intf)
        if masters:
            spaces["Data"] = masters
        if _on(c, "PSU__USE__S_AXI_GP2"):
            if c.get("PSU__SAXIGP2__DATA_WIDTH", "128") not in ("32", "64", "128"):
                raise TclCheckError(f"{cell.name}: PSU__SAXIGP2__DATA_WIDTH {c['PSU__SAXIGP2__DATA_WIDTH']!r} is "
                                    f"not 32, 64 or 128")
            pin("saxihp0_fpd_aclk", "I", "clk")
            intfs["S_AXI_HP0_FPD"] = Intf("S_AXI_HP0_FPD", "Slave", clock="saxihp0_fpd_aclk",
                                          segment="SAXIGP2/HP0_DDR_LOW", region=(0, 0x8000_0000))
        if _on(c, "PSU__FPGA_PL0_ENABLE", "1"):
            pin("pl_clk0", "O", "clk")
            pin("pl_resetn0", "O", "rst", "ACTIVE_LOW")
        if _on(c, "PSU__USE__IRQ0"):
            pin("pl_ps_irq0", "I", "intr")
    elif cell.ip == "axi_interconnect":
        n_si, n_mi = int(c.get("NUM_SI", "1")), int(c.get("NUM_MI", "2"))
        if not (1 <= n_si <= 16 and 1 <= n_mi <= 64):
            raise TclCheckError(f"{cell.name}: NUM_SI {n_si} / NUM_MI {n_mi} out of range (1..16 / 1..64)")
        pin("ACLK", "I", "clk")
        pin("ARESETN", "I", "rst", "ACTIVE_LOW")
        for pre, n, mode in (("S", n_si, "Slave"), ("M", n_mi, "Master")):
            for i in range(n):
                p = f"{pre}{i:02d}"
                pin(f"{p}_ACLK", "I", "clk")
                pin(f"{p}_ARESETN", "I", "rst", "ACTIVE_LOW")
                intfs[f"{p}_AXI"] = Intf(f"{p}_AXI", mode, clock=f"{p}_ACLK", reset=f"{p}_ARESETN")
    elif cell.ip == "axi_intc":
        pin("s_axi_aclk", "I", "clk")
        pin("s_axi_aresetn", "I", "rst", "ACTIVE_LOW")
        pin("intr", "I", "intr")
        pin("irq", "O", "intr")
        intfs["s_axi"] = Intf("s_axi", "Slave", clock="s_axi_aclk", reset="s_axi_aresetn", segment="S_AXI/Reg")
    elif cell.ip == "proc_sys_reset":
        pin("slowest_sync_clk", "I", "clk")
        pin("ext_reset_in", "I", "rst")
        for n in ("aux_reset_in", "mb_debug_sys_rst", "dcm_locked"):
            pin(n, "I", "data")
        for n in ("mb_reset", "bus_struct_reset", "peripheral_reset"):
            pin(n, "O", "rst", "ACTIVE_HIGH")
        for n in ("interconnect_aresetn", "peripheral_aresetn"):
            pin(n, "O", "rst", "ACTIVE_LOW")
    return pins, intfs, spaces


_PORT_RE = re.compile(r"((?:\(\*.*?\*\)\s*)*)(input|output)\s+(?:wire\s+)?(?:\[(\d+):0\]\s+)?(\w+)", re.S)


def parse_module_ref(text: str, module: str) -> ModuleRef:
    """Ports and interface annotations of ``module`` in Verilog ``text`` (ANSI port list), as Vivado's module
    reference packager reads them."""
    m = re.search(r"^\s*module\s+%s\s*\((.*?)\);" % re.escape(module), text, re.S | re.M)
    if m is None:
        raise TclCheckError(f"module reference {module!r}: no such module in the added sources")
    pins, intfs, ports = {}, {}, {}
    for attrs, d, _, name in _PORT_RE.findall(m.group(1)):
        info = re.search(r'X_INTERFACE_INFO\s*=\s*"([^"]*)"', attrs)
        param = re.search(r'X_INTERFACE_PARAMETER\s*=\s*"([^"]*)"', attrs)
        ports[name] = (d, info.group(1) if info else "", param.group(1) if param else "")
    for name, (d, info, param) in ports.items():
        params = dict(p.strip().split(None, 1) for p in param.split(",") if p.strip()) if param else {}
        direction = "I" if d == "input" else "O"
        if not info:
            pins[name] = Pin(name, direction)
            continue
        vlnv, bus, logical = info.split()
        kind = vlnv.split(":")[2]
        if kind == "aximm":
            it = intfs.setdefault(bus, Intf(bus, "", "aximm"))
            if logical in ("AWVALID", "ARVALID"):
                it.mode = "Slave" if direction == "I" else "Master"
            continue
        pkind = {"clock": "clk", "reset": "rst", "interrupt": "intr"}.get(kind, "data")
        pins[name] = Pin(name, direction, pkind, params.get("POLARITY", ""),
                         tuple(params.get("ASSOCIATED_BUSIF", "").split(":")) if "ASSOCIATED_BUSIF" in params else (),
                         params.get("ASSOCIATED_RESET", ""))
    for it in intfs.values():
        if not it.mode:
            raise TclCheckError(f"{module}: interface {it.name} has no AWVALID/ARVALID port, so its mode is unknown")
        clocks = [p for p in pins.values() if p.kind == "clk" and it.name in p.busif]
        if not clocks:
            raise TclCheckError(f"{module}: AXI interface {it.name} is not associated with any clock "
                                f"(no clock port lists it in ASSOCIATED_BUSIF)")
        it.clock = clocks[0].name
        if not clocks[0].reset or clocks[0].reset not in pins or pins[clocks[0].reset].kind != "rst":
            raise TclCheckError(f"{module}: clock {it.clock} of interface {it.name} has no ASSOCIATED_RESET naming a "
                                f"reset port (got {clocks[0].reset!r})")
        it.reset = clocks[0].reset
        if it.mode == "Slave":
            it.segment = f"{it.name}/reg0"
    return ModuleRef(module, pins, intfs)


def _strip(path: str) -> str:
    return path.strip().lstrip("/")


class VivadoStandIn:
    """The recording stand-ins. ``board_parts``: the board parts "installed" (``get_board_parts``)."""

    def __init__(self, tcl, board_parts: tuple[str, ...] = ()):
        self.tcl, self.board_parts = tcl, set(board_parts)
        self.error: TclCheckError | None = None
        self.log: list[str] = []
        self.project: dict = {}
        self.sources: list[Path] = []
        self.design = ""
        self.cells: dict[str, Cell] = {}
        self.intf_nets: list[tuple[str, str]] = []
        self.nets: list[list[str]] = []
        self.pin_net: dict[str, int] = {}
        self.intf_used: set[str] = set()
        self.addresses: list[tuple[str, str, int, int]] = []  # (space, segment, offset, range)
        self.automation: list[tuple[str, dict]] = []
        self.validated = self.saved = self.built = False

    # ------------------------------------------------------------------ helpers
    def fail(self, msg: str):
        raise TclCheckError(msg)

    def opts(self, args, flags: set, valued: set) -> tuple[dict, list]:
        out, rest, it = {}, [], iter(args)
        for a in it:
            if a in valued:
                out[a] = next(it, None)
                if out[a] is None:
                    self.fail(f"option {a} needs a value")
            elif a in flags:
                out[a] = True
            elif a.startswith("-") and not re.match(r"^-?0x|^-\d", a):
                self.fail(f"unknown option {a} (allowed: {sorted(flags | valued)})")
            else:
                rest.append(a)
        return out, rest

    def as_list(self, s: str, what: str) -> list[str]:
        if self.tcl.call("string", "is", "list", s) in (0, "0"):
            self.fail(f"{what} is not a well-formed Tcl list: {s!r}")
        items = list(self.tcl.splitlist(s))
        if len(items) % 2:
            self.fail(f"{what} has an odd number of elements (key/value pairs expected): {s!r}")
        for v in items:
            if "$" in v:
                self.fail(f"{what} holds an unsubstituted Tcl variable {v!r} (inside braces $ is not substituted; "
                          f"build the list with [list ...]): {s!r}")
        return items

    def cell_of(self, path: str) -> tuple[Cell, str]:
        parts = _strip(path).split("/", 1)
        cell = self.cells.get(parts[0])
        if cell is None:
            self.fail(f"cell {parts[0]!r} does not exist (cells: {', '.join(self.cells) or 'none'})")
        return cell, parts[1] if len(parts) > 1 else ""

    def need_design(self):
        if not self.design:
            self.fail("no block design is open (create_bd_design first)")

    # ------------------------------------------------------------------ project commands
    def create_project(self, *args):
        o, rest = self.opts(args, {"-force"}, {"-part"})
        if len(rest) != 2 or "-part" not in o:
            self.fail(f"create_project needs NAME DIR -part PART, got {args}")
        part = o["-part"]
        if not any(part.startswith(p) for p in PART_FAMILY):
            self.fail(f"part {part!r} is not a Zynq part")
        self.project = {"name": rest[0], "dir": rest[1], "part": part, "board_part": "", "top": ""}
        return rest[0]

    def get_board_parts(self, *args):
        _, rest = self.opts(args, {"-quiet"}, set())
        return " ".join(sorted(b for b in self.board_parts if not rest or b == rest[0]))

    def current_project(self, *args):
        if not self.project:
            self.fail("no project is open")
        return "project:" + self.project["name"]

    def current_fileset(self, *args):
        return "fileset:sources_1"

    def set_property(self, *args):
        o, rest = self.opts(args, set(), {"-dict"})
        if "-dict" in o:
            items, objs = self.as_list(o["-dict"], "set_property -dict"), rest
        else:
            if len(rest) != 3:
                self.fail(f"set_property needs NAME VALUE OBJECTS, got {args}")
            items, objs = [rest[0], rest[1]], rest[2:]
            if "$" in rest[1]:
                self.fail(f"set_property {rest[0]} holds an unsubstituted Tcl variable: {rest[1]!r}")
        pairs = dict(zip(items[::2], items[1::2]))
        for obj in self.tcl.splitlist(objs[0]) if objs else []:
            if obj.startswith("project:"):
                for k, v in pairs.items():
                    if k != "board_part":
                        self.fail(f"project property {k} is not modelled")
                    if v not in self.board_parts:
                        self.fail(f"board part {v!r} is not installed")
                    self.project["board_part"] = v
            elif obj.startswith("fileset:"):
                for k, v in pairs.items():
                    if k != "top":
                        self.fail(f"fileset property {k} is not modelled")
                    self.project["top"] = v
            elif obj.startswith("cell:"):
                cell = self.cells[obj[5:]]
                for k, v in pairs.items():
                    if not k.startswith("CONFIG."):
                        self.fail(f"cell property {k!r} on {cell.name}: only CONFIG.* is set on cells")
                    if not v.strip():
                        self.fail(f"{cell.name}: {k} has an empty value")
                    cell.config[k[7:]] = v
                cell.pins()  # re-evaluate the model (raises on an illegal parameter)
            else:
                self.fail(f"set_property on {obj!r}: not an object (use [get_bd_cells ...], [current_project], ...)")
        if not objs:
            self.fail("set_property without an object")
        return ""

    def add_files(self, *args):
        _, rest = self.opts(args, {"-norecurse"}, {"-fileset"})
        for f in rest:
            for p in self.tcl.splitlist(f):
                if not Path(p).is_file():
                    self.fail(f"add_files: {p} does not exist")
                self.sources.append(Path(p))
        return ""

    def update_compile_order(self, *args):
        return ""

    def get_files(self, *args):
        _, rest = self.opts(args, {"-quiet"}, set())
        if rest and rest[0] == f"{self.design}.bd" and self.saved:
            return f"{self.project['dir']}/{self.project['name']}.srcs/sources_1/bd/{self.design}/{self.design}.bd"
        self.fail(f"get_files {rest}: no such file in the project (block design {self.design!r} saved: {self.saved})")

    def generate_target(self, *args):
        if len(args) != 2 or not args[1].endswith(f"{self.design}.bd"):
            self.fail(f"generate_target all <bd file> expected, got {args}")
        if not self.validated:
            self.fail("generate_target on a block design that was not validated")
        return ""

    def make_wrapper(self, *args):
        o, rest = self.opts(args, {"-top"}, {"-files"})
        if not o.get("-files", "").endswith(f"{self.design}.bd"):
            self.fail(f"make_wrapper -files <bd file> expected, got {args}")
        gen = Path(self.project["dir"]) / f"{self.project['name']}.gen/sources_1/bd/{self.design}/hdl"
        gen.mkdir(parents=True, exist_ok=True)
        w = gen / f"{self.design}_wrapper.v"
        w.write_text(f"module {self.design}_wrapper(); {self.design} {self.design}_i(); endmodule\n")
        return str(w)

    def launch_runs(self, *args):
        o, rest = self.opts(args, set(), {"-to_step", "-jobs"})
        if rest != ["impl_1"] or o.get("-to_step") != "write_bitstream":
            self.fail(f"launch_runs impl_1 -to_step write_bitstream expected, got {args}")
        top = self.project["top"]
        if top != f"{self.design}_wrapper" or not any(p.stem == top for p in self.sources):
            self.fail(f"top {top!r} is not the added wrapper of block design {self.design!r}")
        d, n = Path(self.project["dir"]), self.project["name"]
        (d / f"{n}.runs/impl_1").mkdir(parents=True, exist_ok=True)
        (d / f"{n}.runs/impl_1/{top}.bit").write_bytes(b"stand-in bitstream\n")
        hh = d / f"{n}.gen/sources_1/bd/{self.design}/hw_handoff"
        hh.mkdir(parents=True, exist_ok=True)
        (hh / f"{self.design}.hwh").write_text("<EDKSYSTEM/>\n")
        self.built = True
        return "impl_1"

    def wait_on_run(self, *args):
        if args != ("impl_1",) or not self.built:
            self.fail(f"wait_on_run {args}: no such run launched")
        return ""

    def get_runs(self, *args):
        if args != ("impl_1",):
            self.fail(f"get_runs {args}: only impl_1 exists")
        return "run:impl_1"

    def get_property(self, *args):
        if len(args) == 2 and args[0] == "PROGRESS" and args[1] == "run:impl_1":
            return "100%" if self.built else "0%"
        self.fail(f"get_property {args} is not modelled")

    def open_run(self, *args):
        if args != ("impl_1",) or not self.built:
            self.fail(f"open_run {args}: run not complete")
        return ""

    def _report(self, *args):
        o, _ = self.opts(args, set(), {"-file"})
        if "-file" in o:
            Path(o["-file"]).write_text("stand-in report\n")
        return ""

    # ------------------------------------------------------------------ block design commands
    def get_ipdefs(self, *args):
        _, rest = self.opts(args, {"-all", "-quiet"}, set())
        m = re.fullmatch(r"xilinx\.com:ip:(\w+):\*", rest[0] if rest else "")
        if not m:
            self.fail(f"get_ipdefs pattern {rest} is not xilinx.com:ip:NAME:*")
        v = KNOWN_IPS.get(m.group(1))
        return f"xilinx.com:ip:{m.group(1)}:1.0 xilinx.com:ip:{m.group(1)}:{v}" if v else ""

    def create_bd_design(self, *args):
        if len(args) != 1 or not re.fullmatch(r"\w+", args[0]):
            self.fail(f"create_bd_design NAME expected, got {args}")
        if not self.project:
            self.fail("create_bd_design without a project")
        self.design = args[0]
        return args[0]

    def create_bd_cell(self, *args):
        self.need_design()
        o, rest = self.opts(args, set(), {"-type", "-vlnv", "-reference"})
        if len(rest) != 1 or not re.fullmatch(r"\w+", rest[0]):
            self.fail(f"create_bd_cell needs one cell name, got {args}")
        name = rest[0]
        if name in self.cells:
            self.fail(f"cell {name} already exists")
        if o.get("-type") == "ip":
            m = re.fullmatch(r"xilinx\.com:ip:(\w+):[\d.]+", o.get("-vlnv", ""))
            if not m or m.group(1) not in KNOWN_IPS:
                self.fail(f"create_bd_cell -vlnv {o.get('-vlnv')!r}: not an IP in the catalog")
            ip = m.group(1)
            fam = [f for p, f in PART_FAMILY.items() if self.project["part"].startswith(p)][0]
            if ip in PART_FAMILY.values() and ip != fam:
                self.fail(f"{ip} does not exist on part {self.project['part']} (its PS is {fam})")
            self.cells[name] = Cell(name, ip)
        elif o.get("-type") == "module":
            ref = o.get("-reference", "")
            text = "\n".join(p.read_text() for p in self.sources if p.suffix in (".v", ".sv"))
            self.cells[name] = Cell(name, f"module:{ref}", module=parse_module_ref(text, ref))
        else:
            self.fail(f"create_bd_cell -type must be ip or module, got {o.get('-type')!r}")
        return f"cell:{name}"

    def apply_bd_automation(self, *args):
        o, rest = self.opts(args, set(), {"-rule", "-config"})
        m = re.fullmatch(r"xilinx\.com:bd_rule:(\w+)", o.get("-rule", ""))
        if not m or m.group(1) not in AUTOMATION_KEYS:
            self.fail(f"apply_bd_automation -rule {o.get('-rule')!r} is not a modelled rule")
        rule = m.group(1)
        items = self.as_list(o.get("-config", ""), f"apply_bd_automation -config of rule {rule}")
        conf = dict(zip(items[::2], items[1::2]))
        bad = set(conf) - AUTOMATION_KEYS[rule]
        if bad:
            self.fail(f"rule {rule} has no -config keys {sorted(bad)} (it takes {sorted(AUTOMATION_KEYS[rule])})")
        if conf.get("apply_board_preset", "0") not in ("0", "1"):
            self.fail(f"apply_board_preset must be 0 or 1, got {conf['apply_board_preset']!r}")
        if conf.get("apply_board_preset") == "1" and not self.project.get("board_part"):
            self.fail("apply_board_preset 1 but the project has no board part")
        if "make_external" in conf:
            ext = {s.strip() for s in conf["make_external"].split(",")}
            if not ext <= {"FIXED_IO", "DDR"}:
                self.fail(f"make_external {conf['make_external']!r}: only FIXED_IO, DDR")
        objs = [s for s in self.tcl.splitlist(rest[0])] if rest else []
        if len(objs) != 1 or not objs[0].startswith("cell:") or self.cells[objs[0][5:]].ip != rule:
            self.fail(f"apply_bd_automation rule {rule} needs the {rule} cell, got {rest}")
        self.automation.append((rule, conf))
        return ""

    def get_bd_cells(self, *args):
        _, rest = self.opts(args, {"-quiet"}, set())
        out = []
        for n in rest:
            cell, sub = self.cell_of(n)
            if sub:
                self.fail(f"get_bd_cells {n}: not a cell")
            out.append(f"cell:{cell.name}")
        return " ".join(out)

    def get_bd_pins(self, *args):
        out = []
        for n in args:
            cell, sub = self.cell_of(n)
            if sub not in cell.pins():
                self.fail(f"pin {n!r} does not exist: {cell.name} ({cell.ip}) has pins "
                          f"{', '.join(sorted(cell.pins()))}")
            out.append(f"/{cell.name}/{sub}")
        return " ".join(out)

    def get_bd_intf_pins(self, *args):
        out = []
        for n in args:
            cell, sub = self.cell_of(n)
            if sub not in cell.intfs():
                self.fail(f"interface pin {n!r} does not exist: {cell.name} ({cell.ip}) has "
                          f"{', '.join(sorted(cell.intfs()))}")
            out.append(f"/{cell.name}/{sub}")
        return " ".join(out)

    def get_bd_addr_spaces(self, *args):
        out = []
        for n in args:
            cell, sub = self.cell_of(n)
            if sub not in cell.spaces():
                self.fail(f"address space {n!r} does not exist: {cell.name} has "
                          f"{', '.join(sorted(cell.spaces())) or 'none'}")
            out.append(f"/{cell.name}/{sub}")
        return " ".join(out)

    def _segments(self, cell: Cell) -> dict[str, Intf]:
        return {i.segment: i for i in cell.intfs().values() if i.mode == "Slave" and i.segment}

    def get_bd_addr_segs(self, *args):
        out = []
        for n in args:
            cell, sub = self.cell_of(n)
            if sub not in self._segments(cell):
                self.fail(f"address segment {n!r} does not exist: {cell.name} has "
                          f"{', '.join(sorted(self._segments(cell))) or 'none'}")
            out.append(f"/{cell.name}/{sub}")
        return " ".join(out)

    def _pin(self, full: str) -> tuple[Cell, Pin]:
        cell, sub = self.cell_of(full)
        return cell, cell.pins()[sub]

    def connect_bd_intf_net(self, *args):
        self.need_design()
        if len(args) != 2:
            self.fail(f"connect_bd_intf_net needs two interface pins, got {args}")
        ends = []
        for a in args:
            if not a.startswith("/"):
                self.fail(f"connect_bd_intf_net: {a!r} is not an interface pin object ([get_bd_intf_pins ...])")
            cell, sub = self.cell_of(a)
            if sub not in cell.intfs():
                self.fail(f"connect_bd_intf_net: {a} is not an interface pin")
            if a in self.intf_used:
                self.fail(f"interface pin {a} is already connected")
            ends.append(cell.intfs()[sub])
        if {e.mode for e in ends} != {"Master", "Slave"}:
            self.fail(f"connect_bd_intf_net {args}: needs one master and one slave, got {[e.mode for e in ends]}")
        if ends[0].protocol != ends[1].protocol:
            self.fail(f"connect_bd_intf_net {args}: protocols differ ({ends[0].protocol} / {ends[1].protocol})")
        self.intf_used.update(args)
        m, s = args if ends[0].mode == "Master" else args[::-1]
        self.intf_nets.append((_strip(m), _strip(s)))
        return ""

    def connect_bd_net(self, *args):
        self.need_design()
        pins = []
        for a in args:
            for p in self.tcl.splitlist(a):
                if not p.startswith("/"):
                    self.fail(f"connect_bd_net: {p!r} is not a pin object ([get_bd_pins ...])")
                pins.append(p)
        if len(pins) < 2:
            self.fail(f"connect_bd_net needs at least two pins, got {args}")
        objs = [self._pin(p) for p in pins]
        drivers = [p for p, (c, pin) in zip(pins, objs) if pin.direction == "O"]
        if len(drivers) != 1:
            self.fail(f"net {pins}: {len(drivers)} drivers ({drivers}); a net has exactly one output pin")
        d = objs[pins.index(drivers[0])][1]
        for p, (c, pin) in zip(pins, objs):
            if p in self.pin_net:
                self.fail(f"pin {p} is already on another net")
            if pin.kind != d.kind and not (d.kind == "rst" and pin.kind == "data" and False):
                self.fail(f"net from {drivers[0]} ({d.kind}) drives {p} of type {pin.kind}")
            if d.kind == "rst" and pin.polarity and d.polarity and pin.polarity != d.polarity:
                self.fail(f"reset net from {drivers[0]} ({d.polarity}) drives {p} ({pin.polarity})")
        idx = len(self.nets)
        self.nets.append([_strip(p) for p in pins])
        for p in pins:
            self.pin_net[p] = idx
        return ""

    def _reach(self, src_intf: str) -> set[str]:
        """Slave interface pins reachable from master interface pin ``src_intf`` (cell/intf)."""
        seen, frontier = set(), [src_intf]
        while frontier:
            m = frontier.pop()
            for a, b in self.intf_nets:
                if a == m and b not in seen:
                    seen.add(b)
                    cell, _ = self.cell_of(b)
                    if cell.ip == "axi_interconnect":
                        frontier += [f"{cell.name}/{n}" for n, i in cell.intfs().items() if i.mode == "Master"]
        return seen

    def assign_bd_address(self, *args):
        o, rest = self.opts(args, {"-force"}, {"-offset", "-range", "-target_address_space"})
        for k in ("-offset", "-range", "-target_address_space"):
            if k not in o:
                self.fail(f"assign_bd_address without {k}")
        if len(rest) != 1:
            self.fail(f"assign_bd_address needs one segment, got {rest}")
        off, rng = int(o["-offset"], 0), int(o["-range"], 0)
        space, seg = _strip(o["-target_address_space"]), _strip(rest[0])
        scell, sname = self.cell_of(space)
        tcell, tseg = self.cell_of(seg)
        intf = self._segments(tcell).get(tseg)
        if sname not in scell.spaces() or intf is None:
            self.fail(f"assign_bd_address {space} {seg}: not an address space and a segment")
        if rng < 4096 or rng & (rng - 1):
            self.fail(f"segment {seg}: range {rng:#x} is not a power of two >= 4 KiB")
        if off % rng:
            self.fail(f"segment {seg}: offset {off:#x} is not aligned to its range {rng:#x}")
        masters = [m for m in scell.spaces()[sname] if f"{tcell.name}/{intf.name}" in self._reach(f"{scell.name}/{m}")]
        if not masters:
            self.fail(f"segment {seg} is not reachable from address space {space} through the interface nets")
        if intf.region:
            lo, size = intf.region
            if off < lo or off + rng > lo + size:
                self.fail(f"segment {seg} at [{off:#x}, {off + rng:#x}) lies outside its region "
                          f"[{lo:#x}, {lo + size:#x})")
        elif not scell.module:
            base, size = PS_MASTER_WINDOWS.get(masters[0], (0, 1 << 32))
            if off < base or off + rng > base + size:
                self.fail(f"segment {seg} at [{off:#x}, {off + rng:#x}) lies outside the window of "
                          f"{scell.name}/{masters[0]} [{base:#x}, {base + size:#x})")
        for sp, sg, o2, r2 in self.addresses:
            if sp == space and sg == seg:
                self.fail(f"segment {seg} is assigned twice in {space}")
            if sp == space and off < o2 + r2 and o2 < off + rng:
                self.fail(f"segment {seg} at [{off:#x}, {off + rng:#x}) overlaps {sg} at [{o2:#x}, {o2 + r2:#x}) "
                          f"in {space}")
        self.addresses.append((space, seg, off, rng))
        return ""

    def _net_of(self, cell: Cell, pin: str) -> int | None:
        return self.pin_net.get(f"/{cell.name}/{pin}")

    def validate_bd_design(self, *args):
        self.need_design()
        for cell in self.cells.values():
            for p in cell.pins().values():
                if p.direction == "I" and p.kind == "clk" and self._net_of(cell, p.name) is None:
                    self.fail(f"clock pin /{cell.name}/{p.name} is not connected to a clock source")
                if cell.module is not None and self._net_of(cell, p.name) is None:
                    self.fail(f"port {p.name} of module reference {cell.name} is not connected")
            if cell.ip == "proc_sys_reset" and self._net_of(cell, "ext_reset_in") is None:
                self.fail(f"{cell.name}/ext_reset_in is not connected")
            if cell.module is not None:
                for i in cell.intfs().values():
                    if f"/{cell.name}/{i.name}" not in self.intf_used:
                        self.fail(f"interface {cell.name}/{i.name} of the module reference is not connected")
        for m, s in self.intf_nets:
            clk = []
            for end in (m, s):
                cell, sub = self.cell_of(end)
                it = cell.intfs()[sub]
                if not it.clock:
                    continue
                net = self._net_of(cell, it.clock)
                if net is None:
                    self.fail(f"interface {end}'s clock {it.clock} is not connected")
                clk.append((end, net))
                if it.reset and self._net_of(cell, it.reset) is None:
                    self.fail(f"interface {end}'s reset {it.reset} is not connected")
            if len(clk) == 2 and clk[0][1] != clk[1][1]:
                self.fail(f"interface net {m} -> {s} crosses clocks: {clk[0][0]} and {clk[1][0]} are on different "
                          f"clock nets")
        for cell in self.cells.values():
            for sname, masters in cell.spaces().items():
                space = f"{cell.name}/{sname}"
                for mi in masters:
                    for s in self._reach(f"{cell.name}/{mi}"):
                        tc, ti = self.cell_of(s)
                        it = tc.intfs()[ti]
                        if it.segment and not any(sp == space and sg == f"{tc.name}/{it.segment}"
                                                  for sp, sg, _, _ in self.addresses):
                            self.fail(f"segment {tc.name}/{it.segment} is reachable from {space} but not assigned")
        self.validated = True
        return ""

    def save_bd_design(self, *args):
        if not self.validated:
            self.fail("save_bd_design before validate_bd_design")
        self.saved = True
        return ""


VIVADO_COMMANDS = ("create_project", "get_board_parts", "current_project", "current_fileset", "set_property",
                   "add_files", "update_compile_order", "get_files", "generate_target", "make_wrapper",
                   "launch_runs", "wait_on_run", "get_runs", "get_property", "open_run", "get_ipdefs",
                   "create_bd_design", "create_bd_cell", "apply_bd_automation", "get_bd_cells", "get_bd_pins",
                   "get_bd_intf_pins", "get_bd_addr_spaces", "get_bd_addr_segs", "connect_bd_intf_net",
                   "connect_bd_net", "assign_bd_address", "validate_bd_design", "save_bd_design")


@dataclass
class TclCheck:
    """What a checked run recorded."""

    cells: dict
    intf_nets: list
    nets: list
    addresses: list
    automation: list
    board_part: str
    outputs: list


def check_project(project_dir: str | Path, board_parts: tuple[str, ...] = (), script: str = "build.tcl") -> TclCheck:
    """Run ``script`` of the Vivado project in ``project_dir`` (a copy, in a temporary directory) in Tcl 8.6
    with the stand-ins; raises :class:`TclCheckError` naming the first problem (with the Tcl line that hit
    it) and returns the recorded design otherwise. ``board_parts``: board parts Vivado has installed."""
    import tkinter

    src = Path(project_dir)
    if not (src / script).is_file():
        raise TclCheckError(f"{src / script} does not exist (write the project with vta hw build --board ...)")
    with tempfile.TemporaryDirectory(prefix="vta-tclcheck-") as td:
        work = Path(td) / src.name
        shutil.copytree(src, work)
        tcl = tkinter.Tcl()
        if tcl.eval("info patchlevel").split(".")[:2] != ["8", "6"] and not tcl.eval("info patchlevel").startswith("9"):
            raise TclCheckError(f"Tcl {tcl.eval('info patchlevel')}: 8.6 or newer is needed")
        v = VivadoStandIn(tcl, board_parts)
        for name in VIVADO_COMMANDS:
            tcl.createcommand(name, _wrap(v, getattr(v, name)))
        for name in ("report_timing_summary", "report_utilization"):
            tcl.createcommand(name, _wrap(v, v._report))
        tcl.eval('rename unknown {}; proc unknown {args} { error "invalid command name \\"[lindex $args 0]\\" '
                 '(not a Vivado command the checker models)" }')
        tcl.eval("rename puts __tcl_puts; proc puts {args} { lappend ::__vta_puts [lindex $args end] }")
        try:
            tcl.eval(f"source {{{work / script}}}")
        except tkinter.TclError as exc:
            where = tcl.eval("set errorInfo")
            if v.error is not None:
                raise TclCheckError(f"{v.error}\n  Tcl: {_tcl_context(where)}") from None
            raise TclCheckError(f"Tcl error: {exc}\n  Tcl: {_tcl_context(where)}") from None
        if not (v.validated and v.saved and v.built):
            raise TclCheckError(f"{script} did not validate, save and build the block design "
                                f"(validated {v.validated}, saved {v.saved}, built {v.built})")
        outs = sorted(p.name for p in work.iterdir() if p.suffix in (".bit", ".hwh"))
        return TclCheck(dict(v.cells), v.intf_nets, v.nets, v.addresses, v.automation, v.project["board_part"], outs)


def _wrap(v: VivadoStandIn, fn):
    def call(*args):
        try:
            return fn(*args)
        except TclCheckError as exc:
            v.error = exc
            raise
    return call


def _tcl_context(error_info: str) -> str:
    lines = [ln.strip() for ln in error_info.splitlines() if ln.strip()]
    calls = [ln for ln in lines if ln.startswith('"')]
    where = [ln for ln in lines if "line" in ln and ("file" in ln or "procedure" in ln)]
    return (calls[0] if calls else "") + (f" ({where[0]})" if where else "")
