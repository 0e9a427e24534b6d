"""The instruction-level test suite, as program builders shared by the simulator and RTL tests.

Each builder takes a config (and a seed) and returns ``(program, expected)``: a
:class:`~jit_runtime.program.Program` (not yet run) and the exact numpy contents its named
output buffers must hold afterwards (also stored in ``program.expected``). Run one with
``program.run("sim")`` or ``program.run("rtl")`` and compare ``result.outputs`` bit-exactly.
:func:`suite_cases` lists every case for a config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from isa import alu_evaluate, alu_ops
from isa.encoding import elem_layout
from jit_runtime.blocked_gemm import GemmPlan, build_blocked_gemm, random_operands
from jit_runtime.command_queue import CommandQueue
from jit_runtime.layout import elements
from jit_runtime.program import Program

if TYPE_CHECKING:
    from isa import HwConfig

Case = tuple[Program, dict[str, np.ndarray]]
PAD_SIDES = ("y_pad0", "y_pad1", "x_pad0", "x_pad1", "all")


def _acc_shape(cfg: "HwConfig", n: int) -> tuple[int, int, int]:
    return (n, cfg.batch, cfg.block_out)


def _out_dtype(cfg: "HwConfig") -> np.dtype:
    return elem_layout(cfg, "out")[0]


def _narrow(cfg: "HwConfig", acc: np.ndarray) -> np.ndarray:
    """What STORE writes for accumulator values: their low out_width bits."""
    return np.asarray(acc, dtype=np.int64).astype(_out_dtype(cfg))


def _stream(cfg: "HwConfig", n: int, base: int = 0, src: int | None = None):
    """finit of an ALU kernel over ``n`` consecutive accumulators from ``base`` (operand from ``src``)."""
    def finit(k):
        k.loop_begin(n, dst_factor=1, src_factor=1)
        k.push(base, base if src is None else src)
        k.loop_end()
    return finit


def _to_store(q: CommandQueue) -> None:
    q.dep_push("compute", "store")
    q.dep_pop("compute", "store")


def _finish(q: CommandQueue, name: str, expected: dict[str, np.ndarray]) -> Case:
    return q.finalize(name=name, expected=expected), expected


# ----------------------------------------------------------------- cases
def save_load_acc(cfg: "HwConfig", seed: int = 0) -> Case:
    """LOAD ACC (2-D, strided) -> ALU ADD 0 -> STORE (2-D, strided): the block comes back narrowed."""
    rng = np.random.default_rng(seed)
    rows, cols, stride = 3, 5, 7
    x = rng.integers(-(1 << 20), 1 << 20, size=(rows * stride, cfg.batch, cfg.block_out), dtype=np.int32)
    q = CommandQueue(cfg)
    xb = q.alloc(x.shape, np.int32, name="x")
    yb = q.alloc(x.shape, _out_dtype(cfg), name="y")
    xb.copy_from(x)
    q.load_2d("acc", 0, xb, 0, x_size=cols, y_size=rows, x_stride=stride)
    q.push_alu(_stream(cfg, rows * cols), op="ADD", use_imm=True, imm=0)
    _to_store(q)
    q.store_2d(0, yb, 0, x_size=cols, y_size=rows, x_stride=stride)
    want = np.zeros(x.shape, _out_dtype(cfg))
    for r in range(rows):
        want[r * stride:r * stride + cols] = _narrow(cfg, x[r * stride:r * stride + cols])
    return _finish(q, "save_load_acc", {"y": want})


def padded_load(cfg: "HwConfig", side: str = "all", seed: int = 0) -> Case:
    """LOAD ACC with zero padding on one side (or ``"all"``), passed through the ALU and stored whole."""
    if side not in PAD_SIDES:
        raise ValueError(f"side {side!r} must be one of {PAD_SIDES}")
    pads = {p: (2 if side in (p, "all") else 0) for p in PAD_SIDES[:4]}
    rng = np.random.default_rng(seed)
    rows, cols = 3, 4
    x = rng.integers(-128, 128, size=(rows, cols, cfg.batch, cfg.block_out), dtype=np.int32)
    prow = pads["y_pad0"] + rows + pads["y_pad1"]
    pcol = pads["x_pad0"] + cols + pads["x_pad1"]
    q = CommandQueue(cfg)
    xb = q.alloc(x.shape, np.int32, name="x")
    yb = q.alloc((prow, pcol, cfg.batch, cfg.block_out), _out_dtype(cfg), name="y")
    xb.copy_from(x)
    q.load_2d("acc", 0, xb, 0, x_size=cols, y_size=rows, x_stride=cols, **pads)
    q.push_alu(_stream(cfg, prow * pcol), op="ADD", use_imm=True, imm=0)
    _to_store(q)
    q.store_2d(0, yb, 0, x_size=prow * pcol, y_size=1, x_stride=prow * pcol)
    want = np.pad(x, ((pads["y_pad0"], pads["y_pad1"]), (pads["x_pad0"], pads["x_pad1"]), (0, 0), (0, 0)))
    return _finish(q, f"padded_load_{side}", {"y": _narrow(cfg, want)})


def padded_load_inp(cfg: "HwConfig", seed: int = 0, pad_value: int = 0) -> Case:
    """LOAD INP padded on every side with ``pad_value`` (in every lane), multiplied by one weight element:
    the pads' rows are ``pad_value`` times the weight row sums."""
    rng = np.random.default_rng(seed)
    rows, cols, pad = 2, 3, 1
    x = rng.integers(-128, 128, size=(rows, cols, cfg.batch, cfg.block_in), dtype=np.int8)
    w = rng.integers(-3, 4, size=(1, cfg.block_out, cfg.block_in), dtype=np.int8)
    prow, pcol = rows + 2 * pad, cols + 2 * pad
    n = prow * pcol
    q = CommandQueue(cfg)
    xb, wb = q.alloc(x.shape, np.int8, name="x"), q.alloc(w.shape, np.int8, name="w")
    yb = q.alloc((n, cfg.batch, cfg.block_out), _out_dtype(cfg), name="y")
    xb.copy_from(x)
    wb.copy_from(w)
    q.load_2d("inp", 0, xb, 0, x_size=cols, y_size=rows, x_stride=cols, x_pad0=pad, x_pad1=pad, y_pad0=pad,
              y_pad1=pad, pad_value=pad_value)
    q.load_2d("wgt", 0, wb, 0, x_size=1, y_size=1, x_stride=1)
    q.dep_push("load", "compute")
    q.dep_pop("load", "compute")

    def gemm(k):
        k.loop_begin(n, dst_factor=1, src_factor=1)
        k.push(0, 0, 0)
        k.loop_end()
    q.push_gemm(_stream(cfg, n), reset=True)
    q.push_gemm(gemm)
    _to_store(q)
    q.store_2d(0, yb, 0, x_size=n, y_size=1, x_stride=n)
    xp = np.pad(x, ((pad, pad), (pad, pad), (0, 0), (0, 0)), constant_values=pad_value)
    xp = xp.reshape(n, cfg.batch, cfg.block_in)
    acc = np.einsum("nbi,oi->nbo", xp.astype(np.int64), w[0].astype(np.int64))
    name = "padded_load_inp" + (f"_value{pad_value}" if pad_value else "")  # the suite_cases key
    return _finish(q, name, {"y": _narrow(cfg, alu_evaluate("ADD", acc, 0, cfg.acc_width))})


