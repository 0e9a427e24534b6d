"""Tuning the cuda target's tiled schedule (:func:`compiler.topi.conv2d_gpu.schedule_tiled`: convs and GEMMs) on
the device.

A task is one float conv2d of one group as ``build(model, target="cuda")`` compiles it (:class:`CudaConvTask`: a
``Conv``/``FusedConv`` node after epilogue fusion: geometry, bias, fused residual, activation) or one product it
compiles to the tiled GEMM (:class:`CudaGemmTask`: a dense layer over many rows or an attention MatMul,
:mod:`compiler.topi.gemm_gpu`, whose knobs are the conv's). Its space (:class:`GpuTileSpace`) is the product of the
schedule's knobs (:class:`~compiler.topi.conv2d_gpu.GpuConvKnobs`): the block tile's output channels (a
product: rows) ``bo`` and pixels (columns) ``bp`` (4-128), each thread's ``vo`` x ``vp`` accumulators (1-8 each,
at most 64 registers of them), the shared-memory chunk ``rk`` (4, 8, 16) and the split of the reduction
``split`` (1-16). A measurement compiles the kernel and times it on the device
(:func:`compiler.backend.cuda.device.get_device`): the weight and input uploaded once, the output left on the
device, one warm-up call, then the median of ``repeats`` timed runs, each of enough calls to last about 2 ms
and closed by a synchronize; the cost is nanoseconds a call, launch included (what a model pays). The tuners, the
XGBoost model (on :meth:`GpuTileSpace.features`) and the log loop are the accelerator's and the llvm target's.
The convs the tiled kernel does not take (depthwise and other grouped convs) and the pools are tasks too, on
their own schedules' knobs (:mod:`compiler.autotune.cuda_direct`); :func:`graph_tasks` returns them all.

Log lines have the llvm records' fields with ``"target": "cuda"`` and ``"gpu": {"name", "arch"}`` (the device a
record was measured on: a record is used only on a device of that name and architecture; the emulated device,
``VTA_CUDA_DEVICE=emulate``, is a device of its own, so its CPU timings never steer a GPU build).
``build(..., target="cuda", tuning_log=)`` applies a log (:func:`logged_faster`): per task, its fastest usable
record, kept where it runs at least :data:`~compiler.autotune.llvm_conv.MIN_GAIN` faster than the default knobs
when both are timed alternately on the device at build time (a log never makes a task slower).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.autotune.conv_task import (FloatConvTask, InProcessMeasurer, KnobGrid, distinct_tasks, fastest_usable,
                                        knobs_from, node_conv, other_target)
from compiler.autotune.cuda_direct import POOL_OP, CudaDepthwiseTask, direct_task_of_node, pool_task_of_node
from compiler.autotune.device_timed import GPU_SPEC_DROP, DeviceTimed, device_ident, lg, time_device_call
from compiler.autotune.llvm_conv import MIN_GAIN
from compiler.autotune.product_task import FloatProductTask
from compiler.autotune.records import FORMAT, SkippedLines, log_lines
from compiler.topi import conv2d_gpu as cg
from compiler.topi import gemm_gpu
from compiler.topi.conv2d_direct import DirectGpuKnobs
from compiler.topi.conv2d_gpu import GpuConvKnobs
from compiler.topi.pool import PoolGpuKnobs

Point = tuple[int, ...]
TILE_CHOICES = (4, 8, 16, 32, 64, 128)
THREAD_TILE_CHOICES = (1, 2, 4, 8)
RK_CHOICES = (4, 8, 16)
SPLIT_CHOICES = (1, 2, 4, 8, 16)
MAX_ACCUMULATORS = 64  # vo x vp registers of accumulators a thread may hold (beyond: spills on every GPU)


class _TiledTask(DeviceTimed):
    """A task of the tiled schedule (a conv or a product): its space is :class:`GpuTileSpace`; it gives
    ``product()`` (rows, columns, reduction, batch of the tiled product), ``geometry()`` (8 features) and
    ``check_knobs(knobs)``."""

    def make_space(self) -> "GpuTileSpace":
        return GpuTileSpace(self)


@dataclass(frozen=True)
class CudaConvTask(_TiledTask, FloatConvTask):
    """One float conv2d as the cuda target compiles it: geometry ``spec``, its fused epilogue (``bias``,
    ``residual``, ``act`` with ``act_params``), and the node's ``name`` (not part of the identity)."""

    OP = "conv2d_float_gpu"
    DROP = GPU_SPEC_DROP

    def __post_init__(self) -> None:
        if self.spec.dtype != "float32" or not cg.gpu_conv_ok(self.spec):
            raise ValueError(f"cuda conv tasks are float32 convolutions of one group, got dtype {self.spec.dtype}, "
                             f"groups {self.spec.groups}")

    def label(self) -> str:
        return "gpu conv"

    def default_knobs(self) -> GpuConvKnobs:
        """The knobs a build without a log uses (:func:`compiler.topi.conv2d_gpu.default_knobs`)."""
        return cg.default_knobs(self.spec)

    def check_knobs(self, knobs: GpuConvKnobs) -> None:
        knobs.check(self.spec)

    def product(self) -> tuple[int, int, int, int]:
        s = self.spec
        return s.o, s.oh * s.ow, cg.reduction(s), s.n

    def geometry(self) -> list[float]:
        s = self.spec
        return [lg(s.c), lg(s.o), lg(s.oh), lg(s.ow), float(s.kh * s.kw), float(s.stride[0]), lg(s.macs),
                float(self.residual)]

    def out_shape(self) -> tuple[int, ...]:
        return cg.output_shape(self.spec)

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


