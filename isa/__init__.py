"""The ISA: hardware config and presets, instructions, encodings, ALU ops, tensor intrinsics, timing.

The single source of truth that the simulator, runtime, RTL and compiler all derive from.
"""
from isa.alu import AluDecl, AluOp, alu_op, alu_ops, evaluate as alu_evaluate, register_alu_decl, register_alu_op
from isa.asm import assemble, disassemble
from isa.config import HwConfig, make_config, preset_names
from isa.encoding import (decode, decode_stream, decode_uop, encode, encode_stream, encode_uop, encode_uops,
                          layouts)
from isa.errors import AsmError, ConfigError, EncodingError
from isa.declare import register_intrinsic, unregister_intrinsic
from isa.intrinsics import IntrinsicDecl, InsnField, OperandDecl, Timing
from isa.instructions import (Alu, Deps, Finish, Gemm, Instruction, Load, MemType, Opcode, Store, Unit, Uop,
                              unit_of, with_deps)

__all__ = [
    "AluDecl", "AluOp", "register_alu_decl", "alu_op", "alu_ops", "alu_evaluate", "register_alu_op", "assemble", "disassemble", "HwConfig",
    "make_config", "preset_names", "decode", "decode_stream", "decode_uop", "encode", "encode_stream",
    "encode_uop", "encode_uops", "layouts", "AsmError", "ConfigError", "EncodingError", "Alu", "Deps", "Finish",
    "Gemm", "Instruction", "Load", "MemType", "Opcode", "Store", "Unit", "Uop", "unit_of", "with_deps",
    "IntrinsicDecl", "InsnField", "OperandDecl", "Timing", "register_intrinsic", "unregister_intrinsic",
]
