"""Tuning the cuda target's conv2d schedule (:func:`compiler.topi.conv2d_gpu.schedule_gpu`) on the device.

A task (:class:`CudaConvTask`) is one float conv2d of one group as ``build(model, target="cuda")`` compiles it
(a ``Conv``/``FusedConv`` node after epilogue fusion: geometry, bias, fused residual, activation). Its space
(:class:`GpuConvSpace`) is the product of the schedule's knobs (:class:`~compiler.topi.conv2d_gpu.GpuConvKnobs`):
the block tile's output channels ``bo`` and pixels ``bp`` (4-128), each thread's ``vo`` x ``vp`` accumulators
(1-8 each, at most 64 registers of them), the shared-memory chunk ``rk`` (4, 8, 16) and the split of the reduction
``split`` (1-16). A measurement compiles the kernel and times it on the device
(:func:`compiler.backend.cuda.device.get_device`): the weight and input uploaded once, the output left on the
device, one warm-up call, then the median of ``repeats`` timed runs, each of enough calls to last about 2 ms
and closed by a synchronize; the cost is nanoseconds a call, launch included (what a model pays). The tuners, the
XGBoost model (on :meth:`GpuConvSpace.features`) and the log loop are the accelerator's and the llvm target's.

Log lines have the llvm records' fields with ``"target": "cuda"`` and ``"gpu": {"name", "arch"}`` (the device a
record was measured on: a record is used only on a device of that name and architecture; the emulated device,
``VTA_CUDA_DEVICE=emulate``, is a device of its own, so its CPU timings never steer a GPU build).
``build(..., target="cuda", tuning_log=)`` applies a log (:func:`logged_faster`): per task, its fastest usable
record, kept where it runs at least :data:`~compiler.autotune.llvm_conv.MIN_GAIN` faster than the default knobs
when both are timed alternately on the device at build time (a log never makes a task slower).
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from compiler.autotune.conv_task import (FloatConvTask, KnobGrid, distinct_tasks, fastest_usable, knobs_from,
                                        measure_task, node_conv, other_target, warn_log)
from compiler.autotune.llvm_conv import MIN_GAIN, MIN_RUN_S, REPEATS
from compiler.autotune.measure import Result, _Measurer
from compiler.autotune.records import FORMAT, log_lines
from compiler.topi import conv2d_gpu as cg
from compiler.topi.conv2d_gpu import GpuConvKnobs

Point = tuple[int, ...]
TILE_CHOICES = (4, 8, 16, 32, 64, 128)
THREAD_TILE_CHOICES = (1, 2, 4, 8)
RK_CHOICES = (4, 8, 16)
SPLIT_CHOICES = (1, 2, 4, 8, 16)
MAX_ACCUMULATORS = 64  # vo x vp registers of accumulators a thread may hold (beyond: spills on every GPU)


def device_ident() -> dict:
    """The device records are keyed by: its name and architecture (``{"name": "emulate", ...}`` when emulated)."""
    from compiler.backend.cuda.device import get_device

    dev = get_device()
    return {"name": dev.name, "arch": dev.arch}


@dataclass(frozen=True)
class CudaConvTask(FloatConvTask):
    """One float conv2d as the cuda target compiles it: geometry ``spec``, its fused epilogue (``bias``,
    ``residual``, ``act`` with ``act_params``), and the node's ``name`` (not part of the identity)."""

    OP = "conv2d_float_gpu"
    DROP = ("oc_block", "pixel_tile", "pad_value", "in_block", "pixel_vectors", "row_tile", "dtype")

    def __post_init__(self) -> None:
        if self.spec.dtype != "float32" or not cg.gpu_conv_ok(self.spec):
            raise ValueError(f"cuda conv tasks are float32 convolutions of one group, got dtype {self.spec.dtype}, "
                             f"groups {self.spec.groups}")

    def label(self) -> str:
        return "gpu conv"

    def make_space(self) -> "GpuConvSpace":
        return GpuConvSpace(self)

    def default_knobs(self) -> GpuConvKnobs:
        """The knobs a build without a log uses (:func:`compiler.topi.conv2d_gpu.default_knobs`)."""
        return cg.default_knobs(self.spec)

    def kernel(self, knobs: GpuConvKnobs):
        """The compiled kernel with ``knobs`` (a ``CudaOp``)."""
        from compiler.backend.build import build_op
        from compiler.schedule import create_schedule

        op = cg.conv2d(self.spec, knobs, self.bias, self.residual, self.act, self.act_params)
        s = create_schedule(op.out)
        cg.schedule_gpu(op, s)
        return build_op(s, args=op.inputs + [op.out], target="cuda", name="conv2d_gpu_tune")

    def inputs(self, knobs: GpuConvKnobs, seed: int = 0) -> list[np.ndarray]:
        """Seeded random arguments of the kernel with ``knobs`` (the weight packed for its split)."""
        s = self.spec
        rng = np.random.default_rng(seed)
        w = rng.standard_normal((s.o, s.c, s.kh, s.kw)).astype(np.float32)
        out = [rng.standard_normal((s.n, s.c, s.h, s.w)).astype(np.float32), cg.pack_weight(s, w, knobs)]
        if self.bias:
            out.append(rng.standard_normal(s.o).astype(np.float32))
        if self.residual:
            out.append(rng.standard_normal(cg.output_shape(s)).astype(np.float32))
        return out

    def bound_call(self, knobs: GpuConvKnobs) -> tuple[Callable[[], None], object]:
        """``(call, device)``: the kernel with ``knobs`` on its seeded inputs, uploaded once (pinned), its output
        kept on the device (a mirrored host buffer, as a model's arena), as a model calls it."""
        from compiler.backend.cuda.device import get_device
        from compiler.backend.cuda.mirror import mirror_host_buffer

        fn = self.kernel(knobs)
        args = self.inputs(knobs)
        fn.pin(*args)
        shape = cg.output_shape(self.spec)
        arena = np.empty(math.prod(shape) * 4, np.uint8)
        mirror_host_buffer(arena)
        out = arena.view(np.float32).reshape(shape)

        def call() -> None:
            fn(*args, out=out)
        call.keep = (fn, args, arena)  # type: ignore[attr-defined]  (alive while the call is)
        return call, get_device()

    def measure_cost(self, knobs: GpuConvKnobs, repeats: int = REPEATS) -> int:
        """Median nanoseconds a call of the kernel with ``knobs`` (see the module docstring)."""
        call, dev = self.bound_call(knobs)
        return time_device_call(call, dev, repeats)

    def record_line(self, knobs: GpuConvKnobs, res: Result, tuner: str = "") -> str:
        """The JSON line of one trial (see the module docstring)."""
        result = None if res.cycles is None else {"ns": int(res.cycles), "gflops": round(self.rate(res.cycles), 4)}
        return json.dumps({"vta_tuning": FORMAT, "target": "cuda", "gpu": device_ident(), "task": self.ident,
                           "config": dataclasses.asdict(knobs), "result": result, "error": res.error,
                           "time": round(time.time(), 3), "seconds": round(res.seconds, 3), "tuner": tuner},
                          sort_keys=True)


