"""``TargetCpuBackend``: the one CPU backend for host ops, on operator-library kernels compiled for "llvm" or "cuda".

Two ways to get its kernels:

* :meth:`prepare` plans (and compiles) every CPU node of a graph at build time from the graph's static shapes:
  whole models on a target (``build(model, target="llvm" | "cuda")``). A target that cannot run here (cuda
  without a GPU) still compiles everything, and unsupported nodes are reported before anything runs.
* ``lazy=True``: a node that was not prepared is planned on first use from its input arrays (whose values are
  the node's constants) and run on the numpy reference kernels when the library lacks its op or shape: the host
  ops of an accelerator model (``build(..., cpu="llvm")``). :data:`LAZY_OPS` are the ops it compiles so;
  GlobalAveragePool is the hand-written llvmlite kernel in numpy's pairwise summation order
  (:mod:`compiler.backend.llvm.pool`: a TE reduction sums in another order, so it would not be bit-exact).

Metadata reshapes run as numpy views, and data movement plus the int8 pipeline's remaining glue
(:data:`~compiler.backend.plans.plans.NUMPY_GLUE_OPS`) by the numpy reference kernels, except that :meth:`prepare`
compiles the :data:`~compiler.backend.plans.plans.COMPILED_GLUE` ops (``QGlobalAveragePool``) where their
planner takes the node; ``last_backend`` says which
ran the last node ("llvm"/"cuda", "view" or "numpy") and ``last_compile_s`` how long its JIT compilation took.
"""
from __future__ import annotations

import ctypes
import functools
import time
import weakref
from typing import Callable, Sequence

import numpy as np

from compiler.backend.cuda.mirror import arrays_host_wrote, arrays_to_host, find_mirror, mirror_host_buffer
from compiler.graph.bound_calls import LastCalls
from compiler.graph.cpu_backend import NumpyCpuBackend
from compiler.graph.ir import Graph, Node, TensorInfo
from compiler.backend.llvm.native_replay import NO_OP, ByteCopy
from compiler.backend.plans.compile import compile_plan
from compiler.backend.plans.plans import (COMPILED_GLUE, INDEX_ARITHMETIC_OPS, NUMPY_GLUE_OPS, PLANNERS, VIEW_OPS,
                                         OpPlan, UnsupportedOnTarget, plan_node)

# compiled on first use with lazy=True: from the operator library (compiler.topi, TE -> LLVM through build_op) ...
LAZY_OPS = frozenset({"QConv2D", "QDense", "Relu", "Clip", "Add", "Sub", "Mul", "Div", "MaxPool", "QuantizeLinear",
                      "DequantizeLinear", "Softmax", "SafeSoftmax", "QAdd", "QMul", "QLookup", "PackActivation", "UnpackActivation",
                      "PackedMaxPool",
                      # ... and hand-written (compiler.backend.llvm.pool)
                      "GlobalAveragePool"})


def _integer_only(n: Node, g: Graph) -> bool:
    """Every input of ``n`` (and its output) is an integer or bool tensor of known type."""
    names = [i for i in n.inputs if i] + [o for o in n.outputs if o]
    infos = [g.tensors.get(i) for i in names]
    return bool(names) and all(t is not None and np.dtype(t.dtype).kind in "iub" for t in infos)


def _nothing() -> None:
    """A kept view node's repeat where its result is the view itself (no copy)."""


_nothing.native = NO_OP  # type: ignore[attr-defined]


# ops whose schedule takes knobs from a tuning log (convs on llvm and cuda; products on llvm and cuda; max pools on
# llvm; pools on cuda)
TUNABLE_OPS = frozenset({"Conv", "FusedConv", "Gemm", "FusedDense", "MatMul", "MaxPool", "AveragePool",
                         "GlobalAveragePool"})


