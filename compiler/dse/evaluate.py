"""Pure evaluation functions of the design-space exploration: (config, model) -> record.

Each takes plain data (a config's field dict, the model's bytes) and returns a JSON-ready dict, never raising for
a point that does not work (the record carries the ``error``): the same function runs in a plain loop, a process
pool or as a Ray task (:mod:`compiler.scaleout`) and gives the same record.

- :func:`latency_record`: the model's accelerator cycles on the config, from the timing engine alone
  (:class:`compiler.backend.accel.measure.TimingOnlyDevice`: the cycle-accurate simulator's timing, no arithmetic; a
  program's cycles never depend on its data, docs/timing.md), and the latency at the config's clock.
- :func:`estimate_resources`: an analytic LUT/DSP/RAMB36 estimate (no tools), used to skip synthesizing points that
  cannot be on the Pareto front.

The synthesis itself (:func:`hw.synth.synth_record`, yosys) lives in ``hw``; the caller passes it in
(:class:`compiler.dse.sweep.ResourceModel`), so ``compiler`` does not import ``hw``.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

from isa.config import HwConfig, make_config

#: Config fields that change neither a program's cycles nor the RTL (reports only).
_NAME_ONLY = ("name",)


def config_from(fields: dict[str, Any]) -> HwConfig:
    """The config of a point from its field dict (validated by :class:`isa.config.HwConfig`)."""
    return make_config(dict(fields))


def model_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


#: Conv tilings timed per layer shape, as ``compiler.build(..., target="sim")`` does (1: the analytic choice alone).
DEFAULT_TUNE = 2


def latency_key(fields: dict[str, Any], model_hash: str, tune: int = DEFAULT_TUNE) -> str:
    """Cache key of a latency record: every config field but the name, the model's hash and ``tune``."""
    body = {k: v for k, v in fields.items() if k not in _NAME_ONLY}
    ident = [body, model_hash] if tune == DEFAULT_TUNE else [body, model_hash, {"tune": tune}]
    return "lat-" + hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]


def _zero_feeds(mod) -> dict:
    import numpy as np

    feeds = {}
    for name in mod.input_names:
        info = mod.input_info(name)
        shape = tuple(int(d) for d in info.shape)
        feeds[name] = np.zeros(shape, dtype=np.dtype(info.dtype))
    return feeds


def latency_record(fields: dict[str, Any], model: bytes, tune: int = DEFAULT_TUNE) -> dict[str, Any]:
    """Compile the int8 ONNX ``model`` for the config ``fields`` and time every accelerator layer by the timing
    contract. ``tune``: conv tilings timed per layer shape (the ``sim`` backend's default 2; 1 takes the analytic
    choice alone, about a third of the work, the latency of ``SimAccelBackend(tune=1)``). Returns ``cycles`` (accelerator cycles of one inference), ``latency_ms`` (at ``clock_mhz``), layer
    counts, ``seconds`` and ``cpu_seconds`` (wall and CPU time of the evaluation; not part of the result's
    identity), or ``error``."""
    t0, c0 = time.perf_counter(), time.process_time()
    rec: dict[str, Any] = {"cycles": None, "latency_ms": None, "error": None}
    try:
        import onnx

        from compiler.backend.accel.backend import SimAccelBackend
        from compiler.executor.registry import create_cpu_backend
        from compiler.executor.module import Module
        from compiler.executor.pipeline import compile_model
        from compiler.backend.accel.measure import TimingOnlyDevice

        cfg = config_from(fields)
        proto = onnx.load_model_from_string(model) if isinstance(model, (bytes, bytearray)) else onnx.load(model)
        compiled = compile_model(proto, cfg, progress=False)
        if not isinstance(tune, int) or tune < 1:
            raise ValueError(f"tune must be an integer >= 1, got {tune!r}")
        backend = SimAccelBackend(cfg, device=TimingOnlyDevice(cfg), tune=tune)
        mod = Module(compiled, backend, create_cpu_backend(None), progress=False)
        mod.run(_zero_feeds(mod))
        s = mod.profile_summary()
        rec.update(cycles=int(s["accel_cycles"]), latency_ms=round(s["accel_cycles"] / (cfg.clock_mhz * 1e3), 6),
                   accel_layers=int(s["accel_layers"]), cpu_layers=int(s["cpu_layers"]),
                   accel_macs=int(s["macs"]))
    except Exception as exc:  # noqa: BLE001 - a point the compiler cannot serve is a result, not a crash
        rec["error"] = f"{type(exc).__name__}: {exc}"
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    rec["cpu_seconds"] = round(time.process_time() - c0, 3)
    return rec


def latency_cost(fields: dict[str, Any]) -> tuple:
    """A sort key that puts the slower latency evaluations first (largest first: the schedule that spreads
    evaluations over workers most evenly). Compile and timing work grows with the number of tiles a layer is
    cut into: with fewer MACs per cycle (more GEMM blocks) and smaller scratchpads (more, smaller tiles)."""
    c = config_from(fields)
    return (-1.0 / c.macs_per_cycle, -1.0 / (c.inp_buff_size + c.wgt_buff_size + c.acc_buff_size),
            -1.0 / c.bus_width)


#: RAMB36 geometry: 36 Kbit, at most 72 bits wide (simple dual port).
_RAMB36_BITS, _RAMB36_WIDTH = 36 * 1024, 72


def _rams(depth: int, width_bits: int) -> int:
    return max(math.ceil(depth * width_bits / _RAMB36_BITS), math.ceil(width_bits / _RAMB36_WIDTH))


def estimate_resources(fields: dict[str, Any]) -> dict[str, int]:
    """Analytic LUT/DSP/RAMB36 estimate of a config's RTL (Xilinx 7-series terms).

    Calibrated on the pynq-z1 synthesis in docs/fpga.md (41.6k LUT, 208 DSP48E1, 137 RAMB36): int8 products are
    paired two per DSP48E1, each ALU lane takes 5 DSPs (32x32 MUL / REQUANT) and ~1,000 LUTs, each GEMM product
    ~80 LUTs of adder tree and operand muxing; scratchpads are RAMB36s by capacity or width (acc twice: the ALU's
    source port is a copy). Only its order matters: it decides which points are not worth synthesizing."""
    c = config_from(fields)
    lanes = c.batch * c.block_out
    dsp = math.ceil(c.macs_per_cycle * max(c.inp_width, c.wgt_width) / 16) + 5 * lanes
    lut = 4000 + 80 * c.macs_per_cycle + 1000 * lanes + 20 * c.bus_width
    bram = (_rams(c.wgt_depth, c.wgt_elem_bytes * 8) + 2 * _rams(c.acc_depth, c.acc_elem_bytes * 8)
            + _rams(c.inp_depth, c.inp_elem_bytes * 8) + _rams(c.acc_depth, c.out_elem_bytes * 8)
            + _rams(c.uop_depth, 32))
    return {"LUT": int(lut), "DSP": int(dsp), "RAMB36": int(bram)}