def time_device_call(call: Callable[[], None], dev, repeats: int = REPEATS) -> int:
    """Median nanoseconds of ``call`` on ``dev``: a warm-up, then ``repeats`` runs of as many calls as last about
    :data:`~compiler.autotune.llvm_conv.MIN_RUN_S`, each ended by a synchronize."""
    call()
    dev.synchronize()
    t0 = time.perf_counter()
    call()
    dev.synchronize()
    number = max(1, min(1000, int(MIN_RUN_S / max(time.perf_counter() - t0, 1e-7))))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        dev.synchronize()
        runs.append((time.perf_counter() - t0) / number)
    return max(1, int(round(float(np.median(runs)) * 1e9)))


def task_of_node(node, infos) -> CudaConvTask | None:
    """The task of a ``Conv``/``FusedConv`` graph node (``infos``: its inputs' TensorInfos), or None when the cuda
    target does not tune it (not a float32 2-D conv of one group)."""
    conv = node_conv(node, infos)
    if conv is None or not cg.gpu_conv_ok(conv[0]) or conv[0].dtype != "float32":
        return None
    return CudaConvTask(conv[0], *conv[1], node.name)


def graph_tasks(g) -> list[CudaConvTask]:
    """Distinct tunable conv tasks of graph ``g`` (after epilogue fusion), in graph order."""
    return distinct_tasks(g, task_of_node)


