"""Tuning the llvm target's float conv2d schedules (:func:`compiler.topi.conv2d_direct.schedule_cpu` and, for 3x3
unit-stride convs, the Winograd conv's :func:`compiler.topi.conv2d_winograd.schedule_cpu`).

A task (:class:`LlvmConvTask`) is one float conv2d of a model (geometry, bias, fused residual, activation) as
the llvm target compiles it (a ``Conv``/``FusedConv`` node after epilogue fusion; grouped convs, and depthwise
convs in the channel-vector layout, are not tuned). Its space (:class:`CpuConvSpace`) is the product of the
schedule's knobs
(:class:`~compiler.topi.conv2d_direct.CpuConvKnobs`): output channels per vector block ``ob`` (8/16/32 float32
lanes: the vector width, that divide the channels), output pixels per register tile ``xt`` (1..8, at most the
tiled extent), what runs in parallel, the unrolling and the reduction order, and the algorithm ``algo`` (direct,
or Winograd where the conv allows it: ``ob`` and ``xt`` are then the GEMM's block and tiles per register tile; the
default knobs are Winograd's where the library's default takes it). Convs the library puts in a pixel-vector
layout (1x1 unit-stride convs whose pixels split into vectors, depthwise convs, small image stems:
:func:`~compiler.topi.conv2d_direct.cpu_spec`) have that layout's settings (:class:`PixelConvSpace`): channels per
register tile, pixels per tile, rows per tile (depthwise) and the parallel loop on or off (``algo="pixels"``); a
depthwise conv has only those, a conv that can take either layout (1x1 unit-stride convs and small image stems,
whichever the library picks) the settings of both (:class:`ConvLayoutsSpace`). A measurement
compiles the kernel
for the current LLVM target CPU and times it on seeded random data: one warm-up call, then the median of
``repeats`` timed runs (each long enough to time: several calls when one is short); the cost is nanoseconds.
The tuners, the XGBoost model (on the analytic features of :meth:`CpuConvSpace.features`) and the log loop are
the accelerator's (:mod:`compiler.autotune.tuners`); measurement goes through the same
:class:`compiler.scaleout.Runner` (:class:`LlvmMeasurer`: in this process, one candidate after the other, since
timings taken side by side would disturb each other).

Log lines have the accelerator records' fields with ``"target": "llvm"``, ``"cpu": {"name", "hash"}`` (the
LLVM target CPU and its feature string: a record is used only on the CPU it was measured for) in place of
``"hw"``, and ``"result": {"ns", "gflops"}``; an in-model choice (``vta tune --target llvm`` ends with one per task:
``compiler.executor.llvm_rank.rank_in_model``) has ``"in_model": {...}`` and no result. ``build(..., target="llvm",
tuning_log=)`` applies a log: per task its last in-model choice, else the fastest usable record timed against the
library's default knobs at build time (:func:`logged_faster`), then both confirmed in the model
(``compiler.executor.llvm_log``), kept only where faster (a log never makes a task slower).
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.autotune.conv_task import (FloatConvTask, InProcessMeasurer, distinct_tasks, fastest_usable, knobs_from,
                                        measure_task, node_conv, other_target, warn_log)
from compiler.autotune.host_timed import HostKnobGrid, HostTimed, cpu_ident, time_call
from compiler.autotune.llvm_gemm import gemm_task_of_node
from compiler.autotune.llvm_pool import pool_task_of_node
from compiler.autotune.measure import Result
from compiler.autotune.records import FORMAT, SkippedLines, log_lines
from compiler.topi import conv2d_direct as cd
from compiler.topi import conv2d_winograd as cw
from compiler.topi.conv2d_direct import ORDER_CHOICES, PARALLEL_CHOICES, PIXEL_PARALLEL_CHOICES, CpuConvKnobs
from compiler.topi.gemm import CpuGemmKnobs
from compiler.topi.pool import CpuPoolKnobs
from compiler.topi.row_tiles import row_vectors

Point = tuple[int, ...]
OB_CHOICES = (8, 16, 32)
XT_CHOICES = tuple(range(1, 9))
UNROLL_CHOICES = (0, 1, 2)
# ------------------------------------------------------------------------------------------------ tasks
@dataclass(frozen=True)
class LlvmConvTask(HostTimed, FloatConvTask):
    """One float conv2d as the llvm target compiles it: geometry ``spec`` (no knob fields set), its fused epilogue
    (``bias``, ``residual``, ``act`` with ``act_params``), and the node's ``name`` (not part of the identity)."""

    OP = "conv2d_float"
    DROP = ("oc_block", "pixel_tile", "pad_value", "in_block")  # in_block: chosen by CpuConvKnobs.apply

    def __post_init__(self) -> None:
        s = self.spec
        if s.dtype != "float32" or not (s.groups == 1 or s.depthwise):
            raise ValueError(f"llvm conv tasks are float32 convolutions with one group or depthwise, got dtype "
                             f"{s.dtype}, groups {s.groups}")
        if s.oc_block or s.pixel_tile or s.pixel_vectors or s.row_tile:
            raise ValueError("a task's spec carries no knobs (oc_block and pixel_tile must be 0)")

    def label(self) -> str:
        return "depthwise conv" if self.spec.depthwise else "conv"

    def make_space(self) -> "CpuConvSpace | PixelConvSpace | ConvLayoutsSpace":
        """Both layouts' settings (:class:`ConvLayoutsSpace`) for a conv that can take either (1x1 unit-stride convs,
        small image stems); the pixel-vector ones for a depthwise conv; else the channel-vector ones."""
        if cd.pixels_ok(self.spec) and not self.spec.depthwise:
            return ConvLayoutsSpace(self)
        return PixelConvSpace(self) if self.default_knobs().algo == "pixels" else CpuConvSpace(self)

    def default_knobs(self) -> CpuConvKnobs:
        """The knobs a build without a log uses (the library's choice for the current target CPU: its pixel-vector
        layout where :func:`~compiler.topi.conv2d_direct.cpu_spec` takes one, Winograd where
        :func:`~compiler.topi.conv2d_winograd.default_knobs` takes it, else the direct conv's channel-vector layout
        with the target's blocks, :func:`~compiler.topi.conv2d_direct.wide_flat`)."""
        from compiler.backend.llvm.host import float_lanes

        lanes = float_lanes()
        px = cd.cpu_spec(self.spec, lanes)
        if px.pixel_vectors:
            return cd.default_pixel_knobs(px)
        return cw.default_knobs(self.spec, lanes) or cd.default_cpu_knobs(cd.wide_flat(self.spec, lanes))

    def kernel(self, knobs: CpuConvKnobs):
        """The compiled kernel with ``knobs`` (``compiler.backend.build.CpuOp``; structurally equal ones are reused)."""
        from compiler.backend.build import build_op
        from compiler.schedule import create_schedule

        epi = dict(bias=self.bias, residual=self.residual, act=self.act, act_params=self.act_params)
        if knobs.algo == "winograd":
            op = cw.op_for(self.spec, knobs, **epi)
            s = create_schedule(op.out)
            cw.schedule_cpu(op, s, knobs)
        else:
            op = cd.conv2d(knobs.apply(self.spec), **epi)
            s = create_schedule(op.out)
            cd.schedule_cpu(op, s, knobs)
        return build_op(s, args=op.inputs + [op.out], name="conv2d_tune")

    def inputs(self, knobs: CpuConvKnobs, seed: int = 0) -> list[np.ndarray]:
        """Seeded random arguments of the kernel with ``knobs`` (the weight packed for its block)."""
        spec = knobs.apply(self.spec)
        rng = np.random.default_rng(seed)
        s = self.spec
        w = rng.standard_normal((s.o, s.cg, s.kh, s.kw)).astype(np.float32)
        wino = knobs.algo == "winograd"
        out = [rng.standard_normal(cd.input_shape(s if wino else spec)).astype(np.float32),
               cw.pack_weight(s, w, knobs.ob) if wino else cd.pack_weight(spec, w)]
        if self.bias:
            out.append(rng.standard_normal(s.o).astype(np.float32))
        if self.residual:
            shape = cw.output_shape(s, knobs.ob) if wino else cd.output_shape(spec)
            out.append(rng.standard_normal(shape).astype(np.float32))
        return out