@dataclass(frozen=True)
class CudaGemmTask(_TiledTask, FloatProductTask):
    """One float product as the cuda target compiles it (:mod:`compiler.topi.gemm_gpu`; see
    :class:`~compiler.autotune.product_task.FloatProductTask`): a dense layer over a transformer's tokens or an
    attention MatMul."""

    OP = "gemm_float_gpu"
    LABEL = "gpu gemm"
    TARGET = "cuda"
    PLAN = "gemm_gpu"

    def default_knobs(self) -> GpuConvKnobs:
        return gemm_gpu.default_knobs(self.a, self.b)

    def check_knobs(self, knobs: GpuConvKnobs) -> None:
        knobs.check_product(self.a[-1])

    def product(self) -> tuple[int, int, int, int]:
        m, k, n, batch = self.dims()
        return m, n, k, batch

    def geometry(self) -> list[float]:
        m, n, k, batch = self.product()
        return [lg(k), lg(m), lg(n), lg(batch), 1.0, 1.0, lg(self.macs()), 0.0]

    def kernel(self, knobs: GpuConvKnobs):
        """The compiled kernel with ``knobs`` (a ``CudaOp``)."""
        from compiler.backend.build import build_op
        from compiler.schedule import create_schedule

        op = gemm_gpu.gemm(self.a, self.b, knobs, bias=self.bias, act=self.act, act_params=self.act_params)
        s = create_schedule(op.out)
        gemm_gpu.schedule_gpu(op, s)
        return build_op(s, args=op.inputs + [op.out], target="cuda", name="gemm_gpu_tune")


def task_of_node(node, infos) -> CudaConvTask | None:
    """The task of a ``Conv``/``FusedConv`` graph node (``infos``: its inputs' TensorInfos), or None when the cuda
    target does not tune it (not a float32 2-D conv of one group)."""
    conv = node_conv(node, infos)
    if conv is None or not cg.gpu_conv_ok(conv[0]) or conv[0].dtype != "float32":
        return None
    return CudaConvTask(conv[0], *conv[1], node.name)


def gemm_task_of_node(node, infos, consts) -> CudaGemmTask | None:
    """The task of a product node that the cuda target compiles to the tiled GEMM, or None
    (:meth:`~compiler.autotune.product_task.FloatProductTask.of_node`)."""
    return CudaGemmTask.of_node(node, infos, consts)


def graph_tasks(g) -> list:
    """Distinct tunable tasks of graph ``g`` (after epilogue fusion), in graph order: its one-group convs, its
    products, its grouped convs, then its pools."""
    consts = g.constants
    return (distinct_tasks(g, task_of_node) + distinct_tasks(g, lambda n, infos: gemm_task_of_node(n, infos, consts))
            + distinct_tasks(g, direct_task_of_node)
            + distinct_tasks(g, lambda n, infos: pool_task_of_node(n, infos, consts)))


