"""The ``"sim"`` accelerator backend: packed conv2d/dense compiled by the TE stack, run on the simulator.

Compiled kernels (schedule -> loop IR -> operations with dependency tokens) are cached per
shape and epilogue structure and finalized once into a jit_runtime ``Program`` (:class:`Replay`);
per call only the input, weight and constant bytes are patched into a copy of its DRAM image
before the device runs. Importing this module registers the backend.
"""
from __future__ import annotations

from dataclasses import astuple, dataclass, replace
from typing import Any

import numpy as np

from compiler.backend.accel.emit import emit
from compiler.backend.accel.measure import KernelProgram, TimingOnlyDevice, choose_dw_knobs, conv_program, \
    kernel_program, rq_key
from compiler.backend.accel.ops import OpBuilder
from compiler.graph.accel_interface import AccelBackend, as_hw_config
from compiler.graph.conv_stripes import conv2d_in_stripes, stripe_rows
from compiler.tir.accel import lower
from compiler.topi.conv2d import ConvShape, conv2d_compute, conv2d_epilogue
from compiler.topi.knobs import ConvKnobs
from compiler.topi.residual import Residual, residual_supported
from isa import HwConfig
from jit_runtime.host_ops.requant import Requant


#: Devices whose cycles follow the timing contract exactly (data-independent, so a program's profile is fixed).
_CONTRACT_TIMED = frozenset({"sim", "rtl", "rtl-check"})


@dataclass
class Compiled:
    """A compiled kernel: its tensors, constant inputs, operations and MAC count (``built``: its finalized program
    when it came from the per-schedule cache of :func:`compiler.backend.accel.measure.conv_program`)."""

    kernel: Any
    ops: list
    consts: list
    macs: int
    built: KernelProgram | None = None


def _value_key(v) -> tuple:
    """A scalar or array (or None) as a hashable key of its value."""
    if v is None:
        return ("none",)
    a = np.asarray(v)
    return (a.dtype.str, a.shape, a.tobytes())


_rq_key = rq_key  # the epilogue's structure (compiler.backend.accel.measure)


def compile_conv2d(cfg: HwConfig, cs: ConvShape, bias, requant: Requant | None,
                   knobs: ConvKnobs | None = None, residual: Residual | None = None) -> Compiled:
    """Schedule, lower and generate operations for one packed conv2d (``residual``: a fused residual Add whose other
    operand is the kernel's ``residual`` input). The program is shared with the tiling chooser's measurement
    (:func:`compiler.backend.accel.measure.conv_program`, cached per schedule); the constants' values are patched per run."""
    from compiler.topi.conv2d import add_residual

    kp = conv_program(cfg, cs, bias, requant, knobs, residual)
    ep = conv2d_epilogue(cfg, cs, kp.kernel.conv, bias, requant)  # this call's constant values
    if residual is not None:
        add_residual(cfg, cs, ep, residual)
    consts = [(t, arr) for (t, _), (_, arr) in zip(kp.consts, ep.consts)]
    return Compiled(kp.kernel, kp.ops, consts, cs.macs(cfg), kp)


class Replay:
    """A compiled kernel finalized once into a jit_runtime ``Program``; each run patches the input,
    weight and constant bytes into a copy of its DRAM image and runs the device on it. On the timing-only
    device a program the tiling chooser already timed is not run again (its cycles never depend on data)."""

    def __init__(self, cfg: HwConfig, comp: Compiled, device: str = "sim") -> None:
        self.cfg, self.comp, self.device = cfg, comp, device
        self.built = comp.built or kernel_program(cfg, comp.kernel, comp.ops, comp.consts)
        self.program = self.built.program
        self.where = self.built.where
        self.out = self.built.out
        self._dev = None
        self._profile: dict | None = None

    def run(self, inputs: dict) -> tuple[np.ndarray, int, dict, object]:
        """``inputs`` maps every data/weight/const placeholder to an array.

        Returns (output, cycles, device profile, device result); the result carries the simulator's
        per-instruction events for traces."""
        from jit_runtime.device import make_device

        image = self.program.dram.copy()
        for t, (addr, dt, nbytes) in self.where.items():
            a = np.ascontiguousarray(inputs[t], dtype=dt)
            if a.nbytes != nbytes:
                raise ValueError(f"input {t.name}: {a.nbytes} bytes, expected {nbytes} (shape {t.shape})")
            image[addr:addr + nbytes] = a.reshape(-1).view(np.uint8)
        if self._dev is None:
            self._dev = make_device(self.device, self.cfg)
        if isinstance(self._dev, TimingOnlyDevice) and self.built.timed is not None:
            res = self.built.timed  # the same program, timed when the tiling was chosen
        else:
            res = self._dev.run(image, self.program.insn_addr, self.program.n_insns)
            if isinstance(self._dev, TimingOnlyDevice):
                self.built.timed = res
        if self.device not in _CONTRACT_TIMED:  # a board's DRAM latency varies: its profile is per run
            return self.out.read(image), int(res.cycles), dict(res.profile), res
        if self._profile is None:  # the timing contract never depends on data: one program, one profile
            self._profile = dict(res.profile)
        return self.out.read(image), int(res.cycles), dict(self._profile), res


