"""Errors raised while lowering a schedule."""


class LowerError(ValueError):
    """A schedule that cannot be lowered to the accelerator (the message names the stage and loop)."""


class TensorizeError(LowerError):
    """The loops under a tensorize point do not compute the intrinsic; the message names the mismatch."""


class AllocationError(LowerError):
    """A scratchpad buffer does not fit (names the buffer, its size and the capacity)."""
