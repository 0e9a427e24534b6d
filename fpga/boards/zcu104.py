"""ZCU104 (AMD evaluation kit, PYNQ-supported): Zynq UltraScale+ xczu7ev-ffvc1156-2-e, 2 GB DDR4 on the PS.
Its board files ship with Vivado, so the PS preset is applied out of the box."""
from fpga.zynq_shell import Board

BOARD = Board(
    name="zcu104", family="zynqmp", part="xczu7ev-ffvc1156-2-e", board_part="xilinx.com:zcu104:part0:1.1",
    default_config="ultra96", ddr_bytes=2 << 30, ps_config={},
)