def task_of_node(node, infos) -> LlvmConvTask | None:
    """The task of a ``Conv``/``FusedConv`` graph node (``infos``: its inputs' TensorInfos), or None when the llvm
    target does not tune it (not float32, not a 2-D conv, grouped, or depthwise in the channel-vector layout:
    :func:`compiler.topi.conv2d_direct.cpu_spec`)."""
    from compiler.backend.llvm.host import float_lanes

    conv = node_conv(node, infos)
    if conv is None:
        return None
    spec, epilogue = conv
    if spec.dtype != "float32" or not (spec.groups == 1 or spec.depthwise):
        return None
    if spec.depthwise and not cd.cpu_spec(spec, float_lanes()).pixel_vectors:  # channel vectors: no knobs
        return None
    return LlvmConvTask(spec, *epilogue, node.name)


def node_task(node, infos, consts):
    """The llvm task of graph node ``node`` (``infos``: its inputs' TensorInfos; ``consts``: the graph's constants):
    its :class:`LlvmConvTask`, :class:`~compiler.autotune.llvm_gemm.LlvmGemmTask` (a product the target runs as a
    GEMM) or :class:`~compiler.autotune.llvm_pool.LlvmPoolTask` (a max pool on the row schedule), else None."""
    return task_of_node(node, infos) or gemm_task_of_node(node, infos, consts) or pool_task_of_node(node, infos,
                                                                                                     consts)


