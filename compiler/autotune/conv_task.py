"""What the llvm and cuda targets' conv tuning share: a float conv task (geometry and fused epilogue), the tasks
of a graph, a grid of knob values, a timed measurement as a tuner's result, a timed log's fastest usable record per
task, and knobs read from a record's ``config``."""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar

from compiler.autotune.measure import Result, _Measurer
from compiler.autotune.records import TuningLogWarning, fastest_per_task
from compiler.autotune.space import GridSpace
from compiler.topi.conv2d_direct import Conv2dSpec

Point = tuple[int, ...]


def warn_log(msg: str) -> None:
    warnings.warn(msg, TuningLogWarning, stacklevel=3)


@dataclass(frozen=True)
class FloatConvTask:
    """One float conv2d as a target compiles it: geometry ``spec``, its fused epilogue (``bias``, ``residual``,
    ``act`` with ``act_params``), and the node's ``name`` (not part of the identity). Subclasses give ``OP`` (the
    identity's op name), ``DROP`` (spec fields left out of the identity) and the target's knobs."""

    spec: Conv2dSpec
    bias: bool = False
    residual: bool = False
    act: str | None = None
    act_params: tuple = ()
    name: str = dataclasses.field(default="", compare=False)

    OP: ClassVar[str] = ""
    DROP: ClassVar[tuple[str, ...]] = ()

    @property
    def ident(self) -> dict:
        s = dataclasses.asdict(self.spec)
        for k in self.DROP:
            s.pop(k)
        return {"op": self.OP, "spec": s, "bias": self.bias, "residual": self.residual, "act": self.act,
                "act_params": list(self.act_params)}

    @property
    def key(self) -> str:
        return json.dumps(self.ident, sort_keys=True)

    def macs(self) -> int:
        return self.spec.macs

    def ideal(self) -> float:
        """Scale of the cost model's target (ns per 1000 MACs: layers of different sizes share one model)."""
        return self.spec.macs / 1000.0

    def rate(self, ns: int) -> float:
        """GFLOPS (2 per MAC) at ``ns`` nanoseconds."""
        return 2 * self.spec.macs / ns

    def label(self) -> str:
        """What :meth:`describe` calls the task."""
        return "conv"

    def describe(self) -> str:
        s = self.spec
        return (f"{self.name + ': ' if self.name else ''}{self.label()} {s.kh}x{s.kw}/{s.stride[0]} {s.c}->{s.o}ch "
                f"{s.h}x{s.w}{' +res' if self.residual else ''}{' ' + self.act if self.act else ''}")


def other_target(obj: dict, target: str) -> str:
    """The warning for a log line of another target than ``target``."""
    other = obj.get("target")
    return f"a record for {'the accelerator' if other is None else f'target {other!r}'}, not the {target} target"


def node_conv(node, infos) -> "tuple[Conv2dSpec, tuple] | None":
    """``(spec, (bias, residual, act, act_params))`` of a ``Conv``/``FusedConv`` graph node (``infos``: its inputs'
    TensorInfos), or None where it is not a float 2-D conv the library plans."""
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans_float import conv_spec

    if node.op not in ("Conv", "FusedConv") or len(infos) < 2 or infos[0] is None or infos[1] is None:
        return None
    try:
        spec = conv_spec(node, infos)
    except UnsupportedOnTarget:
        return None
    a = node.attrs
    return spec, (len(node.inputs) > 2 and bool(node.inputs[2]), bool(a.get("residual", False)), a.get("activation"),
                  tuple(a.get("act_params", ())))


def distinct_tasks(g, task_of_node: Callable) -> list:
    """Distinct tasks of graph ``g`` (``task_of_node(node, infos)``; None: not tuned), in graph order."""
    tasks: dict[str, object] = {}
    for n in g.nodes:
        t = task_of_node(n, [g.tensors.get(i) if i else None for i in n.inputs])
        if t is not None:
            tasks.setdefault(t.key, t)
    return list(tasks.values())


