"""The runnable module returned by ``build``: inputs, run, outputs and a per-layer profile."""
from __future__ import annotations

import functools
import math
import threading
import time
import warnings
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

from compiler.graph.bound_calls import LastCalls
from compiler.graph.cpu_backend import CpuBackend, NumpyCpuBackend
from compiler.executor.pipeline import PROGRESS_MIN_NODES, CompiledGraph
from compiler.frontend.errors import ModelInputError, NonFiniteInputWarning, non_finite_report
from compiler.graph.ir import Node
from compiler.graph.memory_plan import lifetimes
from compiler.graph.offload import mac_split, node_macs
from compiler.graph.partition import node_target
from jit_runtime.errors import DeviceMismatchError
from jit_runtime.host_arrays import aligned_empty, aligned_zeros


def _with_layer(exc: Exception, n: Node) -> Exception:
    """``exc`` re-made with the layer's name in front of its message (RuntimeError if its type needs more args)."""
    msg = f"layer {n.name!r} ({n.op}): {exc}"
    try:
        return type(exc)(msg)
    except TypeError:
        return RuntimeError(msg)


def _same_memory(a: np.ndarray, b) -> bool:
    """``b`` is an array with ``a``'s data address, size and dtype (another view of the same bytes, not a copy)."""
    return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.size == b.size
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


class _Replay(NamedTuple):
    """A run as recorded calls: the thread that recorded them, the versions of the records they rest on, the steps
    ``(node, target, call, profile)`` in order and the graph outputs' arrays; ``native``: where every call has a
    native form, ``(function, feeds, names, woken)``: the steps as one native function
    (:class:`~compiler.backend.llvm.native_replay.NativeReplay`, which also copies the inputs in), the graph
    inputs' ``(name, shape, dtype, buffer)`` in its order, their names, and whether it wakes the backend's
    workers itself; else None."""

    thread: int
    versions: tuple
    steps: tuple
    outputs: tuple
    native: "tuple | None" = None


class _DeviceRun(NamedTuple):
    """A cuda run kept as its device operations (:class:`~compiler.backend.cuda.run_replay.DeviceReplay`): the thread
    and record versions it was made on, the input buffers it uploads from, the profile's ``(node, target,
    profile)`` per node and the graph outputs' arena views."""

    replay: object
    thread: int
    versions: tuple
    inputs: dict
    steps: list
    outputs: list


