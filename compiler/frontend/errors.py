"""Errors raised while importing a model."""
from __future__ import annotations


class UnsupportedOperatorError(ValueError):
    """The model uses operators the compiler cannot run; ``unsupported`` maps op type -> node names."""

    def __init__(self, unsupported: dict[str, list[str]], supported: list[str]) -> None:
        self.unsupported = unsupported
        lines = [f"  {op}: used by {len(names)} node(s): {', '.join(names)}" for op, names in sorted(unsupported.items())]
        super().__init__(
            f"model uses {len(unsupported)} unsupported operator type(s):\n" + "\n".join(lines)
            + f"\nsupported operators: {', '.join(sorted(supported))}")


class ModelInputError(ValueError):
    """A user-supplied model input (name, shape or dtype) does not match the model."""


class ModelError(ValueError):
    """A model that is malformed or outside what the compiler accepts; ``problems`` lists every finding.

    Each problem names the node and operator (or the graph-level tensor), the attribute or input
    at fault and what is allowed.
    """

    def __init__(self, problems: list[str], origin: str = "model") -> None:
        self.problems = list(problems)
        head = f"{origin} is invalid ({len(self.problems)} problem(s)):"
        super().__init__(head + "".join(f"\n  {p}" for p in self.problems))


class NonFiniteInputWarning(UserWarning):
    """A model input holds NaN or Inf values: reported, not refused (ONNX operators such as Cast, IsNaN
    or Max take them); calibration data with NaN/Inf is refused instead (it would poison the ranges)."""


def non_finite_report(a, what: str) -> str | None:
    """``'<what> holds N NaN/Inf value(s) (first at index (...))'`` for a float array with any, else None."""
    import numpy as np

    if a.dtype.kind != "f" or a.size == 0 or np.isfinite(a).all():  # one pass, one temporary, in the usual case
        return None
    bad = ~np.isfinite(a)
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{what} holds {int(bad.sum())} NaN/Inf value(s) (first at index {first})"
