"""The plan of one library kernel for one graph node (:class:`OpPlan`), the error for nodes the library lacks,
and the argument helpers the planners share."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from compiler.graph.ir import Node, TensorInfo
from compiler.schedule import Schedule
from compiler.te import Tensor


class UnsupportedOnTarget(ValueError):
    """A node that the operator library cannot compute for a CPU/GPU target."""


@dataclass
class OpPlan:
    """``key`` identifies the compiled kernel; ``make()`` returns (placeholders, output, schedule function);
    ``args(inputs)`` maps the node's input arrays to the kernel's; the node's output shape and dtype."""

    key: tuple
    make: Callable[[], tuple[list[Tensor], Tensor, Callable[[Schedule], None]]]
    args: Callable[[Sequence[np.ndarray | None]], list[np.ndarray]]
    out_shape: tuple[int, ...] = ()
    out_dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))
    macs: int = 0


def f32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def const_input(consts: dict, name: str, what: str, node: Node) -> np.ndarray:
    """The constant value of input ``name`` (``what`` names it in the error when it is not a constant)."""
    if name not in consts:
        raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): the {what} must be a constant initializer")
    return np.asarray(consts[name])


def check_f32(node: Node, infos: list[TensorInfo | None]) -> None:
    for i, t in enumerate(infos[:1]):
        if t is not None and t.dtype != np.float32:
            raise UnsupportedOnTarget(f"node {node.name!r} ({node.op}): input {i} is {t.dtype}; this target's "
                                      f"{node.op} takes float32 (int8 models run as QDQ, lowered to integer layers)")
