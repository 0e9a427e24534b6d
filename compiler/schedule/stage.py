"""A stage: the loop nest that computes one tensor, and the primitives that reshape it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.schedule.errors import ScheduleError
from compiler.schedule.relations import Fuse, Split
from compiler.te.expr import IterVar
from compiler.te.tensor import Tensor

if TYPE_CHECKING:
    from isa.intrinsics import TensorIntrinsic

SCOPES = ("global", "inp", "wgt", "acc", "local", "shared")  # local/shared: CPU/GPU targets (registers/stack, GPU shared)
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")
PRAGMAS = ("dma_copy", "alu", "alu_deferred")  # alu_deferred: ALU micro-ops in their own virtual-thread segment


class Stage:
    """Loops of one tensor: root axes (data then reduce), leaf order, attachment, scope and annotations."""

    def __init__(self, tensor: Tensor, schedule) -> None:
        self.tensor = tensor
        self.schedule = schedule
        self.scope = "global"
        self.relations: list = []
        op = tensor.op
        self.root_axes: list[IterVar] = list(op.axes) + list(op.reduce_axes) if op is not None else []
        self.leaf_iter_vars: list[IterVar] = list(self.root_axes)
        self.attach: tuple[Stage, IterVar] | None = None
        self.tensorized: tuple[IterVar, TensorIntrinsic] | None = None
        self.pragmas: dict[IterVar, str] = {}
        self.vthread: IterVar | None = None
        self.inlined = False
        self.loop_kinds: dict[IterVar, str] = {}  # CPU/GPU targets: vectorize/parallel/unroll or a GPU thread tag

    # ------------------------------------------------------------ helpers
    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def op(self):
        return self.tensor.op

    def _leaf(self, iv: IterVar, prim: str) -> int:
        if not isinstance(iv, IterVar):
            raise ScheduleError(f"{prim} on stage {self.name}: {iv!r} is not a loop axis")
        for k, v in enumerate(self.leaf_iter_vars):
            if v is iv:
                return k
        names = ", ".join(v.name for v in self.leaf_iter_vars)
        raise ScheduleError(f"{prim} on stage {self.name}: loop {iv.name!r} is not one of its current loops ({names}); "
                            f"it was already split/fused away or belongs to another stage")

    def __getitem__(self, name: str) -> IterVar:
        """The current loop called ``name``."""
        for v in self.leaf_iter_vars:
            if v.name == name:
                return v
        raise ScheduleError(f"stage {self.name} has no loop {name!r}; loops: {[v.name for v in self.leaf_iter_vars]}")

    @property
    def axis(self) -> list[IterVar]:
        return [a for a in self.root_axes if a.kind == "data"]

    @property
    def reduce_axis(self) -> list[IterVar]:
        return [a for a in self.root_axes if a.kind == "reduce"]

    # --------------------------------------------------------- primitives
    def split(self, iv: IterVar, factor: int | None = None, nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """Split ``iv`` into (outer, inner) with ``inner.extent == factor`` (or ``outer.extent == nparts``)."""
        k = self._leaf(iv, "split")
        if iv in self.loop_kinds:
            raise ScheduleError(f"split {iv.name}: it is already marked {self.loop_kinds[iv]!r}; split first, then "
                                f"annotate the part you mean")
        if self.vthread is iv:
            raise ScheduleError(f"split {iv.name}: it is bound to virtual threads; split before binding")
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split {iv.name}: give exactly one of factor= or nparts=")
        if nparts is not None:
            if not isinstance(nparts, int) or nparts <= 0:
                raise ScheduleError(f"split {iv.name}: nparts must be a positive int, got {nparts!r}")
            factor = -(-iv.extent // nparts)
        if not isinstance(factor, int) or factor <= 0:
            raise ScheduleError(f"split {iv.name}: factor must be a positive int, got {factor!r}")
        if factor > iv.extent:
            raise ScheduleError(f"split {iv.name}: factor {factor} exceeds the loop extent {iv.extent}")
        outer = IterVar(f"{iv.name}.outer", -(-iv.extent // factor), iv.kind)
        inner = IterVar(f"{iv.name}.inner", factor, iv.kind)
        self.relations.append(Split(iv, outer, inner, factor))
        self.leaf_iter_vars[k:k + 1] = [outer, inner]
        self._move_annotations(iv, outer, inner)
        return outer, inner

    def tile(self, x: IterVar, y: IterVar, x_factor: int, y_factor: int) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split ``x`` and ``y`` and order them ``x.outer, y.outer, x.inner, y.inner``."""
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, outer: IterVar, inner: IterVar) -> IterVar:
        """Fuse two adjacent loops (``outer`` directly outside ``inner``) into one."""
        ko, ki = self._leaf(outer, "fuse"), self._leaf(inner, "fuse")
        for iv in (outer, inner):
            if iv in self.loop_kinds:
                raise ScheduleError(f"fuse on stage {self.name}: {iv.name} is already marked {self.loop_kinds[iv]!r}; "
                                    f"fuse first, then annotate the fused loop")
        if ki != ko + 1:
            raise ScheduleError(f"fuse on stage {self.name}: {outer.name!r} must be directly outside {inner.name!r} "
                                f"(positions {ko} and {ki}); reorder them first")
        if outer.kind != inner.kind:
            raise ScheduleError(f"fuse on stage {self.name}: cannot fuse data loop with reduce loop "
                                f"({outer.name} is {outer.kind}, {inner.name} is {inner.kind})")
        fused = IterVar(f"{outer.name}.{inner.name}.fused", outer.extent * inner.extent, outer.kind)
        self.relations.append(Fuse(outer, inner, fused))
        self.leaf_iter_vars[ko:ki + 1] = [fused]
        return fused

    def reorder(self, *ivs: IterVar) -> None:
        """Put the given loops in this order (in the positions they occupy together)."""
        pos = [self._leaf(iv, "reorder") for iv in ivs]
        if len(set(pos)) != len(pos):
            raise ScheduleError(f"reorder on stage {self.name}: a loop is listed twice ({[v.name for v in ivs]})")
        slots = sorted(pos)
        for slot, iv in zip(slots, ivs):
            self.leaf_iter_vars[slot] = iv
        if self.tensorized is not None:
            self.schedule._check_tensorize(self, *self.tensorized)

    def compute_at(self, parent: "Stage", iv: IterVar) -> None:
        """Compute this stage inside ``parent``'s loop ``iv`` (only the region that iteration needs)."""
        parent._leaf(iv, "compute_at")
        if parent is self:
            raise ScheduleError(f"compute_at: stage {self.name} cannot be attached to itself")
        if not self.schedule.feeds(self, parent):
            raise ScheduleError(f"compute_at: {self.name} is not read (directly or indirectly) by {parent.name}, "
                                f"so it cannot be computed inside {parent.name}'s loop {iv.name}")
        if parent.attach is not None and parent.attach[0] is self:
            raise ScheduleError(f"compute_at: {parent.name} is already attached inside {self.name} (cycle)")
        self.attach = (parent, iv)

    def set_scope(self, scope: str) -> None:
        """Keep this tensor in scratchpad ``scope`` (inp, wgt, acc) instead of DRAM."""
        if scope not in SCOPES:
            raise ScheduleError(f"set_scope {self.name}: unknown scope {scope!r}; scopes: {SCOPES}")
        if self.op is None and scope != "global":
            raise ScheduleError(f"set_scope {self.name}: a placeholder lives in DRAM; use cache_read to copy it into {scope}")
        self.scope = scope

    def compute_inline(self) -> None:
        """Substitute this (elementwise, non-reduce) stage into its consumers."""
        if self.op is None or self.op.reduce_axes:
            raise ScheduleError(f"compute_inline {self.name}: only elementwise computes can be inlined")
        self.inlined = True

    def tensorize(self, iv: IterVar, intrinsic: "TensorIntrinsic") -> None:
        """Replace the loops from ``iv`` inward by ``intrinsic``; fails now if they do not compute it."""
        self._leaf(iv, "tensorize")
        self.schedule._check_tensorize(self, iv, intrinsic)
        self.tensorized = (iv, intrinsic)

    def pragma(self, iv: IterVar, name: str) -> None:
        """Annotate loop ``iv``: ``dma_copy`` (the loops from here inward become DMA) or ``alu`` (ALU micro-ops;
        ``alu_deferred``: the same, in a virtual-thread segment of their own, not the preceding GEMM's)."""
        self._leaf(iv, "pragma")
        if name not in PRAGMAS:
            raise ScheduleError(f"pragma on {self.name}.{iv.name}: unknown pragma {name!r}; known: {PRAGMAS}")
        if name.startswith("alu") and self.scope != "acc":
            raise ScheduleError(f"pragma alu on {self.name}: ALU epilogues run on the acc scratchpad; "
                                f"set_scope('acc') first (scope is {self.scope!r})")
        self.pragmas[iv] = name

    def bind_vthread(self, iv: IterVar) -> None:
        """Run the iterations of loop ``iv`` as interleaved virtual threads (one buffer copy each)."""
        self._leaf(iv, "vthread")
        if self.attach is not None:
            raise ScheduleError(f"vthread on {self.name}: bind virtual threads on the outermost (root) stage")
        if iv.kind != "data":
            raise ScheduleError(f"vthread on {self.name}: {iv.name} is a reduce loop; threads must write disjoint outputs")
        if iv.extent > 8:
            raise ScheduleError(f"vthread on {self.name}.{iv.name}: {iv.extent} threads; use 2-4 (each copies every buffer)")
        if self.vthread is not None:
            raise ScheduleError(f"vthread on {self.name}: {self.vthread.name} is already bound")
        self.vthread = iv

    def _annotate(self, iv: IterVar, kind: str, prim: str) -> None:
        self._leaf(iv, prim)
        old = self.loop_kinds.get(iv)
        if old is not None and old != kind:
            raise ScheduleError(f"{prim} on {self.name}.{iv.name}: the loop is already marked {old!r}")
        self.loop_kinds[iv] = kind

    def vectorize(self, iv: IterVar) -> None:
        """CPU/GPU targets: run the innermost loop ``iv`` as one SIMD vector of ``iv.extent`` lanes."""
        if iv.kind != "data":
            raise ScheduleError(f"vectorize on {self.name}: {iv.name} is a reduce loop (its lanes would write the same "
                                f"element); vectorize a data loop placed innermost")
        self._annotate(iv, "vectorize", "vectorize")

    def parallel(self, iv: IterVar) -> None:
        """CPU target: spread the iterations of ``iv`` over the runtime's thread pool."""
        if iv.kind != "data":
            raise ScheduleError(f"parallel on {self.name}: {iv.name} is a reduce loop; parallel iterations must "
                                f"write disjoint outputs")
        self._annotate(iv, "parallel", "parallel")

    def unroll(self, iv: IterVar) -> None:
        """CPU/GPU targets: replicate the body of ``iv`` once per iteration (no loop left)."""
        self._annotate(iv, "unroll", "unroll")

    def bind(self, iv: IterVar, thread: str) -> None:
        """GPU target: run loop ``iv`` as the CUDA grid/block index ``thread`` (e.g. ``blockIdx.x``, ``threadIdx.x``)."""
        if thread not in THREAD_TAGS:
            raise ScheduleError(f"bind {self.name}.{iv.name}: unknown thread tag {thread!r}; tags: {THREAD_TAGS}")
        if iv.kind != "data":
            raise ScheduleError(f"bind on {self.name}: {iv.name} is a reduce loop; GPU threads must write disjoint outputs")
        self._annotate(iv, thread, "bind")

    def _move_annotations(self, old: IterVar, outer: IterVar, inner: IterVar) -> None:
        """After splitting ``old``: pragmas move to the outer part, attachments to the inner part."""
        if old in self.pragmas:
            self.pragmas[outer] = self.pragmas.pop(old)
        for st in self.schedule.stages:
            if st.attach is not None and st.attach[0] is self and st.attach[1] is old:
                st.attach = (self, inner)

    def __repr__(self) -> str:
        return f"Stage({self.name}, scope={self.scope}, loops=[{', '.join(v.name for v in self.leaf_iter_vars)}])"