class GpuConvSpace(KnobGrid):
    """All knob settings of one :class:`CudaConvTask`: bo x bp x vo x vp x rk x split (see the module docstring)."""

    KNOBS = GpuConvKnobs
    structure_axis = 5  # split: one kernel or two, and the grid's size
    structure_share = 1.0
    stepped_axes = (0, 1, 2, 3, 4, 5)  # every knob is an ordered size

    def __init__(self, task: CudaConvTask) -> None:
        self._axes(task, [("bo", list(TILE_CHOICES)), ("bp", list(TILE_CHOICES)), ("vo", list(THREAD_TILE_CHOICES)),
                          ("vp", list(THREAD_TILE_CHOICES)), ("rk", list(RK_CHOICES)), ("split", list(SPLIT_CHOICES))])

    def reject(self, k: GpuConvKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        s = self.task.spec
        try:
            k.check(s)
        except Exception as exc:  # noqa: BLE001 - the knob's own message
            return f"bad knob: {exc}"
        if k.vo * k.vp > MAX_ACCUMULATORS:
            return f"{k.vo * k.vp} accumulators a thread (at most {MAX_ACCUMULATORS})"
        p = s.oh * s.ow
        if (k.bo > TILE_CHOICES[0] and k.bo // 2 >= s.o) or (k.bp > TILE_CHOICES[0] and k.bp // 2 >= p):
            return "a block tile the half of which covers the output (the same program as that smaller tile)"
        if (k.vo > 1 and k.vo // 2 >= min(k.bo, s.o)) or (k.vp > 1 and k.vp // 2 >= min(k.bp, p)):
            return "a thread tile the half of which covers the block tile (the same program as that smaller tile)"
        return None

    def features(self, k: GpuConvKnobs) -> np.ndarray:
        """Analytic, scale-free features: knobs, threads, registers, shared memory, waste, blocks, reduction."""
        s = self.task.spec
        p, kk = s.oh * s.ow, cg.reduction(s)
        bo, bp = min(k.bo, s.o), min(k.bp, p)
        tiles_o, tiles_p = -(-s.o // bo), -(-p // bp)
        blocks = tiles_o * tiles_p * s.n * k.split
        waste = tiles_o * bo * tiles_p * bp / (s.o * p) - 1.0
        part = -(-kk // k.split)
        chunks = -(-part // k.rk)
        lg = lambda x: math.log2(max(float(x), 1.0))  # noqa: E731
        feats = [lg(k.bo), lg(k.bp), lg(k.vo), lg(k.vp), lg(k.rk), lg(k.split), lg(k.threads),
                 float(k.vo * k.vp), (k.vo * k.vp) / (k.vo + k.vp),  # FMAs per shared load
                 lg(4 * k.rk * (k.bo + k.bp)), waste, lg(blocks), lg(blocks * k.threads), lg(part), lg(chunks),
                 (bo * bp) / (bo + bp),  # FMAs per element staged in shared memory
                 float(k.split > 1) * lg(s.n * s.o * p * k.split),  # the partial sums' traffic
                 lg(s.c), lg(s.o), lg(s.oh), lg(s.ow), float(s.kh * s.kw), float(s.stride[0]), lg(s.macs),
                 float(self.task.residual)]
        return np.asarray(feats, dtype=np.float32)


class CudaMeasurer(_Measurer):
    """Time candidates in this process on this process's device, one after the other (kernels timed side by side
    would share the GPU)."""

    def __init__(self) -> None:
        from compiler.backend.cuda.device import get_device
        from compiler.scaleout import LoopRunner

        get_device()  # no device: NoGpuError now, before any tuning
        self._runner = LoopRunner()
        self.workers = 1

    def __call__(self, task: CudaConvTask, batch: list[GpuConvKnobs]) -> list[Result]:
        return self._runner.map(measure_task, batch, (task,))


_warn = warn_log


def load_cuda_records(path: str | Path) -> list[tuple[dict, GpuConvKnobs, int, str]]:
    """``(task identity, knobs, ns, FILE:LINE)`` of every timed cuda record for this process's device in the log at
    ``path``; other lines (bad JSON, malformed, other devices or targets) are skipped with a warning."""
    want = device_ident()
    out = []
    for where, obj in log_lines(path):
        if not isinstance(obj, dict) or obj.get("vta_tuning") != FORMAT:
            _warn(f"{where}: not a vta-stack tuning record of format {FORMAT}; skipped")
            continue
        if obj.get("target") != "cuda":
            _warn(f"{where}: {other_target(obj, 'cuda')}; skipped")
            continue
        gpu = obj.get("gpu")
        if gpu != want:
            _warn(f"{where}: record for device {gpu!r}, but this build runs on {want!r}; skipped")
            continue
        if obj.get("result") is None:
            continue
        try:
            knobs = knobs_from(obj["config"], GpuConvKnobs)
            ident = obj["task"]
            if not isinstance(ident, dict):
                raise TypeError("task must be an object")
            ns = int(obj["result"]["ns"])
            if ns <= 0:
                raise ValueError(f"ns {ns} must be > 0")
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            _warn(f"{where}: malformed cuda tuning record ({type(exc).__name__}: {exc}); skipped")
            continue
        out.append((ident, knobs, ns, where))
    return out


def logged_knobs(tasks: list[CudaConvTask], path: str | Path) -> dict[str, GpuConvKnobs]:
    """Task key -> knobs of its fastest usable record in the log (warns for unknown tasks, unusable knobs, and
    tasks no record covers)."""
    return fastest_usable(tasks, load_cuda_records(path), path, "cuda")


def faster_than_default(task: CudaConvTask, knobs: GpuConvKnobs, rounds: int = 5) -> tuple[bool, int, int]:
    """Time ``knobs`` against the default knobs on the device, alternating ``rounds`` times (min of each side's
    medians): ``(knobs faster by at least MIN_GAIN, knobs ns, default ns)``; knobs equal to the default:
    ``(False, 0, 0)``, not timed."""
    default = task.default_knobs()
    if knobs == default:
        return False, 0, 0
    (mine, dev), (theirs, _) = task.bound_call(knobs), task.bound_call(default)
    a, b = [], []
    for _ in range(rounds):
        a.append(time_device_call(mine, dev))
        b.append(time_device_call(theirs, dev))
    return min(a) <= (1.0 - MIN_GAIN) * min(b), min(a), min(b)


def logged_faster(graph, path: str | Path) -> dict[str, GpuConvKnobs]:
    """Task key -> logged knobs for the tunable convs of ``graph`` that run faster than the default on this device,
    here and now (:func:`faster_than_default`)."""
    tasks = graph_tasks(graph)
    chosen = logged_knobs(tasks, path)
    return {t.key: chosen[t.key] for t in tasks if t.key in chosen and faster_than_default(t, chosen[t.key])[0]}


def use_knobs(backend, knobs: dict[str, GpuConvKnobs]) -> None:
    """Make ``backend`` (a ``TargetCpuBackend`` for cuda, before ``prepare``) compile the convs whose task key is in
    ``knobs`` with those knobs (the others with the default)."""
    def lookup(node, infos) -> GpuConvKnobs | None:
        t = task_of_node(node, infos)
        return None if t is None else knobs.get(t.key)
    backend.tuned = lookup
