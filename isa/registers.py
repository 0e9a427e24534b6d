"""The accelerator's AXI4-Lite register map: the contract between the RTL register file and host drivers.

| offset | register | access |
|---|---|---|
| 0x00 | CTRL: write bit 0 = start; read bit 0 = running, bit 1 = done | R/W |
| 0x04 | INSN_ADDR (byte address of the first instruction) | R/W |
| 0x08 | INSN_COUNT | R/W |
| 0x0C | CYCLES: the cycle count ``T`` of the last finished run | R |
| 0x10 | CYCLES_NOW: the running cycle counter | R |
| 0x14 | SIGNATURE: :func:`isa.signature.config_signature` of the config the design was built for | R |
"""
from __future__ import annotations

CTRL, INSN_ADDR, INSN_COUNT, CYCLES, CYCLES_NOW, SIGNATURE = 0x00, 0x04, 0x08, 0x0C, 0x10, 0x14
#: Width of the AXI4-Lite address: the register file decodes ``2**ADDR_BITS`` bytes.
ADDR_BITS = 8
#: Name -> offset, for reports and address-map checks.
REGISTERS = {"CTRL": CTRL, "INSN_ADDR": INSN_ADDR, "INSN_COUNT": INSN_COUNT, "CYCLES": CYCLES,
             "CYCLES_NOW": CYCLES_NOW, "SIGNATURE": SIGNATURE}
#: CTRL read bits.
CTRL_RUNNING, CTRL_DONE = 0x1, 0x2
#: Bytes of address space the register file needs (a bus segment must be at least this large).
REG_SPAN = 1 << ADDR_BITS
#: Module name of the accelerator as a Vivado module reference (the ``type`` pynq reports for it).
IP_NAME = "vta_accel"