def alu(cfg: "HwConfig", op: str, use_imm: bool, imm: int = 3, seed: int = 0) -> Case:
    """One ALU op of the registry on ``n`` accumulators, with an immediate or a tensor operand."""
    rng = np.random.default_rng(seed)
    n = 8
    a = rng.integers(-200, 200, size=_acc_shape(cfg, n), dtype=np.int32)
    b = rng.integers(-10, 11, size=_acc_shape(cfg, n), dtype=np.int32)
    q = CommandQueue(cfg)
    xb = q.alloc((2 * n, cfg.batch, cfg.block_out), np.int32, name="x")
    yb = q.alloc(_acc_shape(cfg, n), _out_dtype(cfg), name="y")
    xb.copy_from(np.concatenate([a, b]))
    q.load_2d("acc", 0, xb, 0, x_size=2 * n, y_size=1, x_stride=2 * n)
    q.push_alu(_stream(cfg, n, 0, n), op=op, use_imm=use_imm, imm=imm)
    _to_store(q)
    q.store_2d(0, yb, 0, x_size=n, y_size=1, x_stride=n)
    res = alu_evaluate(op, a, imm if use_imm else b, cfg.acc_width)
    kind = "imm" if use_imm else "tensor"
    return _finish(q, f"alu_{op.lower()}_{kind}", {"y": _narrow(cfg, res)})