def graph_tasks(g) -> list:
    """Distinct tunable tasks of graph ``g`` (after epilogue fusion), in graph order: its convs, then its products
    (:class:`~compiler.autotune.llvm_gemm.LlvmGemmTask`), then its max pools
    (:class:`~compiler.autotune.llvm_pool.LlvmPoolTask`)."""
    consts = g.constants
    return (distinct_tasks(g, task_of_node) + distinct_tasks(g, lambda n, infos: gemm_task_of_node(n, infos, consts))
            + distinct_tasks(g, lambda n, infos: pool_task_of_node(n, infos, consts)))


# ------------------------------------------------------------------------------------------------ space
class CpuConvSpace(HostKnobGrid):
    """All knob settings of one :class:`LlvmConvTask`: ob x xt x parallel x unroll x order (see module docstring)."""

    KNOBS = CpuConvKnobs
    structure_axis = 2  # the axis that changes the program's structure most (the XGB tuner spreads batches over it)
    # no cap on a batch's share of one parallel choice: the parallel knob has a clear winner per task, and capping
    # it spent trials on the losers (cold XGB over random 0.25 -> 0.19 on 12 seeds of a measured landscape)
    structure_share = 1.0
    stepped_axes = (1,)  # xt moves by 1-2 pixels; ob, parallel, unroll and order jump to another value
    fixed = {"rows": 0}

    def __init__(self, task: LlvmConvTask) -> None:
        s = task.spec
        obs = [b for b in OB_CHOICES if s.og % b == 0] or [1]
        algos = ["direct"] + (["winograd"] if cw.winograd_ok(s) else [])
        self._set_axes(task, [("ob", obs), ("xt", list(XT_CHOICES)), ("parallel", list(PARALLEL_CHOICES)),
                              ("unroll", list(UNROLL_CHOICES)), ("order", list(ORDER_CHOICES)), ("algo", algos)])

    def extent(self, k: CpuConvKnobs) -> int:
        """Pixels the register tile runs along with ``k``: all output pixels (flat tiles) or one row; Winograd: the
        2x2 tiles of one image."""
        spec = dataclasses.replace(self.task.spec, oc_block=k.ob)
        if k.algo == "winograd":
            return -(-spec.oh // 2) * -(-spec.ow // 2)
        return spec.oh * spec.ow if spec.flat else spec.ow

    def reject(self, k: CpuConvKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        if k.algo == "winograd" and (k.order != "rc_ky_kx" or k.unroll == 2):
            return "order/unroll=2 with algo=winograd (the same program as rc_ky_kx, unroll=1)"
        spec = self.task.spec
        why = self.knob_error(lambda: cw.check_knobs(spec, k) if k.algo == "winograd" else k.check(spec))
        if why:
            return why
        if k.xt > self.extent(k):
            return "xt exceeds the tiled extent (the same program as a smaller xt)"
        if k.unroll == 2 and self.task.spec.kw == 1:
            return "unroll=2 with a 1-wide kernel (the same program as unroll=1)"
        return None

    def features(self, k: CpuConvKnobs) -> np.ndarray:
        """Analytic, scale-free features of a setting: knobs, register use, waste, parallel balance, geometry."""
        s = self.task.spec
        wino = k.algo == "winograd"
        sp = dataclasses.replace(s, oc_block=k.ob, pixel_tile=k.xt)
        flat = wino or sp.flat
        ext = self.extent(k)
        xt = min(k.xt, ext)
        vecs = max(1.0, k.ob / self.lanes)
        acc = vecs * xt
        tiles = -(-ext // xt)
        waste = tiles * xt / ext - 1.0
        blocks = s.o // k.ob
        rows = 16 * s.n if wino else (tiles if sp.flat else sp.oh)  # Winograd: 16 GEMMs an image
        chunks = {"none": 1, "outer": blocks if not wino else rows, "fused": blocks * rows * (tiles if wino else 1),
                  "rows": s.n * -(-s.oh // 2)}[k.parallel]  # rows: Winograd only, one row of 2x2 tiles a task
        th = self.threads
        balance = -(-chunks // th) * th / chunks - 1.0
        inner_red = s.cg if wino else {"rc_ky_kx": s.kw, "ky_kx_rc": s.cg}[k.order]
        macs = s.macs * 16 / 36 if wino else s.macs  # multiplies the kernel does
        lg = lambda x: math.log2(max(float(x), 1.0))  # noqa: E731
        feats = [lg(k.ob), float(xt), lg(vecs), float(acc), float(acc + vecs + 1 > self.registers),
                 float(max(0.0, acc + vecs + 1 - self.registers)), (xt * k.ob) / (xt + vecs),  # FMAs per load
                 waste, float(flat), *(float(k.parallel == p) for p in PARALLEL_CHOICES), lg(chunks), balance,
                 lg(macs / chunks), float(k.unroll), float(k.unroll) * xt * (s.kw if k.unroll == 2 else 1),
                 float(k.order == "ky_kx_rc"), lg(inner_red), lg(s.c), lg(s.o), lg(s.oh), lg(s.ow),
                 float(s.kh * s.kw), float(s.stride[0]), lg(s.macs), float(self.task.residual),
                 float(wino), lg(macs), float(wino) * lg(s.c * s.o / (s.c + s.o))]
        return np.asarray(feats, dtype=np.float32)


class PixelConvSpace(HostKnobGrid):
    """The knob settings of a conv the library puts in a pixel-vector layout (``algo="pixels"``; see the module
    docstring): output channels per register tile ``ob`` (1 for depthwise), pixels per tile ``xt`` (1x1 convs:
    1-4 vectors over the flattened pixels; others along a row: 4 pixels, half a vector to four, or the whole row),
    output rows per tile ``rows`` (depthwise: 1-8, 12, 16, 24) and ``parallel`` ("none" or the layout's parallel
    loop)."""

    structure_axis = 3
    structure_share = 1.0
    stepped_axes = (0, 1, 2)
    KNOBS = CpuConvKnobs
    fixed = {"unroll": 1, "order": "rc_ky_kx", "algo": "pixels"}

    def __init__(self, task: LlvmConvTask) -> None:
        from compiler.backend.llvm.host import float_lanes

        s = task.spec
        lanes = float_lanes()
        obs = [1] if s.depthwise else [t for t in (1, 2, 3, 4, 6, 8, 12, 16, 24) if s.o % t == 0]
        if s.pointwise:
            p = s.oh * s.ow
            xts = [v * lanes for v in (1, 2, 3, 4) if (v - 1) * lanes < p]
        else:
            xts = sorted({x for x in (cd.NARROW_TILE, lanes // 2, lanes, 2 * lanes, 3 * lanes, 4 * lanes, s.ow)
                          if 1 <= x <= s.ow})
        rows = sorted(r for r in {*range(1, 9), 12, 16, 24, task.default_knobs().rows} if r <= s.oh) if s.depthwise \
            else [0]
        self._set_axes(task, [("ob", obs), ("xt", xts), ("rows", rows), ("parallel", list(PIXEL_PARALLEL_CHOICES))])

    def accumulators(self, k: CpuConvKnobs) -> int:
        """Vector registers the register tile's accumulators take."""
        per_row = -(-k.xt // self.lanes) if self.task.spec.pointwise else row_vectors(k.xt, self.lanes)
        return k.ob * per_row * max(1, k.rows)

    def reject(self, k: CpuConvKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        if k.algo != "pixels":
            return f"algo={k.algo!r}: this conv's space is its pixel-vector layout (algo='pixels')"
        why = self.knob_error(lambda: k.check(self.task.spec))
        if why:
            return why
        if self.accumulators(k) > self.registers:
            return f"{self.accumulators(k)} accumulator registers (the target has {self.registers})"
        return None

    def features(self, k: CpuConvKnobs) -> np.ndarray:
        """Analytic, scale-free features (as many as :meth:`CpuConvSpace.features`, slot by slot alike where the
        layouts share a meaning, so one cost model learns both across a network's tasks)."""
        s = self.task.spec
        sp = k.apply(s)
        acc = self.accumulators(k)
        vecs = acc / max(1, k.ob)  # vector loads per tap (input rows), one broadcast weight per channel
        if s.pointwise:
            ext = s.oh * s.ow
            tiles = -(-ext // k.xt)
            chunks = tiles // cd.pointwise_block_tiles(sp) if ext >= s.o else s.o // k.ob
        else:
            ext = s.ow
            tiles = -(-ext // k.xt) * -(-s.oh // max(1, k.rows))
            chunks = s.n * s.c if s.depthwise else s.o // k.ob * s.oh
        waste = -(-ext // k.xt) * k.xt / ext - 1.0
        chunks = chunks if k.parallel == "outer" else 1
        th = self.threads
        balance = -(-chunks // th) * th / chunks - 1.0
        inner_red = s.kh * s.kw if s.depthwise else s.cg * s.kh * s.kw
        lg = lambda x: math.log2(max(float(x), 1.0))  # noqa: E731
        feats = [lg(k.ob), float(k.xt), lg(vecs), float(acc), float(acc + 2 > self.registers),
                 float(max(0.0, acc + 2 - self.registers)), (acc * 1.0) / (vecs + k.ob), waste, 2.0,
                 *(float(k.parallel == p) for p in PARALLEL_CHOICES), lg(chunks), balance, lg(s.macs / chunks),
                 1.0, float(k.rows), 0.0, lg(inner_red), lg(s.c), lg(s.o), lg(s.oh), lg(s.ow), float(s.kh * s.kw),
                 float(s.stride[0]), lg(s.macs), float(self.task.residual), 0.0, lg(tiles), float(s.depthwise)]
        return np.asarray(feats, dtype=np.float32)


class ConvLayoutsSpace(HostKnobGrid):
    """The settings of both layouts of a conv that can take either (a 1x1 unit-stride conv or a small image stem:
    :func:`~compiler.topi.conv2d_direct.pixels_ok`, not depthwise): those of :class:`CpuConvSpace` (channels in the
    vector lanes, Winograd where it applies) and of :class:`PixelConvSpace` (``algo="pixels"``), as AutoTVM tunes
    each template of an op and keeps the fastest. One grid over the union of the two spaces' axis values; a point is
    valid where its layout's own space holds and accepts it, and its features are that space's (slot for slot
    alike; the layout slot tells them apart). Which layout wins moves with the CPU and the layer: MobileNetV2's
    14x14 expanding 1x1 convs as AVX2 code ran 20-30 % faster alone with channel vectors (64->384: 0.065 vs
    0.094 ms, Zen 4, two threads, min of 9 alternating), the reducing ones (576->96) 30 % slower."""

    KNOBS = CpuConvKnobs
    # at most half an XGB batch on one layout, so the layout the model does not favour yet is measured every batch:
    # cold XGB over random's expectation (whole timed landscapes, 64 trials; Zen 4, AVX-512, two threads) on
    # ResNet-18's 7x7/2 stem, whose best settings are 3 of 52 pixel-vector ones among 484, 0.56 uncapped -> 0.27
    # at 0.75 -> 0.17 at 0.5 (8 seeds); MobileNetV2's 1x1 convs 64->384 (14x14), 576->96, 960->320 (7x7): 0.22 ->
    # 0.21 -> 0.18 (4 seeds)
    structure_share = 0.5
    NAMES = ("ob", "xt", "parallel", "unroll", "order", "algo", "rows")
    STEPPED = ("ob", "xt", "rows")  # sizes: their merged values sorted, a move steps; the others jump
    structure_axis = NAMES.index("algo")  # the layout: the largest change of the program
    stepped_axes = tuple(map(NAMES.index, STEPPED))

    def __init__(self, task: LlvmConvTask) -> None:
        self.layouts = {"channel-vector": CpuConvSpace(task), "pixel-vector": PixelConvSpace(task)}
        axes = []
        for name in self.NAMES:
            vals: list = []
            for sp in self.layouts.values():
                own = dict(sp.axes).get(name, [sp.fixed.get(name)])
                vals += [v for v in own if v not in vals]
            axes.append((name, sorted(vals) if name in self.STEPPED else vals))
        self._set_axes(task, axes)

    def layout(self, k: CpuConvKnobs) -> str:
        """The layout of ``k``: "pixel-vector" (``algo="pixels"``) or "channel-vector" (direct or Winograd)."""
        return "pixel-vector" if k.algo == "pixels" else "channel-vector"

    def reject(self, k: CpuConvKnobs) -> str | None:
        """Why ``k`` cannot (or need not) be measured for this task, or None."""
        sp = self.layouts[self.layout(k)]
        if sp.point(k) is None:
            return f"not a setting of the {self.layout(k)} layout's space"
        return sp.reject(k)

    def features(self, k: CpuConvKnobs) -> np.ndarray:
        """The features its layout's space gives ``k``."""
        return self.layouts[self.layout(k)].features(k)


# ------------------------------------------------------------------------------------------------ measurement
def measure_llvm(task: LlvmConvTask, knobs: CpuConvKnobs) -> Result:
    """Compile and time ``task`` with ``knobs``: a :class:`Result` whose ``cycles`` holds the median nanoseconds."""
    return measure_task(knobs, task)


class LlvmMeasurer(InProcessMeasurer):
    """Time llvm candidates in this process, one after the other
    (:class:`~compiler.autotune.conv_task.InProcessMeasurer`)."""


# ------------------------------------------------------------------------------------------------ logs
_warn = warn_log


@dataclass
class LlvmLog:
    """The usable llvm records of a tuning log for the current target CPU: ``records``, the timed trials
    ``(task identity, knobs, ns, FILE:LINE)``; ``in_model``, task key -> ``(knobs, FILE:LINE)`` of the task's last
    in-model choice (:func:`compiler.executor.llvm_rank.rank_in_model`: knobs equal to the default mean the default
    ran fastest in the model)."""

    records: list[tuple[dict, CpuConvKnobs, int, str]]
    in_model: dict[str, tuple[CpuConvKnobs, str]]


KNOBS_OF_OP = {"gemm_float": CpuGemmKnobs, "max_pool_float": CpuPoolKnobs}  # a record's knob class by its task's op
# (a conv's otherwise)


def _parse_record(obj: dict) -> tuple[dict, "CpuConvKnobs | CpuGemmKnobs | CpuPoolKnobs"]:
    """``(task identity, knobs)`` of an llvm record (the knob class by the task's op, :data:`KNOBS_OF_OP`);
    KeyError/TypeError/ValueError where malformed."""
    ident = obj["task"]
    if not isinstance(ident, dict):
        raise TypeError("task must be an object")
    if not isinstance(obj["config"], dict):
        raise TypeError("config must be an object")
    return ident, knobs_from(obj["config"], KNOBS_OF_OP.get(ident.get("op"), CpuConvKnobs))


def load_llvm_log(path: str | Path) -> LlvmLog:
    """The :class:`LlvmLog` of the log at ``path``; other lines (bad JSON, malformed, other CPU, accelerator
    records) are skipped with a warning."""
    want = cpu_ident()
    out, in_model = [], {}
    skipped = SkippedLines()
    for where, obj in log_lines(path, skipped):
        if not isinstance(obj, dict) or obj.get("vta_tuning") != FORMAT:
            skipped.add(where, f"not a vta-stack tuning record of format {FORMAT}")
            continue
        if obj.get("target") != "llvm":
            skipped.add(where, other_target(obj, "llvm"))
            continue
        cpu = obj.get("cpu")
        if not isinstance(cpu, dict) or cpu.get("hash") != want["hash"]:
            got = cpu.get("name") if isinstance(cpu, dict) else cpu
            skipped.add(where, f"record for LLVM target CPU {got!r} (hash "
                               f"{cpu.get('hash') if isinstance(cpu, dict) else '?'}), but this build compiles for "
                               f"{want['name']!r} (hash {want['hash']})")
            continue
        try:
            if obj.get("in_model") is not None:
                if not isinstance(obj["in_model"], dict):
                    raise TypeError("in_model must be an object")
                ident, knobs = _parse_record(obj)
                in_model[json.dumps(ident, sort_keys=True)] = (knobs, where)
                continue
            if obj.get("result") is None:
                continue
            ident, knobs = _parse_record(obj)
            ns = int(obj["result"]["ns"])
            if ns <= 0:
                raise ValueError(f"ns {ns} must be > 0")
        except (KeyError, TypeError, ValueError) as exc:
            skipped.add(where, f"malformed llvm tuning record ({type(exc).__name__}: {exc})")
            continue
        out.append((ident, knobs, ns, where))
    skipped.warn()
    return LlvmLog(out, in_model)


def load_llvm_records(path: str | Path) -> list[tuple[dict, CpuConvKnobs, int, str]]:
    """``(task identity, knobs, ns, FILE:LINE)`` of every timed llvm record for the current target CPU in the log at
    ``path`` (:func:`load_llvm_log`'s ``records``)."""
    return load_llvm_log(path).records


def logged_knobs(tasks: list[LlvmConvTask], path: str | Path, log: LlvmLog | None = None,
                 skip: frozenset = frozenset()) -> dict[str, CpuConvKnobs]:
    """Task key -> knobs of its fastest usable record in the log (warns for unknown tasks, unusable knobs, and
    tasks no record covers); tasks whose key is in ``skip`` are left out without a warning. ``log``: the log at
    ``path`` already loaded."""
    return fastest_usable(tasks, (log or load_llvm_log(path)).records, path, "llvm", skip)


def in_model_choices(tasks: list[LlvmConvTask], log: LlvmLog) -> dict[str, CpuConvKnobs]:
    """Task key -> the knobs of the task's last in-model line in ``log`` (the default's where the default ran
    fastest); a line whose knobs the task cannot use is skipped with a warning (its timed records then decide)."""
    ranked: dict[str, CpuConvKnobs] = {}
    for t in tasks:
        knobs, where = log.in_model.get(t.key, (None, ""))
        why = None if knobs is None or knobs == t.default_knobs() else t.make_space().reject(knobs)
        if why:
            _warn(f"{where}: in-model choice {knobs} cannot be used for {t.describe()} ({why}); its timed records "
                  f"are used instead")
        elif knobs is not None:
            ranked[t.key] = knobs
    return ranked


MIN_GAIN = 0.03
"""How much faster (fraction of the default's time) logged knobs must run, hot and flushed, to replace the default:
a tie is noise. ResNet-18's 56x56 Winograd convs with ``parallel='outer'`` timed 0.312 vs 0.312 ms alone (a
strict comparison kept them on a 0.1 % draw) but 0.40 and 0.50 vs 0.33 and 0.36 ms in the model (Zen 5, two
threads: an 8-trial log made the network 5 % slower); the default is the choice measured in the network."""


def faster_than_default(task: LlvmConvTask, knobs: CpuConvKnobs, rounds: int = 5) -> tuple[bool, int, int]:
    """Time ``knobs`` against the default knobs, alternating ``rounds`` times (min of each side's medians), hot
    (repeated calls) and flushed (each call after a cache sweep): ``(knobs faster by at least MIN_GAIN in both,
    knobs ns, default ns)`` (the hot figures). Knobs equal to the default: ``(False, 0, 0)``, not timed. Both,
    because a network runs a layer between others: ResNet-18's 512-channel 7x7 Winograd conv with 16-channel
    blocks ran 0.42 vs 0.44 ms hot but 0.62 vs 0.54 flushed and 0.64 vs 0.55 in the model (Zen 5, two threads: its
    17 MB of transformed weights stream from memory there), and a log of 8 trials a task made the network 3 %
    slower."""
    default = task.default_knobs()
    if knobs == default:
        return False, 0, 0
    mine, theirs = task.bound_call(knobs), task.bound_call(default)  # compiled and given inputs once, timed 12x
    a, b, fa, fb = [], [], [], []
    for _ in range(rounds):
        a.append(time_call(mine))
        b.append(time_call(theirs))
        fa.append(time_call(mine, flush=True))
        fb.append(time_call(theirs, flush=True))
    keep = 1.0 - MIN_GAIN
    return min(a) <= keep * min(b) and min(fa) <= keep * min(fb), min(a), min(b)


def logged_faster(graph, path: str | Path) -> dict[str, CpuConvKnobs]:
    """Task key -> logged knobs for the tunable convs of ``graph``: a task's in-model choice where the log has one
    (:func:`compiler.executor.llvm_rank.rank_in_model`; none where that was the default), else its fastest record
    where it times faster than the default alone, here and now (:func:`faster_than_default`);
    ``compiler.executor.llvm_log`` then confirms them in the model."""
    tasks = graph_tasks(graph)
    log = load_llvm_log(path)
    ranked = in_model_choices(tasks, log)
    chosen = logged_knobs(tasks, path, log, frozenset(ranked))
    out = {t.key: ranked[t.key] for t in tasks if t.key in ranked and ranked[t.key] != t.default_knobs()}
    out.update({t.key: chosen[t.key] for t in tasks if t.key in chosen and faster_than_default(t, chosen[t.key])[0]})
    return out


def use_knobs(backend, knobs: dict, graph) -> None:
    """Make ``backend`` (a ``TargetCpuBackend`` for llvm, before ``prepare``) compile the convs and products of
    ``graph`` whose task key is in ``knobs`` with those knobs (the others with the default)."""
    consts = graph.constants

    def lookup(node, infos) -> "CpuConvKnobs | CpuGemmKnobs | CpuPoolKnobs | None":
        t = node_task(node, infos, consts)
        return None if t is None else knobs.get(t.key)
    backend.tuned = lookup
