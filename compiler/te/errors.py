"""Errors of the tensor expression language."""


class TeError(ValueError):
    """A tensor expression that cannot be built (bad dtype, axis, shape or index count)."""
