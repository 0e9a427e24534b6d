"""Exceptions raised by the simulator; all derive from :class:`SimulatorError` (a ``ValueError``)."""
from __future__ import annotations


class SimulatorError(ValueError):
    """A program the hardware cannot run; the message says what, where (instruction index) and the allowed range."""


class DecodeError(SimulatorError):
    """An instruction word that does not decode (wraps :class:`isa.EncodingError`)."""


class StreamError(SimulatorError):
    """A malformed stream: no FINISH, instructions after FINISH, misplaced or out-of-range instruction stream."""


class InvalidInstructionError(SimulatorError):
    """An instruction the units do not accept (STORE from non-OUT, LOAD into OUT, pads on a STORE, ...)."""


class DepsError(SimulatorError):
    """A pop or push on a dependency-token queue the executing unit does not have."""


class OutOfRangeError(SimulatorError):
    """A scratchpad, micro-op or DRAM index outside its memory."""


class MisalignedError(SimulatorError):
    """A DMA row of sub-beat elements that does not start on a bus-beat boundary."""


class TokenOverflowError(SimulatorError):
    """A push onto a dependency-token queue that already holds ``dep_queue_depth`` tokens."""


class DeadlockError(SimulatorError):
    """Some unit waits for a token (or queue space) that will never arrive."""


class BudgetError(SimulatorError):
    """A program that needs more cycles than the simulator's budget (``Simulator(max_cycles=...)``)."""


class HazardError(InvalidInstructionError):
    """An ALU micro-op that reads an accumulator row an earlier micro-op of its instruction is still writing
    (within the pipeline's in-flight window, docs/timing.md *Pipeline and hazards*)."""