class Module:
    """A compiled model bound to an accelerator backend and a CPU backend."""

    def __init__(self, compiled: CompiledGraph, accel, cpu: CpuBackend | None = None, progress: bool | None = None) -> None:
        self.compiled = compiled
        self.graph = compiled.graph
        self.accel = accel
        self.cpu = cpu or NumpyCpuBackend()
        self.progress = progress
        self._inputs: dict[str, np.ndarray] = {}
        self._outputs: list[np.ndarray] = []
        self._profile: list[dict] = []
        self.keep_details = False  # keep each accel layer's raw backend profile (for traces)
        self._details: list[dict] = []
        self._macs_cache: dict[int, int] = {}  # id(node) -> its real MACs (profile rows)
        outputs = set(self.graph.outputs)
        self._free_after: dict[int, list[str]] = {}  # node index -> intermediates dead after it
        for t, (_, end) in lifetimes(self.graph).items():
            if t not in outputs:
                self._free_after.setdefault(end, []).append(t)
        # intermediate tensors live in one arena at the static memory plan's offsets
        self._plan = compiled.memory_plan
        self._arena = aligned_zeros(self._plan.peak_bytes, np.uint8)  # slots at 64-byte offsets: on cache lines
        self._arena_addr = self._arena.ctypes.data
        self._slots: dict[str, np.ndarray | None] = {}  # tensor -> its arena view (the per-node path is hot)
        # cuda: the arena stays on the device between kernels; the host side of the run says when it reads or
        # writes the arena (compiler.backend.cuda.mirror)
        self._mirrored = bool(getattr(self.cpu, "mirror_arena", lambda arena: False)(self._arena))
        # node index -> (the backend's repeat of its last call, its result, profile): accel layers whose next run
        # gets the same arrays (or views of the same memory) skip the backend's per-call work (see _run_accel_bound)
        self._accel_bound = LastCalls(views=True)
        self._staged: dict[str, np.ndarray] = {}  # input name -> the module's own copy of it (see run)
        self._replay: _Replay | None = None  # the last run's nodes as recorded calls, where all had one (see run)
        # cuda: time each node's device work in replayed runs (profile()'s time_ms is then the GPU's, not the host's);
        # timed_on_device: the last run's profile holds such times
        self.device_timing = False
        self.timed_on_device = False
        # cuda: the last general run did only device work (so later runs can replay); None: not known yet (a first
        # run always does some host work, finding which kernel arguments lie on the device)
        self.device_only: bool | None = None
        # cuda: why the last general run was not kept as a replay (host work names its nodes); None: it was, or none
        # was recorded
        self.replay_refusal: str | None = None
        # cuda: the last run's device operations (a RunRecording) and, once two runs made the same, their replay
        self._device_last = None
        self._device_replay: _DeviceRun | None = None

    # -- inputs / outputs ---------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self.graph.inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.graph.outputs)

    def input_info(self, name: str):
        return self.graph.tensors[name]

    def set_input(self, name: str, array) -> None:
        """Bind an input: an array of the model's shape and dtype (as onnxruntime, nothing is cast: a float64 array for
        a float32 input is a :class:`ModelInputError` that says how to convert it).

        NaN/Inf values are reported with a :class:`NonFiniteInputWarning`, not refused. The array is copied into a
        buffer the module owns now (as TVM's ``set_input``): changing it afterwards does not change the next run.
        """
        if name not in self.graph.inputs:
            raise ModelInputError(f"unknown input {name!r}; the model's inputs are {self.graph.inputs}")
        info = self.graph.tensors[name]
        a = np.asarray(array)
        if a.shape != info.shape:
            raise ModelInputError(f"input {name!r} has shape {a.shape}; the module was compiled for {info.shape} "
                                  f"(rebuild with input_shapes={{{name!r}: {a.shape}}} to change it)")
        if a.dtype != info.dtype:
            raise ModelInputError(f"input {name!r} has dtype {a.dtype}; the model expects {np.dtype(info.dtype)} "
                                  f"(nothing is cast silently: pass array.astype(np.{np.dtype(info.dtype)}))")
        buf = self._input_buffer(name, a)  # copied now (as TVM's set_input): later changes to ``array`` are not seen
        np.copyto(buf, a)
        report = non_finite_report(buf, f"input {name!r}")  # on the copy, still in cache: one pass over ``array``
        if report is not None:  # legitimate for some ONNX operators: reported, not refused
            warnings.warn(NonFiniteInputWarning(f"{report}; outputs that depend on them may be NaN/Inf"), stacklevel=2)
        self._inputs[name] = buf

    def get_output(self, i: int | str = 0) -> np.ndarray:
        if not self._outputs:
            raise RuntimeError("no outputs yet: call run() first")
        if isinstance(i, str):
            if i not in self.graph.outputs:
                raise KeyError(f"unknown output {i!r}; outputs are {self.graph.outputs}")
            i = self.graph.outputs.index(i)
        if not -len(self._outputs) <= i < len(self._outputs):
            raise IndexError(f"output index {i} out of range: the model has {len(self._outputs)} output(s)")
        return self._outputs[i]

    # -- execution ---------------------------------------------------------------------
    def _run_accel_bound(self, idx: int, n: Node, ins: list) -> tuple[np.ndarray, dict]:
        """:meth:`_run_accel`, or where node ``idx`` gets the same input arrays as on its last run (identity, or a
        view of the same memory: the arena's views and the constants, held by the binding so no id is reused;
        :class:`~compiler.graph.bound_calls.LastCalls`) the backend's own repeat of that
        call (``accel.last_call()``: the prepared kernel on the same addresses, none of the per-call checks and
        lookups; ~10 us a layer of Python). The result is the same array object as that run's, rewritten."""
        bound = self._accel_bound.repeat(idx, ins)
        if bound is not None:
            bound[0]()
            return bound[1], bound[2]
        out, prof = self._run_accel(n, ins)
        repeat = getattr(self.accel, "last_call", None)
        res = n.attrs.get("residual") if n.op == "AccelConv2D" else None
        again = None
        if repeat is not None and (res is None or self.accel.supports_residual(res) is None):  # no host-side Add
            again = repeat()
        if again is not None and isinstance(out, np.ndarray):
            self._accel_bound.record(idx, ins, (again, out, prof))
        else:
            self._accel_bound.forget(idx)
        return out, prof

    def _run_accel(self, n: Node, ins: list) -> tuple[np.ndarray, dict]:
        from compiler.executor.export import call_accel

        res = n.attrs.get("residual") if n.op == "AccelConv2D" else None
        if getattr(self.accel, "writes_into", False) and (  # straight into the arena slot
                res is None or getattr(self.accel, "supports_residual", lambda r: "no")(res) is None):
            out = call_accel(self.accel, n, ins, residual=res is not None, out=self._slot(n.outputs[0]))
            return out, dict(getattr(self.accel, "last_profile", {}) or {})

        try:
            native = res is not None and getattr(self.accel, "supports_residual", lambda r: "no")(res) is None
            out = call_accel(self.accel, n, ins, residual=native)
            if res is not None and not native:  # a backend without the fused residual: the exact Add on the host
                from jit_runtime.host_ops.int_elementwise import qadd

                out = qadd(out, ins[3], res.params) if res.conv_is_a else qadd(ins[3], out, res.params)
        except DeviceMismatchError as exc:  # rtl-check: name the first layer whose bytes or cycles differ
            raise DeviceMismatchError(f"layer {n.name!r} ({n.op}): {exc}") from None
        return out, dict(getattr(self.accel, "last_profile", {}) or {})

    def run(self, inputs: dict | None = None, **kw) -> list[np.ndarray]:
        """Execute once; inputs may be given here (dict or keywords) or earlier with set_input.

        The inputs are copied into buffers the module owns, so every run hands its nodes the same arrays. Where
        the last run found every node's call already bound to those arrays (the llvm backends' bound kernel calls,
        kept views and repeated accelerator layers: see :meth:`_make_replay`), the run replays those calls in
        order with none of the per-node dispatch; the results and the profile are the same."""
        self.timed_on_device = False
        replay = self._replay
        if replay is not None and replay.native is not None:
            outs = self._run_native(replay, {**inputs, **kw} if inputs else kw)
            if outs is not None:
                return outs
        # AccelBackend.before_run (llvm: get the thread pool's workers spinning) first, so a sleeping worker wakes
        # while the inputs are checked and staged; a backend that does not subclass AccelBackend may lack it
        before = getattr(self.accel, "before_run", None)
        if before is not None:
            before()
        for k, v in {**(inputs or {}), **kw}.items():
            self.set_input(k, v)
        missing = [i for i in self.graph.inputs if i not in self._inputs]
        if missing:
            raise ModelInputError(f"inputs not set: {missing}; use set_input(name, array) or run({{name: array}})")
        g = self.graph
        staged = dict(self._inputs)  # the module's own buffers, which set_input filled (no node writes them)
        replay = self._replay
        if (replay is not None and not self.keep_details and replay.thread == threading.get_ident()
                and replay.versions == self._calls_version()):
            return self._run_replay(replay)
        self._replay = None
        if self._device_replay is not None:
            outs = self._run_device_replay(staged)
            if outs is not None:
                return outs
        values: dict = dict(g.constants)
        values.update(staged)
        show = self.progress if self.progress is not None else len(g.nodes) >= PROGRESS_MIN_NODES
        into = getattr(self.cpu, "run_node_into", None)  # optional: CpuBackend that fills given output arrays
        # what each node was given and returned, while a replay of this run stays possible (see _make_replay)
        trace: list | None = ([] if into is not None and hasattr(self.cpu, "repeat_call")
                              and hasattr(self.cpu, "calls_version") and not self._mirrored else None)
        mirrored = self._mirrored
        # cuda: this run's device operations, to replay later runs where it is steady (see _run_device_replay)
        record = getattr(self.cpu, "record_device_run", None) if mirrored and not self.keep_details else None
        recording = record(self._arena) if record is not None else None
        try:
            rows, details, trace = self._run_nodes(values, show, into, trace, recording)
            if mirrored:
                self.cpu.to_host([values[o] for o in g.outputs])
        except BaseException:
            if recording is not None:
                recording.abandon()
            raise
        if recording is not None:
            recording.finish()
            self._note_device_run(recording, rows, staged, [values[o] for o in g.outputs])
        self._outputs = [np.array(values[o]) for o in g.outputs]  # copies: the arena is reused next run
        self._profile = rows
        self._details = details
        if trace is not None and not self.keep_details:
            self._replay = self._make_replay(trace, [values[o] for o in g.outputs])
        return list(self._outputs)

    def _run_nodes(self, values: dict, show: bool, into, trace: list | None,
                   recording) -> tuple[list, list, list | None]:
        """The general path of :meth:`run`: every node on ``values`` (the constants and inputs; each node's outputs
        are added); the profile rows, the accel layers' details and ``trace`` with each node's call appended (see
        :meth:`_make_replay`; None where a replay is not possible). Each node is marked done in ``recording``."""
        g = self.graph
        rows, details = [], []
        mirrored = self._mirrored
        for idx, n in enumerate(tqdm(g.nodes, desc="run", leave=False) if show else g.nodes):
            ins = [values[i] if i else None for i in n.inputs]
            slots = None
            t0 = time.perf_counter()
            target = node_target(n)
            if target == "accel":
                if mirrored:  # the accelerator backend reads its inputs on the host
                    self.cpu.to_host(ins)
                try:
                    out, prof = self._run_accel_bound(idx, n, ins)
                except (ValueError, RuntimeError) as exc:  # name the layer: the backend only sees arrays
                    raise _with_layer(exc, n) from exc
                outs = [out]
                on_device = False
                if self.keep_details:
                    details.append(prof)
            elif into is not None:  # the backend writes straight into the outputs' arena slots
                slots = [self._slot(o) for o in n.outputs]
                outs = into(n, ins, slots)
                on_device = getattr(self.cpu, "last_on_device", False)
                prof = {"cpu_backend": getattr(self.cpu, "last_backend", self.cpu.name),
                        "compile_s": getattr(self.cpu, "last_compile_s", 0.0)}
            else:
                on_device = False
                outs = self.cpu.run_node(n, ins)
                prof = {"cpu_backend": getattr(self.cpu, "last_backend", self.cpu.name),
                        "compile_s": getattr(self.cpu, "last_compile_s", 0.0)}
            dt = time.perf_counter() - t0
            for name, v in zip(n.outputs, outs):
                if name:
                    placed = values[name] = self._place(name, v)
                    if placed is not v and not _same_memory(placed, v):  # copied into its slot: a replay would not
                        trace, on_device = None, False
                        if mirrored:
                            self.cpu.host_wrote([placed])
                    elif mirrored and target == "accel":
                        self.cpu.host_wrote([placed])
            rows.append((n, target, dt, prof))  # the profile row is built when asked for (profile())
            if trace is not None:
                trace.append((idx, n, target, ins, slots, outs))
            if recording is not None:
                recording.node_done(on_device)
            for t in self._free_after.get(idx, ()):
                values.pop(t, None)
        return rows, details, trace

    def _note_device_run(self, recording, rows: list, staged: dict, outputs: list) -> None:
        """Keep the device replay of the run just recorded where it was steady (see
        :class:`~compiler.backend.cuda.run_replay.DeviceReplay`), else remember it to compare with the next."""
        from compiler.backend.cuda.run_replay import DeviceReplay

        last, self._device_last = self._device_last, recording
        self.device_only = None if last is None else not recording.host_work
        why = DeviceReplay.refusal(last, recording)
        if why is not None and recording.host_nodes:
            nodes = self.graph.nodes
            why += ": " + ", ".join(f"{nodes[i].name} ({nodes[i].op})" for i in recording.host_nodes[:6])
        self.replay_refusal = why
        if why is None:
            self._device_replay = _DeviceRun(DeviceReplay(recording), threading.get_ident(), self._calls_version(),
                                             staged, [(n, t, p) for n, t, _dt, p in rows], outputs)

    def time_on_device(self, most: int = 3) -> int:
        """cuda: run again (the inputs as set, ``most`` times at most) until a run is replayed with
        :attr:`device_timing` on, so :meth:`profile` holds the device's own times (:attr:`timed_on_device`); stops
        early where a run did host work (:attr:`device_only` False: such a model is never replayed). The runs made."""
        self.device_timing = True
        runs = 0
        while not self.timed_on_device and runs < most and self.device_only is not False:
            self.run()
            runs += 1
        return runs

    def _run_device_replay(self, staged: dict) -> list[np.ndarray] | None:
        """:meth:`run` as the device replay's operations alone, where it still holds: the same thread, records and
        input buffers as when it was made, and the device and mirrors as it left them; None (and the replay
        dropped) otherwise."""
        replay, thread, versions, inputs, steps, outputs = self._device_replay
        secs = None
        if (not self.keep_details and thread == threading.get_ident() and versions == self._calls_version()
                and staged.keys() == inputs.keys() and all(staged[k] is inputs[k] for k in inputs)):
            secs = replay.run(on_device=self.device_timing)
        if secs is None:
            self._device_replay = self._device_last = None
            return None
        self._outputs = [np.array(v) for v in outputs]  # copies: the arena is reused next run
        self._profile = [(n, t, dt, p) for (n, t, p), dt in zip(steps, secs)]
        self.timed_on_device = self.device_timing
        self._details = []
        return list(self._outputs)

    def _input_buffer(self, name: str, a: np.ndarray) -> np.ndarray:
        """The module's own buffer for input ``name`` (shape and dtype of ``a``): the same array every run, so the
        nodes that read it keep their bound calls."""
        buf = self._staged.get(name)
        if buf is None or buf.shape != a.shape or buf.dtype != a.dtype:
            buf = self._staged[name] = aligned_empty(a.shape, a.dtype)
        return buf

    def _calls_version(self) -> tuple:
        """The versions of every record a replay rests on (the Module's bound accelerator calls, the CPU backend's
        bound calls and views): a replay holds while they are unchanged."""
        return self._accel_bound.version, self.cpu.calls_version()

    def _make_replay(self, trace: list, outputs: list) -> "_Replay | None":
        """The replay of the run just made, where a next run on the same arrays would, node by node, only repeat a
        recorded call: each accelerator layer's bound call (:meth:`_run_accel_bound`) and each CPU node's
        ``repeat_call`` (a bound kernel call or a kept view), each returning the very arrays this run placed.
        None where any node would do more (bind, plan, copy, numpy)."""
        steps = []
        for idx, n, target, ins, slots, outs in trace:
            if target == "accel":
                bound = self._accel_bound.repeat(idx, ins)
                if bound is None or len(outs) != 1 or bound[1] is not outs[0]:
                    return None
                steps.append((n, target, bound[0], bound[2]))
                continue
            rep = self.cpu.repeat_call(n, ins, slots)
            if rep is None or len(rep[2]) != len(outs) or any(a is not b for a, b in zip(rep[2], outs)):
                return None
            steps.append((n, target, rep[0], {"cpu_backend": rep[1], "compile_s": 0.0}))
        native = self._native_replay(steps)
        return _Replay(threading.get_ident(), self._calls_version(), tuple(steps), tuple(outputs), native)

    def _native_replay(self, steps: list) -> "tuple | None":
        """``steps`` (the replay's) as one native function, where every call has a native form (``call.native``:
        a bound llvm kernel, a view's copy) and this machine can run it; None otherwise. The accelerator backend's
        ``before_run`` goes in front where it has a native form (``native_before_run``: the llvm thread pool's
        wake), else the native path calls it from Python first."""
        from compiler.backend.llvm.native_replay import InputCopy, NativeReplay, clock_address

        natives = [getattr(call, "native", None) for _n, _t, call, _p in steps]
        if not natives or any(x is None for x in natives) or not clock_address():
            return None
        feeds = []
        for name in self.graph.inputs:
            buf = self._inputs.get(name)
            if buf is None or buf is not self._staged.get(name):
                return None
            feeds.append((name, buf.shape, buf.dtype, buf))
        first = getattr(self.accel, "native_before_run", lambda: None)()
        try:
            native = NativeReplay(natives, [InputCopy(b.ctypes.data, b.nbytes, b.dtype.name) for *_x, b in feeds],
                                  first)
        except RuntimeError:  # no JIT for this machine's own CPU: the Python replay still runs
            return None
        return native, tuple(feeds), frozenset(self.graph.inputs), first is not None

    def _run_native(self, replay: "_Replay", given: dict) -> "list[np.ndarray] | None":
        """:meth:`run` as one call of the replay's native function, which copies the inputs given here into the
        module's buffers (counting NaN/Inf as it goes) and runs every step; None where the general checks must run
        (a record changed, another thread, ``keep_details``, an unknown or missing input)."""
        if (self.keep_details or replay.thread != threading.get_ident()
                or replay.versions != self._calls_version()):
            return None
        native, feeds, names, woken = replay.native
        if any(k not in names for k in given):  # the general path names the unknown input
            return None
        sources = []
        for name, shape, dtype, buf in feeds:
            if name not in given:
                if self._inputs.get(name) is not buf:
                    return None
                sources.append(0)
                continue
            a = given[name]
            if type(a) is np.ndarray and a.shape == shape and a.dtype == dtype and a.flags.c_contiguous:
                sources.append(a.__array_interface__["data"][0])
            else:  # checked (a clear error for a wrong one) and copied as by set_input
                self.set_input(name, a)
                sources.append(0)
        if not woken:
            before = getattr(self.accel, "before_run", None)
            if before is not None:
                before()
        if native.run(sources):  # NaN/Inf in an input copied here: reported as set_input does
            for (name, _s, _d, buf), src in zip(feeds, sources):
                report = non_finite_report(buf, f"input {name!r}") if src else None
                if report is not None:
                    warnings.warn(NonFiniteInputWarning(f"{report}; outputs that depend on them may be NaN/Inf"),
                                  stacklevel=3)
        self._outputs = [np.array(v) for v in replay.outputs]  # copies: the arena is reused next run
        self._profile = functools.partial(self._native_rows, replay)
        self._details = []
        return list(self._outputs)

    @staticmethod
    def _native_rows(replay: "_Replay") -> list[tuple]:
        """The profile's raw rows of the last native run of ``replay`` (its function's clock readings)."""
        secs = replay.native[0].step_seconds()
        return [(n, target, float(dt), prof) for (n, target, _c, prof), dt in zip(replay.steps, secs)]

    def _run_replay(self, replay: "_Replay") -> list[np.ndarray]:
        """:meth:`run` by replaying the recorded calls (each timed for the profile)."""
        rows = []
        clock = time.perf_counter
        try:
            for n, target, call, prof in replay.steps:
                t0 = clock()
                call()
                rows.append((n, target, clock() - t0, prof))
        except (ValueError, RuntimeError) as exc:  # name the layer, as the general path does
            self._replay = None
            raise _with_layer(exc, replay.steps[len(rows)][0]) from exc
        self._outputs = [np.array(v) for v in replay.outputs]  # copies: the arena is reused next run
        self._profile = rows
        self._details = []
        return list(self._outputs)

    def _slot(self, name: str) -> np.ndarray | None:
        """The arena view planned for tensor ``name`` (its graph shape and dtype), or None (not planned)."""
        if name in self._slots:
            return self._slots[name]
        view = self._slots[name] = self._slot_view(name)
        return view

    def _slot_view(self, name: str) -> np.ndarray | None:
        alloc = self._plan.allocations.get(name) if name else None
        if alloc is None or name not in self.graph.tensors:
            return None
        info = self.graph.tensors[name]
        nbytes = math.prod(info.shape) * np.dtype(info.dtype).itemsize
        if nbytes > alloc.size:
            return None
        return self._arena[alloc.offset:alloc.offset + nbytes].view(info.dtype).reshape(info.shape)

    def _place(self, name: str, value) -> np.ndarray:
        """Copy a node output into its planned arena slot; the view becomes the tensor's value (no copy when the
        backend already wrote it there)."""
        if value is self._slots.get(name):  # the backend wrote its arena slot (the view itself)
            return value
        alloc = self._plan.allocations.get(name)
        if alloc is None:
            return value
        v = np.asarray(value)
        if v.__array_interface__["data"][0] == self._arena_addr + alloc.offset and v.flags.c_contiguous:
            # already in its slot: the slot's own view where it has the same shape, so readers see the same array
            # object every run (a backend that returned a reshaped view would otherwise defeat their bound calls)
            slot = self._slots.get(name)
            return slot if slot is not None and slot.shape == v.shape and slot.dtype == v.dtype else v
        if v.nbytes > alloc.size:
            raise RuntimeError(f"memory plan: tensor {name!r} produced {v.nbytes} bytes {v.shape} {v.dtype} but was "
                               f"planned {alloc.size} bytes; the graph's shape inference and the kernel disagree")
        slot = self._arena[alloc.offset:alloc.offset + v.nbytes].view(v.dtype).reshape(v.shape)
        slot[...] = v
        return slot

    @property
    def arena_bytes(self) -> int:
        """Bytes of the intermediate-tensor arena (the memory plan's peak)."""
        return int(self._arena.nbytes)

    def __call__(self, **inputs):
        outs = self.run(inputs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # -- profiling ---------------------------------------------------------------------
    def _node_macs(self, n: Node) -> int:
        """``node_macs`` of ``n``, computed once (the graph is fixed; ~0.4 ms a run of MobileNetV2 otherwise)."""
        macs = self._macs_cache.get(id(n))
        if macs is None:
            macs = self._macs_cache[id(n)] = node_macs(self.graph, n)
        return macs

    def _row(self, n: Node, target: str, dt: float, prof: dict) -> dict:
        by = prof.get("bytes", {})
        accel = target == "accel"
        cycles = int(prof.get("cycles", 0)) if accel else None
        clock = float(getattr(self.compiled.config, "clock_mhz", 100.0))
        compile_s = float(prof.get("compile_s", 0.0))
        return {"name": n.name, "op": n.op, "target": target, "group": n.attrs.get("fusion_group"),
                "ran_on": getattr(self.accel, "runs_on", "accel") if accel
                else f"cpu:{prof.get('cpu_backend') or self.cpu.name}",
                "cycles": cycles, "accel_ms": cycles / (clock * 1e3) if accel else None,
                "utilization": float(prof.get("utilization", 0.0)) if accel else None,
                "macs": int(prof.get("macs", 0)), "real_macs": self._node_macs(n),
                "padded_macs": int(prof.get("macs", 0)) if accel else None,
                "intrinsic": prof.get("intrinsic", "gemm") if accel else None,
                "bytes": int(sum(by.values())) if isinstance(by, dict) else int(by),
                "dram_bytes": prof.get("dram_bytes") if accel else None,
                "cpu_backend": prof.get("cpu_backend"), "time_ms": (dt - compile_s) * 1e3,
                "compile_ms": compile_s * 1e3}

    def profile(self) -> list[dict]:
        """Per-layer rows of the last run: name, op, target, group, cycles, utilization, macs, intrinsic (accel rows:
        the tensor intrinsic the layer ran on, e.g. "gemm" or "dwmac"), bytes, time_ms,
        and ``cpu_backend`` (CPU rows: "numpy", "llvm" or "view" (zero-copy reshape); None on accel rows)."""
        if callable(self._profile):  # the last run was native: its rows from the native function's clock
            self._profile = self._profile()
        if not self._profile:
            raise RuntimeError("no profile yet: call run() first")
        if isinstance(self._profile[0], tuple):  # the last run's raw (node, target, seconds, backend profile)
            rows = []
            for n, target, dt, prof in self._profile:
                if target == "accel" and getattr(self.accel, "runs_on_host", False):  # llvm/cuda: int8 layers on the CPU
                    target, prof = "cpu", dict(prof, cpu_backend=getattr(self.accel, "target", "host"))
                rows.append(self._row(n, target, dt, prof))
            self._profile = rows
        return [dict(r) for r in self._profile]

    def profile_summary(self) -> dict:
        """Totals of the last run: layers and cycles per target, ``accel_mac_fraction`` (real MACs, no block
        padding), ``host_ops`` (host nodes by op type), and ``end_to_end_ms`` = accelerator cycles at the clock
        + measured host time."""
        rows = self.profile()
        acc = [r for r in rows if r["target"] == "accel"]
        clock = float(getattr(self.compiled.config, "clock_mhz", 100.0))
        cycles = sum(r["cycles"] for r in acc)
        host_ops: dict[str, int] = {}
        for r in rows:
            if r["target"] != "accel":
                host_ops[r["op"]] = host_ops.get(r["op"], 0) + 1
        acc_macs, host_macs = mac_split(self.graph)
        if getattr(self.accel, "runs_on_host", False):  # the "accelerator" layers ran on the CPU/GPU target
            acc_macs, host_macs = 0, acc_macs + host_macs
        accel_ms = cycles / (clock * 1e3)
        cpu_ms = sum(r["time_ms"] for r in rows if r["target"] == "cpu")
        return {"accel_layers": len(acc), "cpu_layers": len(rows) - len(acc), "accel_cycles": cycles,
                "accel_time_ms": accel_ms, "cpu_time_ms": cpu_ms, "end_to_end_ms": accel_ms + cpu_ms,
                "accel_mac_fraction": acc_macs / (acc_macs + host_macs) if acc_macs + host_macs else 0.0,
                "host_macs": host_macs, "host_ops": dict(sorted(host_ops.items())),
                "macs": sum(r["macs"] for r in acc), "real_macs": acc_macs, "bytes": sum(r["bytes"] for r in acc),
                "jit_compile_ms": sum(r["compile_ms"] for r in rows)}

    def write_trace(self, path) -> str:
        """Chrome/Perfetto trace of the last run's accelerator layers; returns the timing source.

        Set ``keep_details = True`` before ``run`` to include the backend's simulator results.
        """
        from compiler.executor.trace import write_accel_trace

        return write_accel_trace(path, self.profile(), self._details, float(getattr(self.compiled.config, "clock_mhz", 100.0)),
                                 self.graph.name)

    def export(self, path, inputs: dict | None = None):
        """Write this module as one file (``.vtamod``) that the runtime layer loads and runs alone:
        ``jit_runtime.load_module(path)`` (also ``compiler.load_module``, ``vta run FILE.vtamod``). See
        :mod:`compiler.executor.export`; ``inputs``: sample feeds (default: the inputs set, else zeros)."""
        from compiler.executor.export import export_module

        return export_module(self, path, inputs)

    def print_profile(self) -> None:
        """Pretty-print the profile with rich."""
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"profile: {self.graph.name}")
        for c in ("name", "op", "target", "cycles", "util", "MACs", "bytes", "ms"):
            t.add_column(c)
        for r in self.profile():
            t.add_row(r["name"], r["op"], r["target"], "" if r["cycles"] is None else str(r["cycles"]),
                      "" if r["utilization"] is None else f"{r['utilization']:.2f}", str(r["macs"]), str(r["bytes"]),
                      f"{r['time_ms']:.3f}")
        Console().print(t)