class GpuTileSpace(KnobGrid):
    """All knob settings of one cuda task (a conv or a product): bo x bp x vo x vp x rk x split (see the module
    docstring)."""

    KNOBS = GpuConvKnobs
    structure_axis = 5  # split: one kernel or two, and the grid's size
    structure_share = 1.0
    stepped_axes = (0, 1, 2, 3, 4, 5)  # every knob is an ordered size

    def __init__(self, task) -> None:
        self._axes(task, [("bo", list(TILE_CHOICES)), ("bp", list(TILE_CHOICES)), ("vo", list(THREAD_TILE_CHOICES)),
                          ("vp", list(THREAD_TILE_CHOICES)), ("rk", list(RK_CHOICES)), ("split", list(SPLIT_CHOICES))])
        self.rows, self.cols, self.depth, self.batch = task.product()

    def reject(self, k: GpuConvKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        why = self.knob_error(lambda: self.task.check_knobs(k))
        if why:
            return why
        if k.vo * k.vp > MAX_ACCUMULATORS:
            return f"{k.vo * k.vp} accumulators a thread (at most {MAX_ACCUMULATORS})"
        rows, cols = self.rows, self.cols
        if (k.bo > TILE_CHOICES[0] and k.bo // 2 >= rows) or (k.bp > TILE_CHOICES[0] and k.bp // 2 >= cols):
            return "a block tile the half of which covers the output (the same program as that smaller tile)"
        if (k.vo > 1 and k.vo // 2 >= min(k.bo, rows)) or (k.vp > 1 and k.vp // 2 >= min(k.bp, cols)):
            return "a thread tile the half of which covers the block tile (the same program as that smaller tile)"
        return None

    def features(self, k: GpuConvKnobs) -> np.ndarray:
        """Analytic, scale-free features: knobs, threads, registers, shared memory, waste, blocks, reduction, and the
        task's geometry (convs and products alike, slot by slot, so one model learns both)."""
        rows, cols, kk = self.rows, self.cols, self.depth
        bo, bp = min(k.bo, rows), min(k.bp, cols)
        tiles_o, tiles_p = -(-rows // bo), -(-cols // bp)
        blocks = tiles_o * tiles_p * self.batch * k.split
        waste = tiles_o * bo * tiles_p * bp / (rows * cols) - 1.0
        part = -(-kk // k.split)
        chunks = -(-part // k.rk)
        feats = [lg(k.bo), lg(k.bp), lg(k.vo), lg(k.vp), lg(k.rk), lg(k.split), lg(k.threads),
                 float(k.vo * k.vp), (k.vo * k.vp) / (k.vo + k.vp),  # FMAs per shared load
                 lg(4 * k.rk * (k.bo + k.bp)), waste, lg(blocks), lg(blocks * k.threads), lg(part), lg(chunks),
                 (bo * bp) / (bo + bp),  # FMAs per element staged in shared memory
                 float(k.split > 1) * lg(self.batch * rows * cols * k.split),  # the partial sums' traffic
                 *self.task.geometry()]
        return np.asarray(feats, dtype=np.float32)


class CudaMeasurer(InProcessMeasurer):
    """Time candidates in this process on this process's device, one after the other (kernels timed side by side
    would share the GPU)."""

    def __init__(self) -> None:
        from compiler.backend.cuda.device import get_device

        get_device()  # no device: NoGpuError now, before any tuning
        super().__init__()


# a record's task op -> the knob class its config is read with
RECORD_KNOBS: dict[str, type] = {CudaConvTask.OP: GpuConvKnobs, CudaGemmTask.OP: GpuConvKnobs,
                                 CudaDepthwiseTask.OP: DirectGpuKnobs, POOL_OP: PoolGpuKnobs}


def load_cuda_records(path: str | Path) -> list[tuple[dict, object, int, str]]:
    """``(task identity, knobs, ns, FILE:LINE)`` of every timed cuda record for this process's device in the log at
    ``path``, the knobs of the class of the task's op (:data:`RECORD_KNOBS`); other lines (bad JSON, malformed,
    unknown ops, other devices or targets) are skipped with a warning."""
    want = device_ident()
    out = []
    skipped = SkippedLines()
    for where, obj in log_lines(path, skipped):
        if not isinstance(obj, dict) or obj.get("vta_tuning") != FORMAT:
            skipped.add(where, f"not a vta-stack tuning record of format {FORMAT}")
            continue
        if obj.get("target") != "cuda":
            skipped.add(where, other_target(obj, "cuda"))
            continue
        gpu = obj.get("gpu")
        if gpu != want:
            skipped.add(where, f"record for device {gpu!r}, but this build runs on {want!r}")
            continue
        if obj.get("result") is None:
            continue
        try:
            ident = obj["task"]
            if not isinstance(ident, dict):
                raise TypeError("task must be an object")
            op = ident["op"]
            if not isinstance(op, str):
                raise TypeError(f"task op must be a string, got {op!r}")
            if op not in RECORD_KNOBS:
                skipped.add(where, f"cuda tuning record of an unknown task op {op!r} (known: {sorted(RECORD_KNOBS)})")
                continue
            if not isinstance(obj["config"], dict):
                raise TypeError("config must be an object")
            knobs = knobs_from(obj["config"], RECORD_KNOBS[op])
            ns = int(obj["result"]["ns"])
            if ns <= 0:
                raise ValueError(f"ns {ns} must be > 0")
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            skipped.add(where, f"malformed cuda tuning record ({type(exc).__name__}: {exc})")
            continue
        out.append((ident, knobs, ns, where))
    skipped.warn()
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
    """Task key -> logged knobs for the tasks of ``graph`` that run faster than the default on this device,
    here and now (:func:`faster_than_default`)."""
    tasks = graph_tasks(graph)
    chosen = logged_knobs(tasks, path)
    return {t.key: chosen[t.key] for t in tasks if t.key in chosen and faster_than_default(t, chosen[t.key])[0]}


def node_task(node, infos, consts):
    """The cuda task of a graph node (a one-group conv, a tiled product, a grouped conv or a pool), or None."""
    return (task_of_node(node, infos) or gemm_task_of_node(node, infos, consts) or direct_task_of_node(node, infos)
            or pool_task_of_node(node, infos, consts))


def use_knobs(backend, knobs: dict, graph) -> None:
    """Make ``backend`` (a ``TargetCpuBackend`` for cuda, before ``prepare``) compile the convs, products and pools
    of ``graph`` whose task key is in ``knobs`` with those knobs (the others with the default)."""
    consts = graph.constants

    def lookup(node, infos):
        t = node_task(node, infos, consts)
        return None if t is None else knobs.get(t.key)
    backend.tuned = lookup