class TargetCpuBackend:
    """The CpuBackend protocol (``supports``/``run_node``) on library kernels for ``target``."""

    def __init__(self, target: str = "llvm", *, lazy: bool = False, fallback=None) -> None:
        if target not in ("llvm", "cuda"):
            raise ValueError(f"unknown kernel target {target!r}; allowed: llvm, cuda")
        if lazy and target != "llvm":
            raise ValueError(f"lazy=True compiles kernels while the model runs, on this machine: target 'llvm' only, "
                             f"got {target!r}")
        self.target = target
        self.name = target
        self.lazy = lazy
        self.last_backend = target
        self.last_compile_s = 0.0  # JIT compilation inside the last run_node (reported apart from run time)
        self.fallback = fallback or NumpyCpuBackend()
        self._plans: dict[int, tuple[OpPlan, Callable]] = {}
        self._out_meta: dict[int, tuple] = {}
        # id(node) -> the bound kernel call of its last run (see _bind), for the same inputs, out slot and thread
        self._bound = LastCalls(per_thread=True)
        # id(node) -> (node, memmove args, result) of a view node's last run, for the same inputs and slot (see _view)
        self._views = LastCalls()
        self._lazy_plans: "weakref.WeakKeyDictionary[Node, tuple]" = weakref.WeakKeyDictionary()
        # tuned(node, infos) -> knobs | None: a tunable node's knobs from a tuning log (compiler.autotune's use_knobs)
        self.tuned: Callable | None = None
        self._numpy_nodes: set[int] = set()  # ids of integer index-math nodes run by numpy (INDEX_ARITHMETIC_OPS)
        # cuda: id(node) -> whether its kernel arguments are its (mirrored) inputs themselves, not host-made copies
        self._in_place_args: dict[int, bool] = {}
        self.last_on_device = False  # cuda: the last run_node_into made only device operations (see run_replay)

    def mirror_arena(self, arena: np.ndarray) -> bool:
        """cuda: keep ``arena`` (the executor's intermediate tensors) on the device between kernels
        (:mod:`compiler.backend.cuda.mirror`); the executor then calls :meth:`to_host`/:meth:`host_wrote` around
        what it does with the arena on the host. False (nothing mirrored) on llvm."""
        if self.target != "cuda":
            return False
        mirror_host_buffer(arena)
        return True

    def record_device_run(self, arena: np.ndarray):
        """cuda: a :class:`~compiler.backend.cuda.run_replay.RunRecording` of the device operations from now until
        its ``finish()`` on mirrored ``arena`` (see :meth:`mirror_arena`), for the executor to replay steady runs;
        None on llvm, within another recording (a model run from inside another's node) and without a device (the
        first kernel says so)."""
        from compiler.backend.cuda.device import NoGpuError, recording

        hit = find_mirror(arena)
        if self.target != "cuda" or recording() or hit is None:
            return None
        from compiler.backend.cuda.run_replay import RunRecording

        try:
            return RunRecording([hit[0]])
        except NoGpuError:
            return None

    @staticmethod
    def to_host(arrays) -> None:
        """Make the host copies of ``arrays`` current (those in a mirrored arena: their device-newer parts)."""
        arrays_to_host(arrays)

    @staticmethod
    def host_wrote(arrays) -> None:
        """The host wrote ``arrays``: where they lie in a mirrored arena, the device copy is stale there."""
        arrays_host_wrote(arrays)

    def supports(self, op: str) -> bool:
        if self.lazy:
            return op in LAZY_OPS or op in VIEW_OPS or self.fallback.supports(op)
        return op in PLANNERS or op in VIEW_OPS or op in NUMPY_GLUE_OPS

    def compiles(self, op: str) -> bool:
        """Whether ``op`` gets a compiled kernel (some shapes/dtypes may still fall back when lazy)."""
        return op in LAZY_OPS if self.lazy else op in PLANNERS

    def prepare(self, g: Graph) -> None:
        """Plan and compile every CPU node of ``g``; raises :class:`UnsupportedOnTarget` listing all bad nodes."""
        from compiler.graph.partition import node_target

        errors = []
        for n in g.nodes:
            if node_target(n) != "cpu" or n.op in VIEW_OPS:
                continue
            if n.op in NUMPY_GLUE_OPS:
                if n.op in COMPILED_GLUE and not self.lazy:  # a kernel where it applies
                    self._prepare_glue(n, g)
                continue
            infos = [g.tensors.get(i) if i else None for i in n.inputs]
            try:
                knobs = self.tuned(n, infos) if self.tuned is not None and n.op in TUNABLE_OPS else None
                plan = (plan_node(n, infos, g.constants, self.target) if knobs is None
                        else PLANNERS[n.op](n, infos, g.constants, self.target, knobs=knobs))
            except UnsupportedOnTarget as exc:
                if n.op in INDEX_ARITHMETIC_OPS and _integer_only(n, g):
                    self._numpy_nodes.add(id(n))  # integer index math the library declines: numpy, exact
                    continue
                errors.append(str(exc))
                continue
            fn = compile_plan(plan, self.target)
            self._plans[id(n)] = (plan, fn)
            self._out_meta.pop(id(n), None)
            self._bound.forget(id(n))
            if self.target == "cuda":
                fn.pin(*_plan_constants(plan, n, g))
        if errors:
            raise UnsupportedOnTarget(f"{len(errors)} node(s) cannot run on target {self.target!r}:\n  "
                                      + "\n  ".join(errors))

    def _prepare_glue(self, n: Node, g: Graph) -> None:
        """Compile ``COMPILED_GLUE`` node ``n``'s kernel (run by :meth:`run_node_into`); numpy keeps the node where
        the planner declines it."""
        try:
            plan = COMPILED_GLUE[n.op](n, [g.tensors.get(i) if i else None for i in n.inputs], g.constants, self.target)
        except UnsupportedOnTarget:
            return
        self._plans[id(n)] = (plan, compile_plan(plan, self.target))
        self._out_meta.pop(id(n), None)
        self._bound.forget(id(n))

    def run_node_into(self, node: Node, inputs: Sequence[np.ndarray | None],
                      outs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        """``run_node``, writing a library kernel's result into ``outs[0]`` when given (same shape and dtype as
        the node's output): the executor passes its arena slots, so no copy follows."""
        dst = outs[0] if outs else None
        if self.target == "cuda":
            return self._run_on_device(node, inputs, dst)
        call = self._bound.repeat(id(node), inputs, dst)
        if call is not None:  # the same arrays as last run, on this thread
            self.last_backend, self.last_compile_s = self.target, 0.0
            call()
            return [dst]
        if node.op in VIEW_OPS:
            return self._view(node, inputs, dst)
        entry = self._plans.get(id(node))
        if entry is None or dst is None or dst.dtype != entry[0].out_dtype or not dst.flags.c_contiguous:
            return self.run_node(node, inputs)
        plan, fn = entry
        shape, dtype, size = self._out_meta.get(id(node)) or self._kernel_out(node, fn)
        if dtype != dst.dtype or size != dst.size:
            return self.run_node(node, inputs)
        self.last_backend = self.target
        args = plan.args(inputs)
        fn(*args, out=dst.reshape(shape))
        if self.target == "llvm":
            self._bind(node, fn, inputs, args, dst, shape)
        return [dst]

    def _run_on_device(self, node: Node, inputs: Sequence[np.ndarray | None], dst: np.ndarray | None) -> list:
        """cuda: ``node``'s kernel writes ``dst`` (its arena slot) on the device, reading its inputs there; any other
        node runs on the host, on inputs brought up to date, and what it writes is marked host-newer."""
        entry = self._plans.get(id(node)) if node.op not in VIEW_OPS else None
        if entry is not None and dst is not None and dst.dtype == entry[0].out_dtype and dst.flags.c_contiguous:
            plan, fn = entry
            shape, dtype, size = self._out_meta.get(id(node)) or self._kernel_out(node, fn)
            if dtype == dst.dtype and size == dst.size:
                key = id(node)
                in_place = self._in_place_args.get(key, False)
                if not in_place:
                    arrays_to_host(inputs)  # the arguments may be host-made copies (casts) of the inputs
                args = plan.args(inputs)
                if key not in self._in_place_args:
                    self._in_place_args[key] = _args_in_place(inputs, args)
                self.last_backend, self.last_compile_s = self.target, 0.0
                self.last_on_device = in_place and _args_resident(inputs, args, fn)
                fn(*args, out=dst.reshape(shape))
                return [dst]
        if node.op in VIEW_OPS and dst is not None and self._view_on_device(node, inputs, dst):
            self.last_on_device = True
            return [dst]
        self.last_on_device = False
        arrays_to_host(inputs)
        outs = self._view(node, inputs, dst) if node.op in VIEW_OPS else self.run_node(node, inputs)
        ins = [a for a in inputs if isinstance(a, np.ndarray)]
        arrays_host_wrote([o for o in outs if isinstance(o, np.ndarray)
                           and not any(np.may_share_memory(o, a) for a in ins)])
        return outs

    def _view_on_device(self, node: Node, inputs: Sequence[np.ndarray | None], dst: np.ndarray) -> bool:
        """cuda: a view node (a reshape of its first input's bytes) whose input and slot ``dst`` are both in the
        mirrored arena copies the bytes on the device (the host copy of neither is touched); False where that
        does not apply."""
        from compiler.backend.cuda.device import get_device

        x = inputs[0] if inputs else None
        if not isinstance(x, np.ndarray) or not x.flags.c_contiguous or x.nbytes != dst.nbytes:
            return False
        src, into = find_mirror(x), find_mirror(dst)
        if src is None or into is None or src[0] is not into[0] or not (src[2] <= into[1] or into[2] <= src[1]):
            return False
        arrays_to_host(inputs[1:])  # a shape operand computed at run time is read on the host
        v = self.fallback.run_node(node, inputs)  # a reshape of contiguous memory reads no data
        if (len(v) != 1 or not isinstance(v[0], np.ndarray) or not v[0].flags.c_contiguous or v[0].nbytes != x.nbytes
                or v[0].__array_interface__["data"][0] != src[1] or v[0].dtype != dst.dtype):
            return False
        src[0].copy_within(get_device(), into[1], src[1], x.nbytes)
        self.last_backend, self.last_compile_s = "view", 0.0
        return True

    def repeat_call(self, node: Node, inputs: Sequence[np.ndarray | None],
                    outs: Sequence[np.ndarray | None]) -> "tuple[Callable[[], None], str, list] | None":
        """What :meth:`run_node_into` on exactly these arrays would do, as ``(call, backend, results)``: the node's
        bound kernel call, or a view node's memmove (or nothing), the ``last_backend`` it would report and the
        arrays it would return; None where it would do more (bind, plan or fall back to numpy). The executor
        replays a run whose nodes all have one (:meth:`compiler.executor.module.Module.run`)."""
        dst = outs[0] if outs else None
        call = self._bound.repeat(id(node), inputs, dst)
        if call is not None:
            return call, self.target, [dst]
        if node.op not in VIEW_OPS:
            return None
        hit = self._views.repeat(id(node), inputs, dst)
        if hit is None:
            return None
        copy = hit[1]
        if copy is None:
            return _nothing, "view", [hit[2]]
        call = functools.partial(ctypes.memmove, *copy)
        call.native = ByteCopy(*copy)  # type: ignore[attr-defined]  (for the executor's native replay)
        return call, "view", [hit[2]]

    def calls_version(self) -> tuple[int, int]:
        """Versions of the bound calls and kept views (:attr:`LastCalls.version`): a caller holding
        :meth:`repeat_call` results knows they still hold while these are unchanged."""
        return self._bound.version, self._views.version

    def _view(self, node: Node, inputs: Sequence[np.ndarray | None], dst: np.ndarray | None = None) -> list[np.ndarray]:
        """A metadata-only node (``VIEW_OPS``) where the inputs are the same array objects as last time (the
        executor's arena views) and its result shared their memory: the same result again, with no numpy call
        (~15 us hot; MobileNetV2's Flatten row took ~0.1 ms in the model, its numpy code evicted by the kernels).
        Where the executor planned the output its own slot ``dst`` (C-contiguous, same size and dtype), the data
        is copied there by ``memmove`` between the addresses kept from the first run and ``dst`` is returned (the
        executor copied the view into the slot with numpy every run: ~40 us cold)."""
        hit = self._views.repeat(id(node), inputs, dst)  # (node: held, so its id stays its own; memmove args; result)
        if hit is not None:
            self.last_backend, self.last_compile_s = "view", 0.0
            if hit[1] is not None:
                ctypes.memmove(*hit[1])
            return [hit[2]]
        outs = self.run_node(node, inputs)
        self._views.forget(id(node))
        v = outs[0] if len(outs) == 1 else None
        if (isinstance(v, np.ndarray) and inputs and isinstance(inputs[0], np.ndarray)
                and np.may_share_memory(v, inputs[0])):
            copy = None
            if (dst is not None and v.flags.c_contiguous and dst.flags.c_contiguous and v.dtype == dst.dtype
                    and v.nbytes == dst.nbytes and not np.may_share_memory(v, dst)):
                dst[...] = v.reshape(dst.shape)
                copy, v = (dst.ctypes.data, v.ctypes.data, v.nbytes), dst
                outs = [dst]
            self._views.record(id(node), inputs, (node, copy, v), dst)
        return outs

    def _bind(self, node: Node, fn, inputs, args: list, dst: np.ndarray, shape: tuple) -> None:
        """Keep a checked, addressed call of ``node``'s kernel for the next run on the same arrays (the executor's
        arena views), where every kernel argument is the same memory each time: constants or views of the inputs
        (``plan.args`` called twice, both results alive, gives the same addresses; a fresh copy would not)."""
        self._bound.forget(id(node))
        again = self._plans[id(node)][0].args(inputs)
        if len(again) != len(args) or any(
                not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray) or a.shape != b.shape
                or a.__array_interface__["data"][0] != b.__array_interface__["data"][0] for a, b in zip(args, again)):
            return
        node_args = fn.bind(*args, out=dst.reshape(shape))
        if node_args is None:
            return
        self._bound.record(id(node), inputs, node_args, dst)

    def _kernel_out(self, node: Node, fn) -> tuple:
        """(shape, dtype, size) of the kernel's output buffer for ``node`` (kept: the per-node call path is hot)."""
        buf = fn.func.args[fn.func.num_inputs]
        meta = (tuple(buf.shape), np.dtype(buf.dtype), int(np.prod(buf.shape)))
        self._out_meta[id(node)] = meta
        return meta

    def run_node(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        self.last_compile_s = 0.0
        if node.op in VIEW_OPS:
            self.last_backend = "view"
            return self.fallback.run_node(node, inputs)
        if node.op in NUMPY_GLUE_OPS or id(node) in self._numpy_nodes:
            self.last_backend = "numpy"
            return self.fallback.run_node(node, inputs)
        entry = self._plans.get(id(node))
        if entry is None and self.lazy:
            return self._run_lazily(node, inputs)
        if entry is None:
            raise RuntimeError(f"node {node.name!r} ({node.op}) was not prepared for target {self.target!r}: build the "
                               f"module with compiler.executor.build(..., target={self.target!r})")
        plan, fn = entry
        self.last_backend = self.target
        out = fn(*plan.args(inputs))
        out = np.asarray(out)
        if out.dtype != plan.out_dtype:  # uint8 results are computed through a wider integer
            out = out.astype(plan.out_dtype)
        return [out.reshape(plan.out_shape)]

    def _run_lazily(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        ins = [None if a is None else np.asarray(a) for a in inputs]
        key = tuple(None if a is None else (a.shape, a.dtype.str) for a in ins)
        cached = self._lazy_plans.get(node)
        if cached is None or cached[0] != key:
            t0 = time.perf_counter()
            cached = (key, _lazy_kernel(node, ins))
            self.last_compile_s += time.perf_counter() - t0
            self._lazy_plans[node] = cached
        run = cached[1]
        if run is None:
            self.last_backend = self.fallback.name
            return self.fallback.run_node(node, inputs)
        self.last_backend = "llvm"
        return run(ins)


def _lazy_kernel(node: Node, ins: list[np.ndarray | None]) -> Callable | None:
    """``run(inputs) -> outputs`` of a kernel compiled for ``node`` on these arrays, or None (numpy runs it)."""
    if node.op == "GlobalAveragePool":
        from compiler.backend.llvm.plan import compile_plan as compile_generated
        from compiler.backend.llvm.pool import plan_global_avg_pool

        plan = plan_global_avg_pool(node, ins)
        if plan is None:
            return None
        fn = compile_generated(plan)
        return lambda xs: plan.run(fn, xs)
    if node.op not in LAZY_OPS:
        return None
    infos = [None if a is None else TensorInfo(a.shape, a.dtype) for a in ins]
    consts = {name: a for name, a in zip(node.inputs, ins) if name and a is not None}
    try:
        op = plan_node(node, infos, consts, "llvm")
    except UnsupportedOnTarget:
        return None
    fn = compile_plan(op, "llvm")
    return lambda xs: [np.asarray(fn(*op.args(xs))).reshape(op.out_shape).astype(op.out_dtype, copy=False)]


def _args_in_place(inputs: Sequence[np.ndarray | None], args: list) -> bool:
    """Whether every input that lies in a mirrored arena reaches the kernel in place (an argument inside it), not
    as a copy made on the host (which would read the host copy)."""
    spans = [(a.__array_interface__["data"][0], a.__array_interface__["data"][0] + a.nbytes)
             for a in args if isinstance(a, np.ndarray)]
    for x in inputs:
        if isinstance(x, np.ndarray) and find_mirror(x) is not None:
            lo, hi = x.__array_interface__["data"][0], x.__array_interface__["data"][0] + x.nbytes
            if not any(lo <= a < hi for a, _ in spans):
                return False
    return True


def _args_resident(inputs: Sequence[np.ndarray | None], args: list, fn) -> bool:
    """Whether every array argument of cuda kernel ``fn`` outlives the call where it is: in a mirrored arena, pinned
    on the device, or inside a node input's memory (the executor's input buffers and the graph's constants), so
    that the same call next run reads what the node would give it then, not a host-made array of this run (nor
    the op's contiguous copy of a strided one)."""
    spans = [(x.__array_interface__["data"][0], x.__array_interface__["data"][0] + x.nbytes)
             for x in inputs if isinstance(x, np.ndarray)]
    for a in args:
        if not isinstance(a, np.ndarray):
            continue
        if not a.flags.c_contiguous:
            return False
        if fn.is_pinned(a) or find_mirror(a) is not None:
            continue
        lo = a.__array_interface__["data"][0]
        if not any(x_lo <= lo and lo + a.nbytes <= x_hi for x_lo, x_hi in spans):
            return False
    return True


def _plan_constants(plan: OpPlan, node: Node, g: Graph) -> list[np.ndarray]:
    """The kernel arguments of ``plan`` that do not depend on the node's runtime inputs (packed weights,
    biases): ``plan.args`` called on two sets of placeholder inputs returns the very same arrays for them."""
    def placeholders() -> list[np.ndarray | None]:
        vals = []
        for name in node.inputs:
            if not name:  # an absent optional input (a conv without bias): absent at run time too
                vals.append(None)
                continue
            info = g.tensors.get(name)
            if name in g.constants:
                vals.append(np.asarray(g.constants[name]))
            elif info is None or any(not isinstance(d, int) for d in info.shape):
                return []
            else:
                vals.append(np.zeros(info.shape, info.dtype))
        return vals

    first, second = placeholders(), placeholders()
    if not first or not second:
        return []
    try:
        a, b = plan.args(first), plan.args(second)
    except (ValueError, TypeError, IndexError, KeyError):  # placeholders a planner cannot take: nothing is pinned
        return []
    return [x for x, y in zip(a, b) if x is y and isinstance(x, np.ndarray)]