def knobs_from(conf, knob_cls):
    """``knob_cls(**conf)`` where ``conf`` names only its fields (ValueError naming the others)."""
    fields = {f.name for f in dataclasses.fields(knob_cls)}
    unknown = sorted(set(conf) - fields)
    if unknown:
        raise ValueError(f"unknown knobs {unknown}")
    return knob_cls(**conf)


def fastest_usable(tasks: list, records: list, path: str | Path, target: str, skip: frozenset = frozenset()) -> dict:
    """Task key -> knobs of its fastest usable record among ``records`` (``(task identity, knobs, ns, FILE:LINE)``
    of the log at ``path``); warns for records of unknown tasks, knobs a task's space rejects, and tasks no record
    covers; tasks whose key is in ``skip`` are left out without a warning."""
    rows = [(json.dumps(ident, sort_keys=True), knobs, ns, where, f"{ident.get('op')}: {ident.get('spec')}")
            for ident, knobs, ns, where in records]
    return fastest_per_task(tasks, rows, path, lambda t, k: t.make_space().reject(k), "the library's default schedule",
                            f"{target} ", skip)


class KnobGrid(GridSpace):
    """A product of a knob dataclass's fields (``KNOBS``; ``axes``: ``(field, values)``), the other fields
    ``fixed``. A subclass sets ``task`` and the axes (:meth:`_axes`) and says which settings to skip
    (``reject(knobs)``: why, or None)."""

    KNOBS: ClassVar[type]
    axes: list[tuple[str, list]]
    fixed: dict = {}

    def _axes(self, task, axes: list[tuple[str, list]]) -> None:
        self.task = task
        self.axes = axes
        self.dims = tuple(len(v) for _, v in axes)

    def __len__(self) -> int:
        return math.prod(self.dims)

    def knobs(self, p: Point):
        return self.KNOBS(**{name: vals[i] for (name, vals), i in zip(self.axes, p)}, **self.fixed)

    def point(self, k) -> Point | None:
        """The point of knobs ``k``, or None when they lie outside this space."""
        if any(getattr(k, name) != v for name, v in self.fixed.items()):
            return None
        try:
            return tuple(vals.index(getattr(k, name)) for name, vals in self.axes)
        except ValueError:
            return None

    def grid(self):
        return itertools.product(*(range(d) for d in self.dims))

    @staticmethod
    def knob_error(check: Callable[[], None]) -> str | None:
        """``"bad knob: <the knob's own message>"`` where ``check()`` raises (a setting the schedule refuses), else
        None: the first reason a subclass's ``reject`` gives."""
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - the knob's own message
            return f"bad knob: {exc}"
        return None

    def candidates(self) -> list[Point]:
        """Every valid point (the XGB tuner ranks them all by its model, no annealing)."""
        if not hasattr(self, "_candidates"):
            self._candidates = [p for p in self.grid() if self.reject(self.knobs(p)) is None]
        return self._candidates


def measure_task(knobs, task) -> Result:
    """Compile and time ``task`` with ``knobs`` (``task.measure_cost``): a :class:`Result` whose ``cycles`` holds the
    median nanoseconds; a failure is a result with its error, not a crash of the tuner."""
    t0 = time.perf_counter()
    try:
        ns = task.measure_cost(knobs)
    except Exception as exc:  # noqa: BLE001 - a failed candidate is a result, not a crash of the tuner
        return Result(None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    return Result(ns, None, time.perf_counter() - t0)


class InProcessMeasurer(_Measurer):
    """Time candidates through a :class:`compiler.scaleout.LoopRunner`: in this process, one after the other (the
    JIT's code lives in this process, and kernels timed side by side would share the cores or the GPU)."""

    def __init__(self) -> None:
        from compiler.scaleout import LoopRunner

        self._runner = LoopRunner()
        self.workers = 1

    def __call__(self, task, batch: list) -> list[Result]:
        return self._runner.map(measure_task, batch, (task,))
