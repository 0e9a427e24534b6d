"""What the llvm and cuda targets' GEMM tuning tasks share: one float product ``a`` (..., M, K) times ``b``
(..., K, N), batch axes broadcast, with its fused bias and activation; its identity, sizes, seeded inputs and name
in progress lines."""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.topi.elementwise import broadcast_shape
from compiler.topi.gemm import product_dims

GEMM_OPS = ("Gemm", "FusedDense", "MatMul")  # the graph ops a product task comes from


@dataclass(frozen=True)
class FloatProductTask:
    """One float product as a target compiles it: operand shapes ``a`` and ``b``, a ``bias`` (N,) and ``act`` with
    ``act_params``; ``name``: the node's (not part of the identity). Subclasses give ``OP`` (the identity's op
    name), ``LABEL`` (what :meth:`describe` calls it) and the target's knobs."""

    a: tuple[int, ...]
    b: tuple[int, ...]
    bias: bool = False
    act: str | None = None
    act_params: tuple = ()
    name: str = dataclasses.field(default="", compare=False)

    OP: ClassVar[str] = ""
    LABEL: ClassVar[str] = "gemm"
    TARGET: ClassVar[str] = ""  # the target whose plans the tasks are read from
    PLAN: ClassVar[str] = ""    # the first field of the plan key of a product that target runs as this GEMM

    @classmethod
    def of_node(cls, node, infos, consts) -> "FloatProductTask | None":
        """The task of a product node (``Gemm``/``FusedDense``/``MatMul``; ``infos``: its inputs' TensorInfos;
        ``consts``: the graph's constants) that ``TARGET`` compiles to this GEMM, read from its plan (the operands'
        shapes and epilogue: the plan key's fields 1-3), or None."""
        from compiler.backend.plans.oplan import UnsupportedOnTarget
        from compiler.backend.plans.plans import PLANNERS

        if node.op not in GEMM_OPS or len(infos) < 2 or infos[0] is None:
            return None
        try:
            plan = PLANNERS[node.op](node, infos, consts, cls.TARGET)
        except (UnsupportedOnTarget, ValueError, TypeError, KeyError):
            return None
        if plan.key[0] != cls.PLAN:
            return None
        sa, sb, epilogue = plan.key[1:4]
        epi = dict(epilogue)
        return cls(tuple(sa), tuple(sb), bool(epi.get("bias", False)), epi.get("act"),
                   tuple(epi.get("act_params", ())), node.name)

    def __post_init__(self) -> None:
        product_dims(tuple(self.a), tuple(self.b), f"{self.LABEL} task")  # a TeError naming the bad shapes

    @property
    def ident(self) -> dict:
        return {"op": self.OP, "a": list(self.a), "b": list(self.b), "bias": self.bias, "act": self.act,
                "act_params": list(self.act_params)}

    @property
    def key(self) -> str:
        return json.dumps(self.ident, sort_keys=True)

    def dims(self) -> tuple[int, int, int, int]:
        """``(m, k, n, batch)``: rows, reduction, columns and the number of products."""
        m, k, n, batch = product_dims(tuple(self.a), tuple(self.b))
        return m, k, n, math.prod(batch)

    def macs(self) -> int:
        m, k, n, batch = self.dims()
        return batch * m * k * n

    def ideal(self) -> float:
        """Scale of the cost model's target (ns per 1000 MACs: products of different sizes share one model)."""
        return self.macs() / 1000.0

    def rate(self, ns: int) -> float:
        """GFLOPS (2 per MAC) at ``ns`` nanoseconds."""
        return 2 * self.macs() / ns

    def describe(self) -> str:
        return (f"{self.name + ': ' if self.name else ''}{self.LABEL} {'x'.join(map(str, self.a))} @ "
                f"{'x'.join(map(str, self.b))}{' +bias' if self.bias else ''}{' ' + self.act if self.act else ''}")

    def out_shape(self) -> tuple[int, ...]:
        return broadcast_shape(tuple(self.a[:-2]), tuple(self.b[:-2])) + (self.a[-2], self.b[-1])

    def inputs(self, knobs=None, seed: int = 0) -> list[np.ndarray]:
        """Seeded random arguments (the kernels pack ``b`` themselves, so they do not depend on ``knobs``)."""
        rng = np.random.default_rng(seed)
        out = [rng.standard_normal(self.a).astype(np.float32), rng.standard_normal(self.b).astype(np.float32)]
        if self.bias:
            out.append(rng.standard_normal(self.b[-1]).astype(np.float32))
        return out
