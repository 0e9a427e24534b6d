"""Hypothesis strategies for valid instructions of a given config."""
from hypothesis import strategies as st

import isa
from isa import Alu, Deps, Finish, Gemm, Load, MemType, Store, Uop


def _u(bits):
    return st.integers(0, (1 << bits) - 1)


deps = st.builds(Deps, st.booleans(), st.booleans(), st.booleans(), st.booleans())


def mem_insn(cfg, cls):
    return st.builds(cls, st.sampled_from(list(MemType)), _u(cfg.sram_idx_bits), _u(32), _u(16), _u(16), _u(16),
                     _u(4), _u(4), _u(4), _u(4), deps)


def gemm(cfg):
    return st.builds(Gemm, st.booleans(), _u(cfg.uop_idx_bits), _u(cfg.uop_idx_bits + 1), _u(14), _u(14),
                     _u(cfg.acc_idx_bits), _u(cfg.acc_idx_bits), _u(cfg.inp_idx_bits), _u(cfg.inp_idx_bits),
                     _u(cfg.wgt_idx_bits), _u(cfg.wgt_idx_bits), deps, st.booleans())


def alu(cfg):
    return st.builds(Alu, st.sampled_from([o.name for o in isa.alu_ops()]), st.booleans(), _u(cfg.uop_idx_bits),
                     _u(cfg.uop_idx_bits + 1), _u(14), _u(14), _u(cfg.acc_idx_bits), _u(cfg.acc_idx_bits),
                     _u(cfg.acc_idx_bits), _u(cfg.acc_idx_bits), st.booleans(), st.integers(-(1 << 15), (1 << 15) - 1),
                     deps)


def instruction(cfg):
    return st.one_of(mem_insn(cfg, Load), mem_insn(cfg, Store), gemm(cfg), alu(cfg), st.builds(Finish, deps))


def uop(cfg):
    return st.builds(Uop, _u(cfg.uop_dst_bits), _u(cfg.uop_src_bits), _u(cfg.uop_wgt_bits))
