"""Errors raised when a schedule primitive cannot apply, or a schedule cannot be lowered."""


class ScheduleError(ValueError):
    """A schedule primitive was applied in a way that cannot work; the message says why."""


class LowerError(ValueError):
    """A schedule that cannot be lowered to the accelerator (the message names the stage and loop)."""


class TensorizeError(LowerError):
    """The loops under a tensorize point do not compute the intrinsic; the message names the mismatch."""
