"""Resource estimate of the accelerator as it sits in a board's Zynq shell: the module reference ``vta_accel``
(:func:`fpga.zynq_shell.wrapper_verilog`, AXI master at the HP port's width) synthesized with yosys against the
board's device. The Xilinx IP around it (interconnects, ``axi_intc``, ``proc_sys_reset``) is not included."""
from __future__ import annotations

from fpga.boards import get_board
from fpga.zynq_shell import wrapper_verilog
from isa import make_config
from isa.config import HwConfig
from isa.registers import IP_NAME

#: board part prefix -> capacity entry of hw.synth.CAPACITY
DEVICES = {"xc7z020": "xc7", "xczu3eg": "xczu3eg", "xczu7ev": "xczu7ev"}


def synthesize_shell(board: str, cfg: HwConfig | None = None) -> dict:
    """yosys report (:func:`hw.synth.synthesize`) of ``vta_accel`` for ``board``, plus the board's name."""
    from hw.synth import synthesize

    b = get_board(board)
    cfg = cfg or make_config(b.default_config)
    b.check_config(cfg)
    device = next(v for k, v in DEVICES.items() if b.part.startswith(k))
    rep = synthesize(cfg, wrapper=wrapper_verilog(cfg), top=IP_NAME, device=device)
    rep.update(board=b.name, part=b.part, hp_port=b.fam.hp_port, hp_width=cfg.bus_width)
    return rep