def requant(cfg: "HwConfig", seed: int = 0) -> Case:
    """The fused REQUANT op: accumulators of two channel blocks, records loaded into WGT, one ALU pass."""
    from isa.intrinsics import record_lanes
    from isa.requant import pack_records

    rng = np.random.default_rng(seed)
    n, nch = 8, 2 * cfg.block_out
    a = rng.integers(-(1 << 31), 1 << 31, size=_acc_shape(cfg, n), dtype=np.int64).astype(np.int32)
    hi = (1 << (cfg.out_width - 1)) - 1
    # signed 32-bit multipliers and shifts 20..63: outputs inside the clip range, at its bounds, and rounded to 0
    rec = pack_records(cfg, bias=rng.integers(-(1 << 31), 1 << 31, nch), mult=rng.integers(-(1 << 31), 1 << 31, nch),
                       shift=rng.integers(20, 64, nch), zp=rng.integers(-20, 20, nch), lo=rng.integers(-hi - 1, 0, nch),
                       hi=hi, n_channels=nch)
    q = CommandQueue(cfg)
    xb = q.alloc(a.shape, np.int32, name="x")
    wb = q.alloc(rec.shape, rec.dtype, name="rec")
    yb = q.alloc(_acc_shape(cfg, n), _out_dtype(cfg), name="y")
    xb.copy_from(a)
    wb.copy_from(rec)
    q.load_2d("wgt", 3, wb, 0, x_size=2, y_size=1, x_stride=2)
    q.dep_push("load", "compute")
    q.dep_pop("load", "compute")
    q.load_2d("acc", 0, xb, 0, x_size=n, y_size=1, x_stride=n)

    def finit(k):  # rows 0..3 use channel block 0 (wgt element 3), rows 4..7 block 1 (element 4)
        k.loop_begin(n // 2, dst_factor=1, src_factor=0)
        k.push(0, 3)
        k.push(n // 2, 4)
        k.loop_end()
    q.push_alu(finit, op="REQUANT")
    _to_store(q)
    q.store_2d(0, yb, 0, x_size=n, y_size=1, x_stride=n)
    blocks = np.repeat(np.arange(2), n // 2)
    res = alu_evaluate("REQUANT", a, record_lanes(rec[blocks], cfg.wgt_width), cfg.acc_width)
    return _finish(q, "alu_requant", {"y": _narrow(cfg, res)})


def relu(cfg: "HwConfig", seed: int = 0) -> Case:
    """relu then clip to the output range: MAX 0, MIN 2**(out_width-1)-1."""
    rng = np.random.default_rng(seed)
    n = 16
    a = rng.integers(-(1 << 12), 1 << 12, size=_acc_shape(cfg, n), dtype=np.int32)
    hi = (1 << (cfg.out_width - 1)) - 1
    q = CommandQueue(cfg)
    xb = q.alloc(a.shape, np.int32, name="x")
    yb = q.alloc(a.shape, _out_dtype(cfg), name="y")
    xb.copy_from(a)
    q.load_2d("acc", 0, xb, 0, x_size=n, y_size=1, x_stride=n)
    q.push_alu(_stream(cfg, n), op="MAX", use_imm=True, imm=0)
    q.push_alu(_stream(cfg, n), op="MIN", use_imm=True, imm=hi)
    _to_store(q)
    q.store_2d(0, yb, 0, x_size=n, y_size=1, x_stride=n)
    return _finish(q, "relu", {"y": np.clip(a, 0, hi).astype(_out_dtype(cfg))})


def shift_and_scale(cfg: "HwConfig", shift: int = 8, scale: int = 4, seed: int = 0) -> Case:
    """``(x + shift) >> scale`` with two immediate ALU ops."""
    rng = np.random.default_rng(seed)
    n = 16
    a = rng.integers(-(1 << 16), 1 << 16, size=_acc_shape(cfg, n), dtype=np.int32)
    q = CommandQueue(cfg)
    xb = q.alloc(a.shape, np.int32, name="x")
    yb = q.alloc(a.shape, _out_dtype(cfg), name="y")
    xb.copy_from(a)
    q.load_2d("acc", 0, xb, 0, x_size=n, y_size=1, x_stride=n)
    q.push_alu(_stream(cfg, n), op="ADD", use_imm=True, imm=shift)
    q.push_alu(_stream(cfg, n), op="SHR", use_imm=True, imm=scale)
    _to_store(q)
    q.store_2d(0, yb, 0, x_size=n, y_size=1, x_stride=n)
    return _finish(q, "shift_and_scale", {"y": _narrow(cfg, (a.astype(np.int64) + shift) >> scale)})


def array_round_trip(cfg: "HwConfig", shape: tuple[int, int] = (100, 100), seed: int = 0) -> Case:
    """A 100x100 int8-valued array through DRAM and the accelerator in ACC-sized chunks, back unchanged."""
    rng = np.random.default_rng(seed)
    values = rng.integers(-128, 128, size=shape).astype(np.int32)
    x = elements(values, (cfg.batch, cfg.block_out))
    n = x.shape[0]
    q = CommandQueue(cfg)
    xb = q.alloc(x.shape, np.int32, name="x")
    yb = q.alloc(x.shape, _out_dtype(cfg), name="y")
    xb.copy_from(x)
    if not np.array_equal(xb.copy_to(), x):
        raise AssertionError("host round trip through the DRAM buffer changed the array")
    chunk = min(cfg.acc_depth, n)
    for c, start in enumerate(range(0, n, chunk)):
        size = min(chunk, n - start)
        if c:
            q.dep_pop("store", "compute")  # the previous chunk is stored before its accumulators are reused
        q.load_2d("acc", 0, xb, start, x_size=size, y_size=1, x_stride=size)
        q.push_alu(_stream(cfg, size), op="ADD", use_imm=True, imm=0)
        _to_store(q)
        q.store_2d(0, yb, start, x_size=size, y_size=1, x_stride=size)
        q.dep_push("store", "compute")
    return _finish(q, f"array_round_trip_{shape[0]}x{shape[1]}", {"y": x.astype(_out_dtype(cfg))})


def gemm(cfg: "HwConfig", virtual_threads: int = 1, seed: int = 0) -> Case:
    """A small blocked GEMM with a shift + relu + clip epilogue (four output tiles, two reduction steps each)."""
    plan = GemmPlan(n=2 * cfg.batch * 2, k=2 * cfg.block_in * 2, m=4 * cfg.block_out * 2, tile_n=2, tile_m=4,
                    tile_k=2, shift=6, relu=True)
    a, w = random_operands(plan, seed)
    return build_blocked_gemm(cfg, a, w, plan, virtual_threads=virtual_threads,
                              name=f"gemm_vt{virtual_threads}")


# ----------------------------------------------------------------- registry
def suite_cases(cfg: "HwConfig") -> dict[str, Callable[[], Case]]:
    """Every case for ``cfg`` by name, as zero-argument builders (ALU cases come from the isa registry)."""
    cases: dict[str, Callable[[], Case]] = {
        "save_load_acc": lambda: save_load_acc(cfg),
        "padded_load_inp": lambda: padded_load_inp(cfg),
        "padded_load_inp_value-7": lambda: padded_load_inp(cfg, pad_value=-7),
        "relu": lambda: relu(cfg),
        "shift_and_scale": lambda: shift_and_scale(cfg),
        "array_round_trip": lambda: array_round_trip(cfg),
        "gemm_vt1": lambda: gemm(cfg, 1),
        "gemm_vt2": lambda: gemm(cfg, 2),
    }
    for side in PAD_SIDES:
        cases[f"padded_load_{side}"] = lambda side=side: padded_load(cfg, side)
    for op in alu_ops(cfg):
        if op.operand == "wgt":  # a record op (REQUANT) has its own case
            cases[f"alu_{op.name.lower()}"] = lambda: requant(cfg)
            continue
        for use_imm in (True, False):
            kind = "imm" if use_imm else "tensor"
            cases[f"alu_{op.name.lower()}_{kind}"] = lambda op=op.name, u=use_imm: alu(cfg, op, u)
    return cases
