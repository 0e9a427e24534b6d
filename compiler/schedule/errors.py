"""Errors raised when a schedule primitive cannot apply."""


class ScheduleError(ValueError):
    """A schedule primitive was applied in a way that cannot work; the message says why."""
