"""Ultra96-V2 (Avnet): Zynq UltraScale+ xczu3eg-sbva484-1-e, 2 GB LPDDR4. The PS settings come from the Avnet
board preset when its board files are installed; an overlay needs only the PL-facing ones (the PYNQ image
configured DDR and the PS at boot)."""
from fpga.zynq_shell import Board

BOARD = Board(
    name="ultra96", family="zynqmp", part="xczu3eg-sbva484-1-e", board_part="avnet.com:ultra96v2:part0:1.2",
    default_config="ultra96", ddr_bytes=2 << 30, ps_config={},
)
