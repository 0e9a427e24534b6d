"""Errors raised while lowering a schedule (``LowerError`` and ``TensorizeError`` live with the tensorize matcher
in :mod:`compiler.schedule.errors`)."""
from compiler.schedule.errors import LowerError, TensorizeError  # noqa: F401  (re-exported)


class AllocationError(LowerError):
    """A scratchpad buffer does not fit (names the buffer, its size and the capacity)."""
