"""Tuning the cuda target's grouped convs and pools on the device (the tasks :func:`~compiler.autotune.cuda_conv.
graph_tasks` adds to the tiled kernel's convs and products).

:class:`CudaDepthwiseTask`: a float conv2d of more than one group (depthwise, or grouped: the convs
:mod:`compiler.topi.conv2d_gpu` does not take), compiled by :func:`compiler.topi.conv2d_direct.schedule_gpu`. Its
space (:class:`DirectGpuSpace`) is the product of :class:`~compiler.topi.conv2d_direct.DirectGpuKnobs`: the
layout's channel block ``ob`` (1-32, dividing the channels), at most ``threads`` threads a block (32-1024), each
thread's register tile of ``xt`` pixels (1, 2, 4, 8) x ``yt`` rows (1, 2, 4) and the taps unrolled or not.

:class:`CudaPoolTask`: a float ``MaxPool``, ``AveragePool`` or ``GlobalAveragePool`` (:func:`compiler.topi.pool.
schedule_gpu`); its space (:class:`PoolGpuSpace`) is the product of :class:`~compiler.topi.pool.PoolGpuKnobs`:
``threads`` (32-1024), ``vt`` outputs a thread (1, 2, 4, 8), ``axes`` ("flat", "plane"), ``fused`` and ``unroll``.

Both are measured, logged and applied as the tiled kernel's tasks (:class:`~compiler.autotune.cuda_conv.
DeviceTimed`: seeded inputs on the device, a warm-up, the median of repeats); their records' ``task.op`` is
``conv2d_direct_gpu`` / ``pool_float_gpu``, which :func:`~compiler.autotune.cuda_conv.load_cuda_records` reads with
the matching knob class. Each space has its own analytic features and transfer family (the XGB tuner learns a
family's tasks together, not with the tiled kernel's).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from compiler.autotune.conv_task import FloatConvTask, KnobGrid, node_conv
from compiler.autotune.device_timed import GPU_SPEC_DROP, DeviceTimed, lg
from compiler.autotune.pool_task import PoolWindows
from compiler.topi import conv2d_direct as cd
from compiler.topi import pool
from compiler.topi.conv2d_direct import DirectGpuKnobs
from compiler.topi.pool import PoolGpuKnobs, PoolSpec

OB_CHOICES = (1, 2, 4, 8, 16, 32)
THREAD_CHOICES = (32, 64, 128, 256, 512, 1024)
XT_CHOICES = (1, 2, 4, 8)
YT_CHOICES = (1, 2, 4)
VT_CHOICES = (1, 2, 4, 8)
MAX_UNROLLED_TAPS = 64  # a pool window unrolled beyond this many taps only grows the code
DIRECT_OP = "conv2d_direct_gpu"  # the task ops of their records
POOL_OP = "pool_float_gpu"


def _canonical_threads(threads: int, default: int, saturated) -> str | None:
    """Why a ``threads`` value gives the same program as another of the space, or None: ``saturated(t)`` says ``t``
    threads already cover the work (every larger value is the same program); of such a run of values the default
    is kept where it lies in it, else the smallest."""
    if threads > default and saturated(threads // 2):
        return "more threads than the work needs (the same program as half as many)"
    if threads < default and saturated(threads):
        return f"threads that already cover the work (the same program as {default})"
    return None


@dataclass(frozen=True)
class CudaDepthwiseTask(DeviceTimed, FloatConvTask):
    """One float conv2d of more than one group as the cuda target compiles it (:func:`compiler.topi.conv2d_direct.
    schedule_gpu`): geometry ``spec``, its fused epilogue, and the node's ``name`` (not part of the identity)."""

    OP = DIRECT_OP
    DROP = GPU_SPEC_DROP

    def __post_init__(self) -> None:
        s = self.spec
        if s.dtype != "float32" or s.groups < 2 or s.pixel_vectors or s.oc_block:
            raise ValueError(f"cuda grouped-conv tasks are float32 convolutions of more than one group in the plain "
                             f"layout, got dtype {s.dtype}, groups {s.groups}, oc_block {s.oc_block}")

    def label(self) -> str:
        return "gpu depthwise" if self.spec.depthwise else "gpu grouped conv"

    def default_knobs(self) -> DirectGpuKnobs:
        """The knobs of a build without a log (:func:`compiler.topi.conv2d_direct.default_gpu_knobs`)."""
        return cd.default_gpu_knobs(self.spec)

    def check_knobs(self, knobs: DirectGpuKnobs) -> None:
        if not isinstance(knobs, DirectGpuKnobs):
            raise TypeError(f"{self.describe()} takes DirectGpuKnobs, got {type(knobs).__name__}")
        knobs.check(self.spec)

    def make_space(self) -> "DirectGpuSpace":
        return DirectGpuSpace(self)

    def out_shape(self) -> tuple[int, ...]:
        return cd.output_shape(self.spec)

    def out_shape_for(self, knobs: DirectGpuKnobs) -> tuple[int, ...]:
        return cd.output_shape(knobs.apply(self.spec))

    def kernel(self, knobs: DirectGpuKnobs):
        """The compiled kernel with ``knobs`` (a ``CudaOp``)."""
        from compiler.backend.build import build_op
        from compiler.schedule import create_schedule

        spec = knobs.apply(self.spec)
        op = cd.conv2d(spec, self.bias, self.residual, self.act, self.act_params)
        s = create_schedule(op.out)
        cd.schedule_gpu(op, s, knobs)
        return build_op(s, args=op.inputs + [op.out], target="cuda", name="conv2d_direct_gpu_tune")

    def inputs(self, knobs: DirectGpuKnobs, seed: int = 0) -> list[np.ndarray]:
        """Seeded random arguments of the kernel with ``knobs`` (the weight packed for its channel block)."""
        s = knobs.apply(self.spec)
        rng = np.random.default_rng(seed)
        w = rng.standard_normal((s.o, s.cg, s.kh, s.kw)).astype(np.float32)
        out = [rng.standard_normal((s.n, s.c, s.h, s.w)).astype(np.float32), cd.pack_weight(s, w)]
        if self.bias:
            out.append(rng.standard_normal(s.o).astype(np.float32))
        if self.residual:
            out.append(rng.standard_normal(cd.output_shape(s)).astype(np.float32))
        return out


