"""PYNQ-Z2 (TUL): Zynq-7020 xc7z020clg400-1, 512 MB DDR3 (MT41K256M16 RE-125, 16 bit), 50 MHz PS clock."""
from fpga.zynq_shell import ZYNQ7_PS_BASE, Board

BOARD = Board(
    name="pynq-z2", family="zynq7", part="xc7z020clg400-1", board_part="tul.com.tw:pynq-z2:part0:1.0",
    default_config="pynq-z1", ddr_bytes=512 << 20,
    ps_config={**ZYNQ7_PS_BASE, "PCW_UIPARAM_DDR_PARTNO": "MT41K256M16 RE-125",
               "PCW_UIPARAM_DDR_BUS_WIDTH": "16 Bit", "PCW_CRYSTAL_PERIPHERAL_FREQMHZ": "50",
               "PCW_APU_PERIPHERAL_FREQMHZ": "650"},
)