def run_compiled(cfg: HwConfig, comp: Compiled, inputs: dict, device: str = "sim") -> tuple[np.ndarray, dict]:
    """Run a compiled kernel: ``inputs`` maps TE placeholders to arrays; returns (output, profile)."""
    from jit_runtime.command_queue import CommandQueue

    q = CommandQueue(cfg, device)
    dram = {}
    for t, arr in list(inputs.items()) + list(comp.consts):
        buf = q.alloc(t.shape, _np_dtype(t.dtype), name=t.name)
        buf.copy_from(np.ascontiguousarray(arr, dtype=_np_dtype(t.dtype)))
        dram[t] = buf
    out_t = comp.kernel.out
    out = q.alloc(out_t.shape, _np_dtype(out_t.dtype), name="out")
    dram[out_t] = out
    emit(comp.ops, q, dram)
    res = q.synchronize()
    result = out.copy_to()
    cycles = int(res.cycles)
    prof = {"cycles": cycles, "macs": int(comp.macs), "utilization": _utilization(cfg, comp.macs, cycles),
            "bytes": {"input": int(sum(np.asarray(a).nbytes for a in inputs.values())),
                      "output": int(result.nbytes)},
            "device": res.profile}
    return result, prof


def _even_tile(n: int, most: int) -> int:
    """Blocks per tile when ``n`` blocks are cut into as few tiles of at most ``most`` as possible, evened out
    (450 by at most 398: two tiles of 225, one program instead of two)."""
    tiles = -(-n // max(1, min(n, most)))
    return -(-n // tiles)


def _block_key(cs: ConvShape, bias, rq: Requant | None, residual: Residual | None) -> tuple:
    """One batch block's conv problem (shape without its batch, epilogue structure, fused residual)."""
    return (replace(cs, nb=0), _rq_key(bias, rq), None if residual is None else residual.key())


def _summed(cfg: HwConfig, profs: list[dict], parts: str) -> dict:
    """One profile for a conv run as several programs (``parts``: "stripes" or "batch_tiles"): cycles, MACs and
    bytes summed; the last program's device profile (no simulator events: a trace shows the layer's cycles)."""
    cycles, macs = sum(p["cycles"] for p in profs), sum(p["macs"] for p in profs)
    by = {k: sum(p["bytes"][k] for p in profs) for k in profs[0]["bytes"]}
    dram = [p.get("dram_bytes") for p in profs]
    out = {"cycles": cycles, "macs": macs, "utilization": _utilization(cfg, macs, cycles), "bytes": by,
           "device": profs[-1]["device"], "dram_bytes": None if None in dram else sum(dram), parts: len(profs)}
    if "intrinsic" in profs[-1]:
        out["intrinsic"] = profs[-1]["intrinsic"]
    return out


def _dram_bytes(device_profile: dict) -> int | None:
    """Bytes the program moved over the DRAM port (instruction fetch, micro-ops, loads and stores: the device
    profile's counters), or None when the device does not count them."""
    by = (device_profile or {}).get("bytes")
    return int(sum(by.values())) if isinstance(by, dict) else None


def _utilization(cfg: HwConfig, macs: int, cycles: int) -> float:
    """MACs done / MACs the array could do in ``cycles``."""
    return float(macs / (cfg.macs_per_cycle * cycles)) if cycles else 0.0


def _np_dtype(d: str):
    return {"int8": np.int8, "int32": np.int32, "int16": np.int16}[d]


def _conv_shape_from(cfg: HwConfig, x: np.ndarray, w: np.ndarray, stride, padding, groups: int,
                     pad_value: int = 0) -> ConvShape:
    if x.ndim != 6 or w.ndim != 6:
        raise ValueError(f"conv2d: x must be 6-D (N//B, C//BI, H, W, B, BI) and w 6-D (O//BO, I//BI, KH, KW, BO, BI); "
                         f"got {x.shape} and {w.shape}")
    if x.dtype != np.int8 or w.dtype != np.int8:
        raise ValueError(f"conv2d: x and w must be int8, got {x.dtype} and {w.dtype}")
    if x.shape[4:] != (cfg.batch, cfg.block_in) or w.shape[4:] != (cfg.block_out, cfg.block_in):
        raise ValueError(f"conv2d: packed blocks x{x.shape[4:]} w{w.shape[4:]} do not match config {cfg.name} "
                         f"(batch={cfg.batch}, block_in={cfg.block_in}, block_out={cfg.block_out})")
    groups = int(groups)
    if groups < 1 or x.shape[1] % groups or w.shape[0] % groups:
        raise ValueError(f"conv2d: groups={groups} must divide the input blocks ({x.shape[1]}) and output blocks "
                         f"({w.shape[0]}); channels per group must be multiples of the block")
    if x.shape[1] // groups != w.shape[1]:
        raise ValueError(f"conv2d: input has {x.shape[1]} channel blocks = {groups} groups x {x.shape[1] // groups}, "
                         f"but the weight has {w.shape[1]} input blocks per group")
    if len(stride) != 2 or len(padding) != 4:
        raise ValueError(f"conv2d: stride must be (sy, sx) and padding (top, left, bottom, right); got {stride}, {padding}")
    return ConvShape(x.shape[0], groups, x.shape[1] // groups, w.shape[0] // groups, x.shape[2], x.shape[3],
                     w.shape[2], w.shape[3], tuple(int(s) for s in stride), tuple(int(p) for p in padding),
                     int(pad_value))


class SimAccelBackend(AccelBackend):
    """``AccelBackend`` on the simulator (``device="sim"``: cycle-accurate; ``"sim-functional"``: no timing)."""

    #: depthwise convs on the dwmac intrinsic where declared (False: block-diagonal GEMMs, for comparison)
    use_dwmac: bool = True

    #: virtual-thread counts the conv tiling tries when ``vthreads`` is not pinned (a third thread helps the
    #: DMA-bound layers: one thread's store, another's load and a third's GEMM can all be in flight)
    thread_counts: tuple[int, ...] = (2, 3, 1)

    #: the most instructions one program is given: a larger batch runs as batch tiles (:meth:`batch_tile`)
    max_program_insns: int = 2048

    def __init__(self, config: Any = None, device: str = "sim", vthreads: int | None = None, tune: int = 2) -> None:
        self.config = as_hw_config(config)
        self.device = device
        self.vthreads = vthreads
        # > 1: time that many best analytic tilings per conv shape by the timing contract and keep the fastest
        # (compiler.backend.accel.measure; not on "sim-functional", which has no cycles); 1: the analytic choice alone
        self.tune = tune
        self.tuned = None  # tuned(cs, bias, rq) -> ConvKnobs | None: knobs from a tuning log (compiler.autotune)
        self.last_profile: dict = {}
        self._replays: dict = {}
        self._consts_memo: dict = {}  # (kernel, epilogue values) -> its constant inputs
        self._dense_axes: dict = {}  # dense problem -> "w" or "h" (dense_rows_axis)
        self._batch_tiles: dict = {}  # one block's problem -> blocks per program (batch_tile)
        self._tile_knobs: dict = {}  # one block's problem -> the knobs its batch tiles were compiled with
        # replay_hook(replay, inputs) -> Replay.run's result: sees every program run (compiler.executor.export)
        self.replay_hook = None

    @property
    def runs_on(self) -> str:
        """Where its layers run, for the profile: ``accel:sim``, ``accel:rtl``, ``accel:pynq``, ..."""
        return f"accel:{self.device if isinstance(self.device, str) else getattr(self.device, 'name', 'device')}"

    def _run_replay(self, rep: Replay, inputs: dict):
        return rep.run(inputs) if self.replay_hook is None else self.replay_hook(rep, inputs)

    def _replay(self, cs: ConvShape, bias, rq: Requant, residual: Residual | None = None) -> Replay:
        key = (cs, _rq_key(bias, rq), self.vthreads, None if residual is None else residual.key())
        rep = self._replays.get(key)
        if rep is None:
            rep = Replay(self.config, self._compile(cs, bias, rq, residual), self.device)
            self._replays[key] = rep
        return rep

    def _compile(self, cs: ConvShape, bias, rq: Requant, residual: Residual | None = None) -> Compiled:
        from compiler.topi.conv2d import add_residual
        from compiler.topi.knobs import fits

        ep = conv2d_epilogue(self.config, cs, conv2d_compute(self.config, cs)[3], bias, rq)
        if residual is not None:
            add_residual(self.config, cs, ep, residual)
        n_consts, n_alu = len(ep.consts), len(ep.stages)
        block = _block_key(cs, bias, rq, residual)
        if block in self._tile_knobs:  # the last, smaller tile of a batch: the same per-block tiling as the others
            return compile_conv2d(self.config, cs, bias, rq, self._tile_knobs[block], residual)
        knobs = self.tuned(cs, bias, rq) if self.tuned is not None else None
        if knobs is not None and residual is not None and not fits(self.config, cs, knobs, n_consts, residual=True):
            knobs = None  # tuned without the fused residual's tiles: they do not fit beside it
        default = self.default_knobs(cs, bias, rq, n_consts, n_alu, residual)
        if knobs is not None and knobs != default and self.device != "sim-functional":
            # a log never makes a layer slower than the default build: both are timed here, in this layer's context
            # (its fused residual included; the tuner measured the kernel alone), and the faster one is kept
            knobs = min((self._cycles(cs, kn, bias, rq, residual), n, kn) for n, kn in enumerate((knobs, default)))[2]
        knobs = knobs or default
        if cs.nb > 1:  # a batch tile: a smaller last tile of the same batch reuses its tiling
            self._tile_knobs[block] = knobs
        return compile_conv2d(self.config, cs, bias, rq, knobs, residual)

    def default_knobs(self, cs: ConvShape, bias, rq: Requant, n_consts: int, n_alu: int,
                      residual: Residual | None = None):
        """The knobs this backend compiles a conv with when no tuning log covers it: the fastest of the ``tune``
        best analytic tilings by the timing contract (the analytic choice alone on "sim-functional" or tune=1)."""
        from compiler.topi.knobs import choose_conv_knobs
        from compiler.backend.accel.measure import tune_conv_knobs

        if self.tune > 1 and self.device != "sim-functional":
            return tune_conv_knobs(self.config, cs, bias, rq, n_consts, n_alu, self.vthreads, top=self.tune,
                                   residual=residual, thread_counts=self.thread_counts)
        return choose_conv_knobs(self.config, cs, n_consts, n_alu, vthreads=self.vthreads,
                                 residual=residual is not None)

    def _cycles(self, cs: ConvShape, knobs, bias, rq: Requant, residual: Residual | None) -> int:
        """Cycles of the conv with ``knobs`` by the timing contract (what the simulator reports for any data)."""
        from compiler.backend.accel.measure import batch_cycles, measure_conv

        return batch_cycles(lambda shape: measure_conv(self.config, shape, knobs, bias, rq, residual), cs)

    def _consts(self, comp: Compiled, cs: ConvShape, bias, rq: Requant, residual: Residual | None = None) -> dict:
        """This call's values of the kernel's constant inputs (bias/requant may change between calls; a model runs
        the same values every time, so the last few are kept by value)."""
        from compiler.topi.conv2d import add_residual

        key = (id(comp), _value_key(bias), _value_key(rq.pre_shift), _value_key(rq.multiplier), _value_key(rq.shift),
               bool(rq.relu), int(rq.out_min), int(rq.out_max), int(rq.zero_point),
               None if residual is None else (bool(residual.conv_is_a), astuple(residual.params)))
        hit = self._consts_memo.get(key)
        if hit is not None and hit[0] is comp:
            return dict(hit[1])
        ep = conv2d_epilogue(self.config, cs, comp.kernel.conv, bias, rq)
        if residual is not None:
            add_residual(self.config, cs, ep, residual)
        consts = {t: arr for (t, _), (_, arr) in zip(comp.consts, ep.consts)}
        if len(self._consts_memo) >= 256:
            self._consts_memo.clear()
        self._consts_memo[key] = (comp, consts)
        return dict(consts)

    def conv2d_problem(self, x, w, bias, *, stride, padding, groups, requant: Requant, pad_value: int = 0):
        """``(ConvShape, padded bias, padded requant, weight)`` of one packed conv2d call (depthwise made block-diagonal)."""
        cfg = self.config
        x, w = np.asarray(x), np.asarray(w)
        if is_depthwise(cfg, x, w, groups):
            w, groups = block_diagonal(w), x.shape[1]
        cs = _conv_shape_from(cfg, x, w, stride, padding, groups, pad_value)
        n_out = w.shape[0] * cfg.block_out
        if bias is not None:
            bias = _pad_vec(bias, n_out, "bias")
        return cs, bias, _pad_requant(requant, n_out), w

    def _dense_problem(self, x, w, bias, requant: Requant, axis: str):
        """The conv problem (shape, bias, requant) of a packed dense run as a 1x1 conv with its rows on ``axis``."""
        x6, w6 = _dense_as_conv(x, w, axis)
        cs, b, rq, _ = self.conv2d_problem(x6, w6, bias, stride=(1, 1), padding=(0, 0, 0, 0), groups=1,
                                           requant=requant)
        return cs, b, rq

    def dense_rows_axis(self, x, w, bias, requant: Requant) -> str:
        """Where a packed dense puts its batch rows in the 1x1 conv it runs as: ``"w"`` (the width: one DMA row,
        the faster layout) when some tiling fits the scratchpads, else ``"h"`` (rows tile like any other: a large
        batch on a small config)."""
        from compiler.topi.knobs import NoTilingError, rank_conv_knobs

        cs, b, rq = self._dense_problem(x, w, bias, requant, "w")
        key = ("dense-axis", cs, _rq_key(b, rq))
        axis = self._dense_axes.get(key)
        if axis is None:
            ep = conv2d_epilogue(self.config, cs, conv2d_compute(self.config, cs)[3], b, rq)
            try:
                rank_conv_knobs(self.config, cs, len(ep.consts), len(ep.stages), self.vthreads)
                axis = "w"
            except NoTilingError:
                axis = "h"
            self._dense_axes[key] = axis
        return axis

    def _dense_rows_tile(self, x, w, bias, requant: Requant) -> int:
        """Row blocks one program of a packed dense run with its rows as the height computes: all while the program
        stays within :attr:`max_program_insns` instructions, else as many as fit (analytic, like
        :meth:`batch_tile`: the rows are the dense's batch)."""
        from compiler.topi.knobs import choose_conv_knobs, conv_insns

        cs, b, rq = self._dense_problem(x, w, bias, requant, "h")
        key = ("dense-rows", cs, _rq_key(b, rq))
        insns = self._batch_tiles.get(key)
        if insns is None:
            ep = conv2d_epilogue(self.config, cs, conv2d_compute(self.config, cs)[3], b, rq)
            k = choose_conv_knobs(self.config, cs, len(ep.consts), len(ep.stages), vthreads=self.vthreads)
            insns = self._batch_tiles[key] = conv_insns(cs, k, len(ep.stages))
        nb = x.shape[0]
        return _even_tile(nb, nb * self.max_program_insns // max(1, insns))

    def dense_problem(self, x, w, bias, *, requant: Requant):
        """Like :meth:`conv2d_problem` for a packed dense (run as a 1x1 conv, see :meth:`dense`): the problem of its
        first program (rows tiled as :meth:`dense` tiles them)."""
        x = np.asarray(x)
        if self.dense_rows_axis(x, w, bias, requant) == "h" and x.shape[0] > 1:
            x = x[:self._dense_rows_tile(x, w, bias, requant)]
        x6, w6 = _dense_as_conv(x, w, self.dense_rows_axis(x, w, bias, requant))
        return self.conv2d_problem(x6, w6, bias, stride=(1, 1), padding=(0, 0, 0, 0), groups=1, requant=requant)

    def supports_residual(self, residual: Residual) -> str | None:
        """None when a residual Add can be fused into this backend's conv epilogue; else why not."""
        return residual_supported(self.config, residual)

    def conv2d(self, x, w, bias, *, stride, padding, groups, requant: Requant, pad_value: int = 0,
               residual: np.ndarray | None = None, residual_add: Residual | None = None) -> np.ndarray:
        """Packed int8 conv2d + bias + requant on the accelerator; see ``compiler.graph.accel_interface``.

        ``pad_value`` (int8) fills the spatial padding (the activation zero point; LOAD ``pad_value``).
        ``residual`` (int8, packed like the output) with ``residual_add`` fuses ``QAdd(conv, residual)``
        (or ``QAdd(residual, conv)``) into the epilogue (:mod:`compiler.topi.residual`).
        Planes too large for the DMA fields run as row stripes (``compiler.graph.conv_stripes``)."""
        cfg = self.config
        x, w = np.asarray(x), np.asarray(w)
        if (residual is None) != (residual_add is None):
            raise ValueError("conv2d: give both residual (the other operand) and residual_add (its QAdd), or neither")
        if residual_add is not None:
            why = residual_supported(cfg, residual_add)
            if why is not None:
                raise ValueError(f"conv2d: the residual Add cannot be fused: {why}")
        conv_args = dict(stride=stride, padding=padding, groups=groups, requant=requant, pad_value=pad_value)
        nb_t = self.batch_tile(x, w, bias, residual_add=residual_add, **conv_args) if x.ndim == 6 else x.shape[0]
        if nb_t < x.shape[0]:
            return self._in_batch_tiles(nb_t, x, w, bias, residual, residual_add, conv_args)
        rows = stripe_rows(x.shape[2], x.shape[3], w.shape[2], w.shape[3], stride, padding) if x.ndim == 6 else None
        if rows is not None and residual_add is not None:  # striped: conv on the accelerator, the Add on the host
            from jit_runtime.host_ops.int_elementwise import qadd

            y = self.conv2d(x, w, bias, stride=stride, padding=padding, groups=groups, requant=requant,
                            pad_value=pad_value)
            r = np.asarray(residual)
            return qadd(y, r, residual_add.params) if residual_add.conv_is_a else qadd(r, y, residual_add.params)
        if rows is not None:  # planes too large for the DMA fields: horizontal stripes
            profs: list[dict] = []

            def stripe(*a, **k):
                out = self.conv2d(*a, **k)
                profs.append(self.last_profile)
                return out
            out = conv2d_in_stripes(stripe, x, w, bias, stride=stride, padding=padding, rows=rows, groups=groups,
                                    requant=requant, pad_value=pad_value)
            self.last_profile = _summed(cfg, profs, "stripes")
            return out
        if residual_add is None and self.depthwise_on_dwmac(x, w, groups):
            return self._depthwise(x, w, bias, stride=stride, padding=padding, requant=requant, pad_value=pad_value)
        cs, bias, requant, w = self.conv2d_problem(x, w, bias, stride=stride, padding=padding, groups=groups,
                                                   requant=requant, pad_value=pad_value)
        rep = self._replay(cs, bias, requant, residual_add)
        comp = rep.comp
        k = comp.kernel
        inputs = {k.data: x.reshape(k.data.shape), k.weight: w.reshape(k.weight.shape)}
        if residual_add is not None:
            r = np.asarray(residual)
            if r.dtype != np.int8 or r.size != int(np.prod(k.residual.shape)):
                raise ValueError(f"conv2d: residual must be int8 packed like the output {k.residual.shape}, "
                                 f"got {r.dtype} {r.shape}")
            inputs[k.residual] = r.reshape(k.residual.shape)
        inputs.update(self._consts(comp, cs, bias, requant, residual_add))
        out, cycles, dev_prof, dev_res = self._run_replay(rep, inputs)
        self.last_profile = {"cycles": cycles, "macs": int(comp.macs), "utilization": _utilization(cfg, comp.macs, cycles),
                             "bytes": {"input": int(x.nbytes), "output": int(out.nbytes), "weight": int(w.nbytes),
                                       "bias": 0 if bias is None else 4 * int(np.size(bias))},
                             "device": dev_prof, "dram_bytes": _dram_bytes(dev_prof), "runtime": rep.program.runtime,
                             "sim_result": dev_res}
        return out.reshape(x.shape[0], w.shape[0], cs.oh, cs.ow, cfg.batch, cfg.block_out)

    def batch_tile(self, x, w, bias, *, stride, padding, groups, requant: Requant, pad_value: int = 0,
                   residual_add: Residual | None = None) -> int:
        """Batch blocks one program of this packed conv2d computes: all of them while the program stays within about
        :attr:`max_program_insns` instructions, else as many as fit (at least one); the batch then runs as
        batch tiles, one program launched per tile. Every block runs the same tiles, so the count comes from the
        instructions per block of the analytic tiling of a two-block batch (``conv_insns``/``dw_insns``; one block
        alone may tile differently), found without lowering or timing anything."""
        from compiler.topi.knobs import choose_conv_knobs, conv_insns

        x, w = np.asarray(x), np.asarray(w)
        nb = x.shape[0]
        if nb <= 1:
            return nb
        x2 = x[:2]
        if self.depthwise_on_dwmac(x2, w, groups) and residual_add is None:
            from compiler.topi.depthwise import DwShape, dw_consts, dw_insns

            ds = DwShape(2, x.shape[1], x.shape[2], x.shape[3], w.shape[2], w.shape[3],
                         tuple(int(v) for v in stride), tuple(int(v) for v in padding), int(pad_value))
            key = ("dwmac", ds, _rq_key(bias, requant))
            per_block = self._batch_tiles.get(key)
            if per_block is None:
                k = choose_dw_knobs(self.config, ds, bias, requant, dw_consts(self.config, ds, bias, requant),
                                    measure=1)
                per_block = self._batch_tiles[key] = dw_insns(ds, k, 1 if requant is not None else 0) / 2
        else:
            cs, b, rq, _ = self.conv2d_problem(x2, w, bias, stride=stride, padding=padding, groups=groups,
                                               requant=requant, pad_value=pad_value)
            key = _block_key(cs, b, rq, residual_add)
            per_block = self._batch_tiles.get(key)
            if per_block is None:
                from compiler.topi.conv2d import add_residual

                ep = conv2d_epilogue(self.config, cs, conv2d_compute(self.config, cs)[3], b, rq)
                if residual_add is not None:
                    add_residual(self.config, cs, ep, residual_add)
                k = choose_conv_knobs(self.config, cs, len(ep.consts), len(ep.stages), vthreads=self.vthreads,
                                      residual=residual_add is not None)
                per_block = self._batch_tiles[key] = conv_insns(cs, k, len(ep.stages)) / 2
        return _even_tile(nb, int(self.max_program_insns // max(1, per_block)))

    def _in_batch_tiles(self, nb_t: int, x, w, bias, residual, residual_add, conv_args: dict) -> np.ndarray:
        """The conv over batch tiles of ``nb_t`` blocks: one program compiled for a tile (and one for a smaller last
        tile, with the same tiling), launched once per tile; outputs concatenated, profiles summed."""
        profs: list[dict] = []
        outs = []
        for b0 in range(0, x.shape[0], nb_t):
            part = slice(b0, b0 + nb_t)
            outs.append(self.conv2d(x[part], w, bias, residual=None if residual is None else residual[part],
                                    residual_add=residual_add, **conv_args))
            profs.append(self.last_profile)
        self.last_profile = _summed(self.config, profs, "batch_tiles")
        return np.concatenate(outs)

    def depthwise_on_dwmac(self, x, w, groups) -> bool:
        """Whether this packed conv is a depthwise conv that runs on the ``dwmac`` intrinsic
        (:mod:`compiler.topi.depthwise`); otherwise depthwise runs as a block-diagonal GEMM."""
        from compiler.topi.depthwise import dwmac_supported

        x, w = np.asarray(x), np.asarray(w)
        return (self.use_dwmac and is_depthwise(self.config, x, w, groups)
                and dwmac_supported(self.config, w.shape[2], w.shape[3]))

    def _depthwise(self, x, w, bias, *, stride, padding, requant: Requant, pad_value: int) -> np.ndarray:
        """A packed depthwise conv2d (+ bias + requant) on the dwmac intrinsic."""
        from compiler.topi.depthwise import DwShape, depthwise_kernel, dw_consts, dw_epilogue, pack_dw_weight

        cfg = self.config
        if len(stride) != 2 or len(padding) != 4:
            raise ValueError(f"conv2d: stride must be (sy, sx) and padding (top, left, bottom, right); got {stride}, "
                             f"{padding}")
        ds = DwShape(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[2], w.shape[3],
                     tuple(int(v) for v in stride), tuple(int(v) for v in padding), int(pad_value))
        n_out = w.shape[0] * cfg.block_out
        if bias is not None:
            bias = _pad_vec(bias, n_out, "bias")
        requant = _pad_requant(requant, n_out)
        key = ("dwmac", ds, _rq_key(bias, requant))
        rep = self._replays.get(key)
        if rep is None:
            block = ("dwmac", replace(ds, nb=0), _rq_key(bias, requant))
            knobs = self._tile_knobs.get(block)
            if knobs is None:
                knobs = choose_dw_knobs(cfg, ds, bias, requant, dw_consts(cfg, ds, bias, requant))
            k = depthwise_kernel(cfg, ds, bias, requant, knobs)
            if ds.nb > 1:  # a batch tile: a smaller last tile of the same batch reuses its tiling
                self._tile_knobs.setdefault(block, k.knobs)
            func = lower(k.schedule, cfg, name="depthwise")
            comp = Compiled(k, OpBuilder(func, cfg).build(), k.epilogue.consts, ds.macs(cfg))
            rep = Replay(cfg, comp, self.device)
            self._replays[key] = rep
        comp = rep.comp
        k = comp.kernel
        wd = pack_dw_weight(cfg, w)
        inputs = {k.data: x.reshape(k.data.shape), k.weight: wd.reshape(k.weight.shape)}
        ep = dw_epilogue(cfg, ds, k.conv, bias, requant)
        inputs.update({t: arr for (t, _), (_, arr) in zip(comp.consts, ep.consts)})
        out, cycles, dev_prof, dev_res = self._run_replay(rep, inputs)
        peak = cfg.batch * cfg.block_out  # the intrinsic's MACs per cycle
        self.last_profile = {"cycles": cycles, "macs": int(comp.macs), "utilization": _utilization(cfg, comp.macs, cycles),
                             "intrinsic": "dwmac", "intrinsic_utilization": comp.macs / (peak * cycles) if cycles else 0.0,
                             "bytes": {"input": int(x.nbytes), "output": int(out.nbytes), "weight": int(wd.nbytes),
                                       "bias": 0 if bias is None else 4 * int(np.size(bias))},
                             "device": dev_prof, "dram_bytes": _dram_bytes(dev_prof), "runtime": rep.program.runtime,
                             "sim_result": dev_res}
        return out.reshape(x.shape[0], w.shape[0], ds.oh, ds.ow, cfg.batch, cfg.block_out)

    def dense(self, x, w, bias, *, requant: Requant) -> np.ndarray:
        """Packed int8 dense: (N//B, K//BI, B, BI) x (M//BO, K//BI, BO, BI) -> (N//B, M//BO, B, BO), as a 1x1 conv."""
        x, w = np.asarray(x), np.asarray(w)
        axis = self.dense_rows_axis(x, w, bias, requant)
        nb = x.shape[0]
        rows_t = self._dense_rows_tile(x, w, bias, requant) if axis == "h" and nb > 1 else nb
        if rows_t < nb:  # the rows as batch tiles, one program launched per tile (see batch_tile)
            outs, profs = [], []
            for b0 in range(0, nb, rows_t):
                outs.append(self.dense(x[b0:b0 + rows_t], w, bias, requant=requant))
                profs.append(self.last_profile)
            self.last_profile = _summed(self.config, profs, "batch_tiles")
            return np.concatenate(outs)
        x6, w6 = _dense_as_conv(x, w, axis)
        out = self.conv2d(x6, w6, bias, stride=(1, 1), padding=(0, 0, 0, 0), groups=1, requant=requant)
        return np.ascontiguousarray(out.reshape(w.shape[0], nb, x.shape[2], w.shape[2]).transpose(1, 0, 2, 3))


def _dense_as_conv(x: np.ndarray, w: np.ndarray, rows: str = "w") -> tuple[np.ndarray, np.ndarray]:
    """Packed dense operands as a 1x1 conv: rows of the batch become the spatial width (``rows="w"``,
    topi.dense_shape) or height (``"h"``); both lay the bytes out the same way."""
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"dense: x must be (N//B, K//BI, B, BI) and w (M//BO, K//BI, BO, BI); got {x.shape}, {w.shape}")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"dense: x has {x.shape[1]} K blocks but w has {w.shape[1]}")
    nb = x.shape[0]
    hw = (1, nb) if rows == "w" else (nb, 1)
    x6 = np.ascontiguousarray(x.transpose(1, 0, 2, 3)).reshape(1, x.shape[1], *hw, x.shape[2], x.shape[3])
    w6 = w.reshape(w.shape[0], w.shape[1], 1, 1, w.shape[2], w.shape[3])
    return x6, w6


def is_depthwise(cfg: HwConfig, x: np.ndarray, w: np.ndarray, groups: int) -> bool:
    """A depthwise conv (one input channel per group, depth multiplier 1) in packed layouts."""
    return (int(groups) > 1 and w.ndim == 6 and x.ndim == 6 and w.shape[1] == 1 and w.shape[0] == x.shape[1]
            and int(groups) > x.shape[1] and int(groups) <= x.shape[1] * cfg.block_in
            and cfg.block_in == cfg.block_out)


def block_diagonal(w: np.ndarray) -> np.ndarray:
    """Packed depthwise weights ``(C//BO, 1, KH, KW, BO, BI)`` (input column 0 used) as a grouped conv
    of one block per group: ``w'[..., o, i] = w[..., o, 0] if o == i else 0`` (exact: the rest are zero)."""
    bo = w.shape[4]
    eye = np.eye(bo, w.shape[5], dtype=w.dtype)
    return np.ascontiguousarray(w[..., :, :1] * eye)


def _pad_vec(v, n: int, what: str) -> np.ndarray:
    v = np.asarray(v, dtype=np.int64).reshape(-1)
    if v.size > n:
        raise ValueError(f"{what} has {v.size} channels but the weight has {n} (padded) output channels")
    return np.pad(v, (0, n - v.size))


def _pad_requant(rq: Requant, n: int) -> Requant:
    def pc(v):
        return v if np.ndim(v) == 0 else _pad_vec(v, n, "requant per-channel array")
    return Requant(rq.pre_shift, pc(rq.multiplier), pc(rq.shift), rq.relu, rq.out_min, rq.out_max, rq.extra, rq.zero_point)
