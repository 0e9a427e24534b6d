"""``Schedule``: the stages of a computation and the primitives that add stages (cache_read/cache_write)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.schedule.errors import ScheduleError
from compiler.schedule.rewrite import replace_loads
from compiler.schedule.stage import SCOPES, Stage
from compiler.te.expr import IterVar, Load
from compiler.te.tensor import ComputeOp, Tensor, compute

if TYPE_CHECKING:
    from isa.intrinsics import TensorIntrinsic


class Schedule:
    """Stages in producer-before-consumer order; ``s[tensor]`` is a tensor's stage."""

    def __init__(self, outputs: list[Tensor]) -> None:
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        seen: set[int] = set()

        def visit(t: Tensor) -> None:
            if id(t) in seen:
                return
            seen.add(id(t))
            if t.op is not None:
                for i in t.op.inputs:
                    visit(i)
            self.stages.append(Stage(t, self))

        for o in self.outputs:
            if not isinstance(o, Tensor) or o.op is None:
                raise ScheduleError(f"create_schedule: {o!r} is not a computed tensor")
            visit(o)

    def __getitem__(self, t: Tensor) -> Stage:
        for st in self.stages:
            if st.tensor is t:
                return st
        raise ScheduleError(f"tensor {getattr(t, 'name', t)!r} is not part of this schedule")

    def readers(self, t: Tensor) -> list[Stage]:
        return [st for st in self.stages if st.op is not None and t in st.op.inputs]

    def feeds(self, producer: Stage, consumer: Stage) -> bool:
        """Whether ``consumer`` reads ``producer``'s tensor, directly or through other stages."""
        todo, seen = [consumer.tensor], set()
        while todo:
            t = todo.pop()
            if t.op is None or id(t) in seen:
                continue
            seen.add(id(t))
            for i in t.op.inputs:
                if i is producer.tensor:
                    return True
                todo.append(i)
        return False

    def cache_read(self, t: Tensor, scope: str, readers: list[Tensor]) -> Tensor:
        """A copy of ``t`` in ``scope`` that ``readers`` read instead of ``t``: an accelerator scratchpad (inp, wgt,
        acc), or for the CPU/GPU targets ``local`` (stack/registers), ``shared`` (GPU shared memory), ``global``."""
        if scope not in SCOPES:
            raise ScheduleError(f"cache_read {t.name}: scope must be one of inp, wgt, acc (accelerator) or local, shared, "
                                f"global (CPU/GPU); got {scope!r}")
        readers = list(readers)
        for r in readers:
            if r.op is None or t not in r.op.inputs:
                raise ScheduleError(f"cache_read {t.name}: {r.name} does not read {t.name}")
        cache = compute(t.shape, lambda *i: t[i], name=f"{t.name}.{scope}", dtype=t.dtype,
                        axis_names=tuple(f"ax{k}" for k in range(t.ndim)))
        for r in readers:
            r.op = ComputeOp(r.op.axes, replace_loads(r.op.body, t, cache), r.op.reduce_axes)
        st = Stage(cache, self)
        st.scope = scope
        first_reader = min(self.stages.index(self[r]) for r in readers)
        self.stages.insert(first_reader, st)
        return cache

    def cache_write(self, t: Tensor, scope: str) -> Tensor:
        """Compute ``t`` into ``scope`` (the accelerator's ``acc``; ``local``/``global`` on the CPU/GPU targets);
        ``t`` becomes a copy of that cache."""
        if scope not in ("acc", "local", "global"):
            raise ScheduleError(f"cache_write {t.name}: results are computed in the acc scratchpad (accelerator) or in "
                                f"local/global memory (CPU/GPU); got scope {scope!r}")
        st = self[t]
        if st.relations or st.attach or st.pragmas or st.tensorized or st.loop_kinds:
            raise ScheduleError(f"cache_write {t.name}: apply it before splitting or annotating the stage")
        cache = Tensor(f"{t.name}.{scope}", t.shape, t.dtype, t.op)
        axes = tuple(IterVar(a.name, a.extent) for a in t.op.axes)
        t.op = ComputeOp(axes, Load(cache, axes), ())
        cst = Stage(cache, self)
        cst.scope = scope
        self.stages.insert(self.stages.index(st), cst)
        self.stages[self.stages.index(st)] = Stage(t, self)
        return cache

    def _check_tensorize(self, stage: Stage, iv: IterVar, intrinsic: "TensorIntrinsic") -> None:
        from compiler.schedule.tensorize import match_intrinsic

        match_intrinsic(stage, iv, intrinsic)


def create_schedule(outputs: Tensor | list[Tensor]) -> Schedule:
    """A default schedule (one loop per axis, everything in DRAM) for ``outputs``."""
    return Schedule(outputs if isinstance(outputs, list) else [outputs])