class DirectGpuSpace(KnobGrid):
    """All knob settings of one :class:`CudaDepthwiseTask`: ob x threads x xt x yt x unroll (see the module
    docstring), the values that cannot fit the layer left out."""

    KNOBS = DirectGpuKnobs
    structure_axis = 2  # xt: one output a thread or a register tile
    structure_share = 0.5
    stepped_axes = (0, 1, 2, 3)  # ordered sizes; unroll jumps
    transfer_family = "cuda_direct"

    def __init__(self, task: CudaDepthwiseTask) -> None:
        s = task.spec
        per = s.o if s.depthwise else s.og
        self._axes(task, [("ob", [b for b in OB_CHOICES if per % b == 0]), ("threads", list(THREAD_CHOICES)),
                          ("xt", [x for x in XT_CHOICES if x <= s.ow]), ("yt", [y for y in YT_CHOICES if y <= s.oh]),
                          ("unroll", [False, True])])

    def reject(self, k: DirectGpuKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        s = self.task.spec
        why = self.knob_error(lambda: self.task.check_knobs(k))
        if why:
            return why
        tiles = -(-s.ow // k.xt)
        why = _canonical_threads(k.threads, cd.GPU_THREADS, lambda t: t // k.ob >= tiles)
        if why:
            return why
        if k.unroll and s.kh * s.kw == 1:
            return "unroll of a 1x1 kernel (the same program as unroll=False)"
        return None

    def features(self, k: DirectGpuKnobs) -> np.ndarray:
        """Analytic, scale-free features: knobs, the block's threads and warp fill, blocks, waste, accumulators, input
        loads per MAC of a register tile, unrolled body size, and the layer's geometry."""
        s = self.task.spec
        cols = k.columns(s)
        threads = cols * k.ob
        xblocks = -(-(-(-s.ow // k.xt)) // cols)
        yblocks = -(-s.oh // k.yt)
        blocks = s.n * (s.o // k.ob) * xblocks * yblocks
        waste = (xblocks * cols * k.xt) * (yblocks * k.yt) / (s.ow * s.oh) - 1.0
        acc = k.xt * k.yt
        span_x = (k.xt - 1) * s.stride[1] + (s.kw - 1) * s.dilations[1] + 1
        span_y = (k.yt - 1) * s.stride[0] + (s.kh - 1) * s.dilations[0] + 1
        loads = span_x * span_y / (acc * s.kh * s.kw)  # distinct input loads a MAC (reuse within the tile)
        taps = s.kh * s.kw
        feats = [lg(k.ob), lg(k.threads), lg(k.xt), lg(k.yt), float(k.unroll), lg(threads),
                 threads / (32 * -(-threads // 32)), lg(blocks), lg(blocks * threads), waste, float(acc), loads,
                 float(k.unroll) * taps * acc, lg(s.c), lg(s.o), lg(s.oh), lg(s.ow), float(taps),
                 float(s.stride[0]), lg(s.macs), float(self.task.residual), float(s.depthwise), lg(s.cg)]
        return np.asarray(feats, dtype=np.float32)


@dataclass(frozen=True)
class CudaPoolTask(PoolWindows, DeviceTimed):
    """One float pool as the cuda target compiles it (:func:`compiler.topi.pool.schedule_gpu`): ``kind``
    (``MaxPool``, ``AveragePool``, ``GlobalAveragePool``: ``spec`` one window over the whole plane), its geometry
    ``spec``, ``count_include_pad`` (average) and the node's ``name`` (not part of the identity)."""

    kind: str
    spec: PoolSpec
    count_include_pad: bool = False
    name: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        s = self.spec
        if self.kind not in pool.FLOAT_POOLS:
            raise ValueError(f"cuda pool tasks are {', '.join(pool.FLOAT_POOLS)}, got {self.kind!r}")
        if min(s.n, s.c, s.h, s.w, s.kh, s.kw, s.oh, s.ow, *s.stride) < 1 or min(s.pads) < 0:
            raise ValueError(f"cuda pool task: sizes, window, strides and output must be >= 1, pads >= 0, got {s}")
        if self.kind == "GlobalAveragePool" and (s.kh, s.kw, s.oh, s.ow) != (s.h, s.w, 1, 1):
            raise ValueError(f"a GlobalAveragePool task's window is its {s.h}x{s.w} plane (output 1x1), got {s}")

    @property
    def ident(self) -> dict:
        return {"op": POOL_OP, "kind": self.kind, "spec": dataclasses.asdict(self.spec),
                "count_include_pad": self.count_include_pad}

    def describe(self) -> str:
        s = self.spec
        win = "" if self.kind == "GlobalAveragePool" else f" {s.kh}x{s.kw}/{s.stride[0]}"
        return f"{self.name + ': ' if self.name else ''}gpu {self.kind}{win} {s.c}ch {s.h}x{s.w}"

    def default_knobs(self) -> PoolGpuKnobs:
        """The knobs of a build without a log (the untuned schedule)."""
        return PoolGpuKnobs()

    def check_knobs(self, knobs: PoolGpuKnobs) -> None:
        if not isinstance(knobs, PoolGpuKnobs):
            raise TypeError(f"{self.describe()} takes PoolGpuKnobs, got {type(knobs).__name__}")
        knobs.check()

    def make_space(self) -> "PoolGpuSpace":
        return PoolGpuSpace(self)

    def stages(self) -> int:
        """Stages of the compute: 1 (max) or 2 (window sums, then the division)."""
        return 1 if self.kind == "MaxPool" else 2

    def out_shape(self) -> tuple[int, ...]:
        s = self.spec
        return s.n, s.c, s.oh, s.ow

    def kernel(self, knobs: PoolGpuKnobs):
        """The compiled kernel with ``knobs`` (a ``CudaOp``)."""
        from compiler.backend.build import build_op
        from compiler.schedule import create_schedule

        ins, y, stages = pool.float_pool(self.kind, self.spec, self.count_include_pad)
        s = create_schedule(y)
        pool.schedule_gpu(s, stages, knobs)
        return build_op(s, args=ins + [y], target="cuda", name="pool_gpu_tune")

    def inputs(self, knobs: PoolGpuKnobs, seed: int = 0) -> list[np.ndarray]:
        s = self.spec
        return [np.random.default_rng(seed).standard_normal((s.n, s.c, s.h, s.w)).astype(np.float32)]


class PoolGpuSpace(KnobGrid):
    """All knob settings of one :class:`CudaPoolTask`: threads x vt x axes x fused x unroll (see the module
    docstring)."""

    KNOBS = PoolGpuKnobs
    structure_axis = 2  # axes: what the blocks run over
    structure_share = 1.0
    stepped_axes = (0, 1)  # threads, vt; the others jump
    transfer_family = "cuda_pool"

    def __init__(self, task: CudaPoolTask) -> None:
        self._axes(task, [("threads", list(THREAD_CHOICES)), ("vt", list(VT_CHOICES)), ("axes", list(pool.POOL_AXES)),
                          ("fused", [False, True]), ("unroll", [False, True])])

    def extent(self, k: PoolGpuKnobs) -> int:
        """Outputs one range of blocks x threads covers: all of them (flat) or one plane's."""
        s = self.task.spec
        return s.oh * s.ow * (1 if k.axes == "plane" else s.n * s.c)

    def reject(self, k: PoolGpuKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        s = self.task.spec
        why = self.knob_error(lambda: self.task.check_knobs(k))
        if why:
            return why
        taps = s.kh * s.kw
        if k.fused and self.task.stages() == 1:
            return "fused with a one-stage pool (the same program as fused=False)"
        if k.unroll and taps == 1:
            return "unroll of a one-tap window (the same program as unroll=False)"
        if k.unroll and taps > MAX_UNROLLED_TAPS:
            return f"unroll of a {taps}-tap window (at most {MAX_UNROLLED_TAPS})"
        if k.axes == "plane" and s.oh * s.ow < 32:
            return f"blocks over planes of {s.oh * s.ow} outputs (less than a warp a block)"
        e = self.extent(k)
        if k.vt > 1 and k.vt // 2 >= e:
            return "more outputs a thread than there are (the same program as half as many)"
        rest = -(-e // min(k.vt, e))
        return _canonical_threads(k.threads, pool.POOL_GPU_THREADS, lambda t: t >= rest)

    def features(self, k: PoolGpuKnobs) -> np.ndarray:
        """Analytic, scale-free features: knobs, the block's threads, blocks, waste, kernels, the window and the
        pool's geometry and kind."""
        t, s = self.task, self.task.spec
        e = self.extent(k)
        vt = min(k.vt, e)
        rest = -(-e // vt)
        threads = min(k.threads, rest)
        planes = s.n * s.c if k.axes == "plane" else 1
        blocks = -(-rest // threads) * planes
        waste = blocks * threads * vt / (s.n * s.c * s.oh * s.ow) - 1.0
        taps = s.kh * s.kw
        kernels = t.stages() - (1 if k.fused and t.stages() == 2 else 0)
        feats = [lg(k.threads), lg(k.vt), float(k.axes == "plane"), float(k.fused), float(k.unroll), lg(threads),
                 lg(blocks), lg(blocks * threads), waste, float(kernels), lg(taps), float(k.unroll) * taps * vt,
                 float(s.stride[0]), taps / (s.stride[0] * s.stride[1]),  # input reads an output, relative
                 *(float(t.kind == p) for p in pool.FLOAT_POOLS), lg(s.n * s.c), lg(s.oh * s.ow), lg(s.h * s.w),
                 lg(t.macs())]
        return np.asarray(feats, dtype=np.float32)


def direct_task_of_node(node, infos) -> CudaDepthwiseTask | None:
    """The task of a ``Conv``/``FusedConv`` node that the cuda target compiles with the direct schedule (float32,
    more than one group), or None."""
    conv = node_conv(node, infos)
    if conv is None or conv[0].groups < 2 or conv[0].dtype != "float32":
        return None
    return CudaDepthwiseTask(conv[0], *conv[1], node.name)


def pool_task_of_node(node, infos, consts) -> CudaPoolTask | None:
    """The task of a float32 ``MaxPool``/``AveragePool``/``GlobalAveragePool`` node (``consts``: the graph's
    constants), read from its cuda plan (the geometry in the plan's key), or None."""
    from compiler.backend.plans.oplan import UnsupportedOnTarget
    from compiler.backend.plans.plans import PLANNERS

    if node.op not in pool.FLOAT_POOLS or not infos or infos[0] is None:
        return None
    try:
        plan = PLANNERS[node.op](node, infos, consts, "cuda")
    except (UnsupportedOnTarget, ValueError, TypeError, KeyError):
        return None
    if plan.key[0] == "gap":
        n, c, h, w = plan.key[1]
        return CudaPoolTask("GlobalAveragePool", PoolSpec(n, c, h, w, h, w, (1, 1), (0, 0, 0, 0), 1, 1), False,
                            node.name)
    kind, spec, include, dtype = plan.key[:4]
    if kind not in ("MaxPool", "AveragePool") or dtype != "float32":
        return None
    return CudaPoolTask(kind, spec, bool(include), node.name)
