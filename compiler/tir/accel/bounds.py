"""Bound inference: which region of each tensor a stage instance touches, for given host-loop values.

A stage's leaf loops split into *host* loops (run by the code generator, their values in
``env``) and *inner* loops (folded into DMA blocks or micro-op loops). Every root axis is an
affine form over the inner loops (``forms``); an attached stage iterates exactly the region
its readers need, so its data axes are region-relative loops. Regions are computed from the
outermost stage inward with interval arithmetic on the (affine) index expressions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.schedule.errors import LowerError
from compiler.schedule.relations import Fuse
from compiler.te.expr import IterVar, Load, loads
from compiler.te.tensor import Tensor
from compiler.tir.arith import Linear, to_affine
from compiler.tir.bounds import root_values

if TYPE_CHECKING:
    from compiler.schedule.schedule import Schedule
    from compiler.schedule.stage import Stage


def _extent(v: IterVar) -> int:
    return v.extent


class EmptyIteration(Exception):
    """A host-loop iteration past the end of a ragged split (nothing to compute)."""


@dataclass
class Nest:
    """The loop structure of one stage instance: affine root forms and inner-loop extents."""

    forms: dict[IterVar, Linear]
    extents: dict[IterVar, int]
    inner: list[IterVar]


class Bounds:
    """Region/nest queries for one lowered schedule; ``host[stage]`` lists each stage's host loops."""

    def __init__(self, sched: "Schedule", root: "Stage", host: dict, readers: dict) -> None:
        self.sched = sched
        self.root = root
        self.host = host          # stage -> list of host leaf IterVars
        self.readers = readers    # tensor -> list of reader stages inside the computation
        self._cache: dict = {}
        self._loads: dict = {}  # (reader, tensor) -> its loads of the tensor (kept by clear: they never change)

    # ------------------------------------------------------------ nests
    def nest(self, st: "Stage", env: dict) -> Nest:
        key = ("nest", id(st), self._env_key(st, env))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        res = self._nest(st, env)
        self._cache[key] = res
        return res

    def _env_key(self, st: "Stage", env: dict) -> tuple:
        return tuple(sorted((id(k), v) for k, v in env.items()))

    def _nest(self, st: "Stage", env: dict) -> Nest:
        host = self.host.get(st, [])
        attached = st is not self.root
        forms: dict[IterVar, Linear] = {}
        extents: dict[IterVar, int] = {}
        inner = [lv for lv in st.leaf_iter_vars if lv not in host]
        region = self.region(st.tensor, env) if attached and st.op is not None and not self._unattached(st) else None
        if self._unattached(st):
            region = [(0, n) for n in st.tensor.shape]
        for lv in st.leaf_iter_vars:
            if lv in host:
                if lv not in env:
                    raise LowerError(f"stage {st.name}: host loop {lv.name} has no value (internal ordering error)")
                forms[lv] = Linear(env[lv])
            else:
                forms[lv] = Linear(0, {lv: 1})
                extents[lv] = lv.extent
        def host_fuse(f: Linear, n: int, rel: Fuse) -> tuple[Linear, Linear]:
            if f.coefs:
                raise LowerError(f"stage {st.name}: fused loop {rel.fused.name} is inside a DMA/micro-op region; "
                                 f"only host loops (outside every tensorize/dma_copy point) may be fused")
            return Linear(f.const // n), Linear(f.const % n)

        forms = root_values(st.relations, forms, _extent, lambda o, f, i: o.scale(f) + i, host_fuse)
        data_axes = list(st.op.axes) if st.op is not None else []
        for k, r in enumerate(data_axes):
            if region is not None:
                lo, n = region[k]
                if forms[r].coefs.get(r) != 1 or len(forms[r].coefs) != 1:
                    raise LowerError(f"stage {st.name}: data axis {r.name} of an attached stage cannot be split or "
                                     f"fused; it iterates the region its readers need. Split the reader's loops instead")
                forms[r] = Linear(lo, {r: 1})
                extents[r] = n
        # clip ragged inner loops to the axis extent
        for r in st.root_axes:
            if region is not None and r in data_axes:
                continue
            f = forms[r]
            lo, hi = f.bounds(extents)
            if lo < 0 or hi >= r.extent:
                if hi >= r.extent and len(f.coefs) == 1:
                    (v, c), = f.coefs.items()
                    if c == 1:
                        extents[v] = r.extent - f.const
                        if extents[v] <= 0:
                            raise EmptyIteration(st.name)
                        continue
                if not f.coefs and f.const >= r.extent:
                    raise EmptyIteration(st.name)
                raise LowerError(f"stage {st.name}: axis {r.name} ranges over [{lo}, {hi}] outside 0..{r.extent - 1}; "
                                 f"a split factor inside a DMA/micro-op region must divide the extent")
        return Nest(forms, extents, inner)

    def _unattached(self, st: "Stage") -> bool:
        return st is not self.root and st.attach is None and st.scope != "global"

    # ----------------------------------------------------------- regions
    def region(self, t: Tensor, env: dict) -> list[tuple[int, int]]:
        """``[(lo, extent)]`` per dimension of ``t`` that its readers touch in this host iteration."""
        key = ("region", id(t), tuple(sorted((id(k), v) for k, v in env.items())))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        st = self.sched[t] if t.op is not None else None
        if st is not None and self._unattached(st):
            res = [(0, n) for n in t.shape]
            self._cache[key] = res
            return res
        lo = [None] * t.ndim
        hi = [None] * t.ndim
        rdrs = self.readers.get(t, [])
        if not rdrs:
            raise LowerError(f"tensor {t.name} has no reader inside the lowered computation")
        for rd in rdrs:
            nest = self.nest(rd, env)
            for ld in self._loads_of(rd, t):
                for d, idx in enumerate(ld.indices):
                    a, b = to_affine(idx, nest.forms).bounds(nest.extents)
                    lo[d] = a if lo[d] is None else min(lo[d], a)
                    hi[d] = b if hi[d] is None else max(hi[d], b)
        res = [(int(a), int(b - a + 1)) for a, b in zip(lo, hi)]
        if st is not None and st.scope in ("inp", "wgt", "acc"):  # a scratchpad row is held whole (a vector
            res[-2:] = [(0, n) for n in t.shape[-2:]]            # operand may read only some of its pieces)
        self._cache[key] = res
        return res

    def _loads_of(self, rd: "Stage", t: Tensor) -> list[Load]:
        """The loads of ``t`` in reader ``rd``'s body (the same in every host iteration: walked once)."""
        key = ("loads", id(rd), id(t))
        hit = self._loads.get(key)
        if hit is None:
            hit = self._loads[key] = [ld for ld in loads(rd.op.body) if ld.tensor is t]
        return hit

    def clear(self) -> None:
        self._cache.clear()
