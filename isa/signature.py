"""The config signature: a 32-bit fingerprint of everything a compiled program depends on in the hardware.

The RTL exposes it in register ``SIGNATURE`` (:mod:`isa.registers`); a host driver compares it with
the signature of its own config and refuses to run programs built for a different accelerator.
It covers the config's hardware fields (not ``name``, ``clock_mhz``, ``dram_latency`` or
``fpga_part``, which change neither the encodings nor the datapath), every instruction/micro-op
field layout and the ALU operation registry.
"""
from __future__ import annotations

import json
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isa.config import HwConfig

#: Config fields that change nothing a program or the datapath depends on.
NEUTRAL_FIELDS = ("name", "clock_mhz", "dram_latency", "fpga_part")


def signature_text(cfg: "HwConfig") -> str:
    """The canonical text the signature is the CRC-32 of (useful to see *why* two signatures differ)."""
    from isa.alu import alu_ops
    from isa.encoding import layouts

    fields = {k: v for k, v in cfg.to_dict().items() if k not in NEUTRAL_FIELDS}
    lay = {name: [(f.name, f.lo, f.width, f.signed) for f in layout.fields] for name, layout in layouts(cfg).items()}
    ops = sorted((op.opcode, op.name) for op in alu_ops())
    return json.dumps({"config": fields, "layouts": lay, "alu": ops}, sort_keys=True)


def config_signature(cfg: "HwConfig") -> int:
    """32-bit signature of ``cfg`` (never 0, so an unprogrammed or absent register never matches)."""
    return zlib.crc32(signature_text(cfg).encode()) or 1
