"""Tuning tasks: one accelerator conv2d (dense is a 1x1 conv) per distinct shape and epilogue structure.

A task carries what a measurement needs (hardware config, packed shape, a bias and a requant of the
model's structure) and a canonical JSON identity (:attr:`Task.ident`) that tuning records are matched by.
Tasks of a network are read from its compiled graph without running it (:func:`extract_tasks`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from jit_runtime.host_ops.requant import Requant
from compiler.topi.conv2d import ConvShape, conv2d_compute, conv2d_epilogue
from isa import HwConfig


def config_hash(cfg: HwConfig) -> str:
    """Short hash of every hardware parameter: records are only valid for the config they were measured on."""
    return hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


def epilogue_key(bias, rq: Requant | None) -> list:
    """The epilogue's structure (what decides its ALU stages), as JSON-ready values; see the sim backend's cache."""
    from compiler.backend.accel.backend import _rq_key

    def j(v):
        return [j(x) for x in v] if isinstance(v, tuple) else v
    return j(_rq_key(bias, rq))


@dataclass(frozen=True, eq=False)
class Task:
    """One tunable kernel: ``cfg``, packed conv ``shape``, and a ``bias``/``requant`` of the model's structure."""

    cfg: HwConfig
    shape: ConvShape
    bias: Any = None
    requant: Requant | None = None
    name: str = ""

    @property
    def ident(self) -> dict:
        """JSON identity: operator, shape and epilogue structure (the hardware config is checked separately)."""
        return {"op": "conv2d", "shape": dataclasses.asdict(self.shape), "epilogue": epilogue_key(self.bias, self.requant)}

    @property
    def key(self) -> str:
        return json.dumps(self.ident, sort_keys=True)

    def epilogue_size(self) -> tuple[int, int]:
        """(constant tensors, ALU stages) of the epilogue, read from the operator library."""
        ep = conv2d_epilogue(self.cfg, self.shape, conv2d_compute(self.cfg, self.shape)[3], self.bias, self.requant)
        return len(ep.consts), len(ep.stages)

    def macs(self) -> int:
        return self.shape.macs(self.cfg)

    def describe(self) -> str:
        s = self.shape
        kind = "dense" if (s.h, s.kh, s.kw) == (1, 1, 1) else f"conv {s.kh}x{s.kw}/{s.stride[0]}"
        return (f"{self.name + ': ' if self.name else ''}{kind} {s.icb * self.cfg.block_in}->"
                f"{s.ocb * self.cfg.block_out}ch x{s.groups}g {s.h}x{s.w}")


def shape_from_ident(ident: dict) -> ConvShape:
    """The ConvShape of a record's task identity (raises KeyError/TypeError/ValueError when malformed)."""
    d = dict(ident["shape"])
    d["stride"], d["padding"] = tuple(d["stride"]), tuple(d["padding"])
    cs = ConvShape(**d)
    cs.check()
    return cs


def extract_tasks(compiled, backend) -> list[Task]:
    """Distinct accelerator tasks of a compiled graph (``compiler.executor.pipeline.CompiledGraph``), in graph order.

    ``backend`` must offer ``conv2d_problem`` (the sim backend): it turns a node's packed operands into the
    kernel's shape (a large batch: its first batch tile's, the program the node compiles) and padded bias/requant
    exactly as running the node would.
    """
    g = compiled.graph
    tasks: dict[str, Task] = {}
    for n in g.nodes:
        if n.op not in ("AccelConv2D", "AccelDense"):
            continue
        x_shape = g.tensors[n.inputs[0]].shape
        w = g.constants.get(n.inputs[1])
        if w is None:
            raise ValueError(f"node {n.name}: its weight {n.inputs[1]!r} is not a constant; tasks need constant weights")
        bias = g.constants.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        a = n.attrs
        x = np.broadcast_to(np.int8(0), x_shape)
        on_dwmac = getattr(backend, "depthwise_on_dwmac", None)
        if n.op == "AccelConv2D" and on_dwmac is not None and on_dwmac(x, w, int(a.get("group", 1))):
            continue  # depthwise on the dwmac intrinsic: its own tiling (compiler.topi.depthwise), no GEMM knobs
        if n.op == "AccelConv2D":
            args = dict(stride=tuple(a["strides"]), padding=tuple(a["pads"]), groups=int(a.get("group", 1)),
                        requant=a["requant"], pad_value=int(a.get("pad_value", 0)))
            if callable(getattr(backend, "batch_tile", None)):  # a large batch compiles one batch tile's program
                x = x[:backend.batch_tile(x, w, bias, **args)]
            cs, b, rq, _ = backend.conv2d_problem(x, w, bias, **args)
        else:
            cs, b, rq, _ = backend.dense_problem(x, w, bias, requant=a["requant"])
        t = Task(backend.config, cs, b, rq, n.name)
        tasks.setdefault(t.key, t)
    return list(tasks.values())
