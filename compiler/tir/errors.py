"""Errors of the loop-IR lowering."""


class TirError(ValueError):
    """A schedule the CPU/GPU lowering cannot turn into loops (the message says what to change)."""
