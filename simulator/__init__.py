"""Cycle-accurate simulator of the VTA-style core: fetch, load, compute, store, one DRAM port.

``Simulator(cfg).run(dram, insn_addr, n_insns)`` executes a program from a DRAM image
(modified in place) and returns a :class:`SimResult` (cycles per docs/timing.md, profile,
events, Perfetto trace, timeline plot).
"""
from simulator.core import Simulator
from simulator.errors import (BudgetError, DecodeError, DeadlockError, DepsError, HazardError, InvalidInstructionError,
                              MisalignedError,
                              OutOfRangeError, SimulatorError, StreamError, TokenOverflowError)
from simulator.result import Event, SimResult

__all__ = ["Simulator", "SimResult", "Event", "SimulatorError", "BudgetError", "DeadlockError", "DecodeError", "DepsError",
           "HazardError",
           "InvalidInstructionError", "MisalignedError", "OutOfRangeError", "StreamError", "TokenOverflowError"]
