"""Run an exported module (``.vtamod``) with the runtime layer alone: numpy host ops + a device.

``load_module(path, device="sim")`` returns a :class:`RuntimeModule` with the same calling surface as the
compiler's ``Module`` (``set_input``, ``run``, ``get_output``, ``profile``, ``profile_summary``), so a board
that cannot install the compiler runs what the host compiled, bit-exact.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from jit_runtime.device import Device, make_device
from jit_runtime.errors import ModuleFileError, RuntimeApiError
from jit_runtime.host_ops import KERNELS, TAKES_N_OUTPUTS
from jit_runtime.module_file import _is_int, _spec, decode_attr, read_module_file
from jit_runtime.program import Program


class ModuleInputError(ValueError):
    """An input of an exported module with an unknown name, a wrong shape or dtype, or missing."""


class ModuleRunError(RuntimeApiError):
    """A host op of an exported module failed on what the file gave it (names the step)."""


def _check_steps(header: dict, programs: list[Program], arrays: dict[str, np.ndarray], path) -> list[dict]:
    """Every step refers to tensors defined before it, known host ops, existing programs, slots inside their
    DRAM image and gather indices inside their sources; returns the decoded steps."""
    known = {s["name"]: s for s in header["_inputs"]}
    consts = header.get("constants", {})
    if not isinstance(consts, dict):
        raise ModuleFileError(f"{path}: corrupt header: 'constants' must be an object")
    for name, key in consts.items():
        if not isinstance(key, str) or not key.startswith("const.") or key not in arrays:
            raise ModuleFileError(f"{path}: constant {name!r:.40} has no array ({key!r:.40})")
        known[name] = {"shape": arrays[key].shape, "dtype": arrays[key].dtype}
    steps = header.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ModuleFileError(f"{path}: corrupt header: 'steps' must be a non-empty list")
    out = []
    for i, st in enumerate(steps):
        where = f"{path}: step {i}"
        if not isinstance(st, dict) or st.get("kind") not in ("host", "accel") or not isinstance(st.get("name"), str) \
                or not isinstance(st.get("op"), str) or not isinstance(st.get("inputs"), list) \
                or not all(isinstance(t, str) for t in st["inputs"]):
            raise ModuleFileError(f"{where}: corrupt step {st!r:.80}")
        where = f"{where} ({st['name']!r}, {st['op']})"
        for t in st["inputs"]:
            if t and t not in known:
                raise ModuleFileError(f"{where}: input {t!r} is not defined before it (inputs, constants or an "
                                      f"earlier step)")
        st = dict(st)
        if st["kind"] == "host":
            if st["op"] not in KERNELS:
                raise ModuleFileError(f"{where}: no host-op kernel for {st['op']!r} in this runtime")
            if not isinstance(st.get("outputs"), list) or not all(isinstance(t, str) for t in st["outputs"]):
                raise ModuleFileError(f"{where}: corrupt 'outputs'")
            if not isinstance(st.get("attrs"), dict):
                raise ModuleFileError(f"{where}: corrupt 'attrs'")
            st["attrs"] = {k: decode_attr(v, arrays, f"{where} attribute {k!r}") for k, v in st["attrs"].items()}
            for t in st["outputs"]:
                if t:
                    known[t] = {}
        else:
            st.update(_check_accel(st, programs, arrays, known, where))
            known[st["output"]] = {}
        out.append(st)
    for o in header["_outputs"]:
        if o["name"] not in known:
            raise ModuleFileError(f"{path}: output {o['name']!r} is produced by no step")
    return out


def _index(arrays, key, where: str, hi: int) -> np.ndarray:
    idx = arrays.get(key) if isinstance(key, str) and key.startswith("idx.") else None
    if idx is None or idx.ndim != 1 or idx.dtype.kind != "i":
        raise ModuleFileError(f"{where}: gather index {key!r:.40} is missing or not a 1-D integer array")
    if idx.size and (idx.min() < -1 or idx.max() >= hi):
        raise ModuleFileError(f"{where}: gather index {key} holds {int(idx.min())}..{int(idx.max())}; allowed "
                              f"-1..{hi - 1}")
    return idx.astype(np.intp)


def _check_accel(st: dict, programs: list[Program], arrays, known: dict, where: str) -> dict:
    """Decode and check an accel step: its calls, slots and indices (sizes of sources come from the header)."""
    if not isinstance(st.get("output"), str) or not isinstance(st.get("calls"), list) or not st["calls"]:
        raise ModuleFileError(f"{where}: corrupt accel step (needs 'output' and a non-empty 'calls' list)")
    spec = _spec({"name": st["output"], "shape": st.get("shape"), "dtype": st.get("dtype")}, f"{where} output", where)
    sizes = st.get("input_sizes")
    if not isinstance(sizes, list) or len(sizes) != len(st["inputs"]) or not all(_is_int(s) for s in sizes):
        raise ModuleFileError(f"{where}: corrupt 'input_sizes' {sizes!r:.60}")
    total = sum(sizes)
    calls, out_total = [], 0
    for c, call in enumerate(st["calls"]):
        cw = f"{where} call {c}"
        if not isinstance(call, dict) or not _is_int(call.get("program")) or call["program"] >= len(programs) \
                or not isinstance(call.get("slots"), list):
            raise ModuleFileError(f"{cw}: corrupt call {call!r:.80}")
        prog = programs[call["program"]]
        slots = []
        for s in call["slots"]:
            if not isinstance(s, dict) or not _is_int(s.get("addr")) or not _is_int(s.get("nbytes")) \
                    or not isinstance(s.get("dtype"), str):
                raise ModuleFileError(f"{cw}: corrupt slot {s!r:.80}")
            try:
                dt = np.dtype(s["dtype"])
            except (TypeError, ValueError):
                raise ModuleFileError(f"{cw}: slot dtype {s['dtype']!r:.30} is not a dtype") from None
            if s["addr"] + s["nbytes"] > prog.dram.size or s["nbytes"] % dt.itemsize:
                raise ModuleFileError(f"{cw}: slot [{s['addr']}, {s['addr'] + s['nbytes']}) lies outside the "
                                      f"program's DRAM image of {prog.dram.size} bytes or splits a {dt} element")
            n = s["nbytes"] // dt.itemsize
            if "source" in s:
                if not _is_int(s["source"]) or s["source"] >= len(sizes) or sizes[s["source"]] != n:
                    raise ModuleFileError(f"{cw}: slot source {s['source']!r:.20} is not an input of {n} elements")
                slots.append((s["addr"], dt, s["nbytes"], int(s["source"]), None))
            else:
                idx = _index(arrays, s.get("index"), cw, total + 1)
                if idx.size != n:
                    raise ModuleFileError(f"{cw}: gather index {s.get('index')} has {idx.size} entries for a slot "
                                          f"of {n} elements")
                slots.append((s["addr"], dt, s["nbytes"], None, idx))
        out_total += prog.buffers["out"].nbytes // np.dtype(prog.buffers["out"].dtype).itemsize
        calls.append((prog, slots))
    n_out = math.prod(spec["shape"])
    out_idx = None
    if st.get("out_index") is not None:
        out_idx = _index(arrays, st["out_index"], where, out_total + 1)
        if out_idx.size != n_out:
            raise ModuleFileError(f"{where}: output gather has {out_idx.size} entries for {n_out} output elements")
    elif out_total != n_out:
        raise ModuleFileError(f"{where}: the calls store {out_total} elements; the output {spec['shape']} has {n_out}")
    return {"_calls": calls, "_out_index": out_idx, "_spec": spec}


def _gather(flat: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``flat[idx]`` with ``-1`` reading zero."""
    return np.concatenate([flat, np.zeros(1, flat.dtype)])[idx]


class RuntimeModule:
    """An exported module bound to a device: inputs, run, outputs and a per-layer profile."""

    def __init__(self, path: str | Path, device: "str | Device" = "sim", **device_options: Any) -> None:
        header, programs, arrays = read_module_file(path)
        self.path = Path(path)
        self.header = header
        self.name = header.get("name", "module")
        self.cfg = programs[0].cfg
        self.programs = programs
        for key in ("inputs", "outputs"):
            items = header.get(key)
            if not isinstance(items, list) or not items:
                raise ModuleFileError(f"{path}: corrupt header: {key!r} must be a non-empty list")
            header[f"_{key}"] = [_spec(it, f"{key}[{i}]", path) for i, it in enumerate(items)]
        self.inputs = {s["name"]: s for s in header["_inputs"]}
        self.outputs = header["_outputs"]
        self.steps = _check_steps(header, programs, arrays, path)
        self.constants = {name: arrays[key] for name, key in header.get("constants", {}).items()}
        last: dict[str, int] = {}
        for i, st in enumerate(self.steps):
            for t in st["inputs"]:
                last[t] = i
        keep = {o["name"] for o in self.outputs} | set(self.constants)
        self._free_after: dict[int, list[str]] = {}
        for t, i in last.items():
            if t and t not in keep:
                self._free_after.setdefault(i, []).append(t)
        self.device_name = device if isinstance(device, str) else type(device).__name__
        self._device = device if not isinstance(device, str) else None
        self._device_options = device_options
        self._inputs: dict[str, np.ndarray] = {}
        self._outputs: list[np.ndarray] = []
        self._profile: list[dict] = []

    # -- inputs / outputs ---------------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self.inputs)

    @property
    def output_names(self) -> list[str]:
        return [o["name"] for o in self.outputs]

    def set_input(self, name: str, array) -> None:
        """Bind an input: the shape and dtype the module was exported for (no silent casts)."""
        spec = self.inputs.get(name)
        if spec is None:
            raise ModuleInputError(f"unknown input {name!r}; the module's inputs are {self.input_names}")
        a = np.asarray(array)
        if a.shape != spec["shape"]:
            raise ModuleInputError(f"input {name!r} has shape {a.shape}; the module was exported for {spec['shape']}")
        if a.dtype != spec["dtype"]:
            raise ModuleInputError(f"input {name!r} has dtype {a.dtype}; the module takes {spec['dtype']} (convert "
                                   f"it with .astype(np.{spec['dtype'].name}) if that is what you mean)")
        self._inputs[name] = a

    def get_output(self, i: int | str = 0) -> np.ndarray:
        if not self._outputs:
            raise RuntimeError("no outputs yet: call run() first")
        if isinstance(i, str):
            if i not in self.output_names:
                raise KeyError(f"unknown output {i!r}; outputs are {self.output_names}")
            i = self.output_names.index(i)
        return self._outputs[i]

    def __call__(self, **inputs):
        outs = self.run(inputs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # -- execution ----------------------------------------------------------------------------------------
    def _dev(self) -> Device:
        if self._device is None:
            if self.device_name == "pynq":
                from jit_runtime.devices_pynq import make_pynq_device

                self._device = make_pynq_device(self.cfg, **self._device_options)
            else:
                self._device = make_device(self.device_name, self.cfg)
        return self._device

    def _run_accel(self, st: dict, ins: list[np.ndarray]) -> tuple[np.ndarray, int, int | None]:
        """Run an accelerator step's programs: (output, cycles, DRAM bytes moved or None where not counted)."""
        srcs = [np.ascontiguousarray(a).reshape(-1) for a in ins]
        flat = None
        outs, cycles, dram = [], 0, 0
        dev = self._dev()
        for prog, slots in st["_calls"]:
            image = prog.dram.copy()
            for addr, dt, nbytes, source, idx in slots:
                if source is not None:
                    data = srcs[source]
                else:
                    if flat is None:
                        flat = np.concatenate(srcs) if len(srcs) > 1 else srcs[0]
                    data = _gather(flat, idx)
                image[addr:addr + nbytes] = np.ascontiguousarray(data, dtype=dt).view(np.uint8)
            res = dev.run(image, prog.insn_addr, prog.n_insns)
            cycles += int(res.cycles)
            by = (res.profile or {}).get("bytes")
            dram = None if dram is None or not isinstance(by, dict) else dram + int(sum(by.values()))
            outs.append(prog.buffers["out"].read(image).reshape(-1))
        cat = outs[0] if len(outs) == 1 else np.concatenate(outs)
        if st["_out_index"] is not None:
            cat = _gather(cat, st["_out_index"])
        spec = st["_spec"]
        return cat.astype(spec["dtype"], copy=False).reshape(spec["shape"]), cycles, dram

    def run(self, inputs: dict | None = None, **kw) -> list[np.ndarray]:
        """Execute once; inputs may be given here (dict or keywords) or earlier with ``set_input``."""
        for k, v in {**(inputs or {}), **kw}.items():
            self.set_input(k, v)
        missing = [i for i in self.inputs if i not in self._inputs]
        if missing:
            raise ModuleInputError(f"inputs not set: {missing}; use set_input(name, array) or run({{name: array}})")
        values: dict[str, np.ndarray] = dict(self.constants)
        values.update(self._inputs)
        rows = []
        clock = float(self.cfg.clock_mhz)
        for i, st in enumerate(self.steps):
            ins = [values[t] if t else None for t in st["inputs"]]
            t0 = time.perf_counter()
            if st["kind"] == "accel":
                out, cycles, dram = self._run_accel(st, ins)
                values[st["output"]] = out
                dt = time.perf_counter() - t0
                padded = int(st.get("padded_macs", 0))
                rows.append({"name": st["name"], "op": st["op"], "target": "accel", "ran_on": f"accel:{self.device_name}",
                             "cycles": cycles, "accel_ms": cycles / (clock * 1e3),
                             "utilization": padded / (self.cfg.macs_per_cycle * cycles) if cycles else 0.0,
                             "real_macs": int(st.get("macs", 0)), "padded_macs": padded,
                             "intrinsic": st.get("intrinsic"), "dram_bytes": dram, "time_ms": dt * 1e3})
            else:
                fn = KERNELS[st["op"]]
                try:
                    if fn in TAKES_N_OUTPUTS:
                        used = max((j + 1 for j, o in enumerate(st["outputs"]) if o), default=1)
                        res = fn(st["attrs"], *ins, n_outputs=used)
                    else:
                        res = fn(st["attrs"], *ins)
                except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
                    raise ModuleRunError(f"{self.path}: step {i} ({st['name']!r}, host op {st['op']}) failed: "
                                         f"{type(exc).__name__}: {exc}") from None
                outs = list(res) if isinstance(res, tuple) else [res]
                for name, v in zip(st["outputs"], outs):
                    if name:
                        values[name] = np.asarray(v)
                dt = time.perf_counter() - t0
                rows.append({"name": st["name"], "op": st["op"], "target": "cpu", "ran_on": "cpu:numpy", "cycles": None,
                             "accel_ms": None, "utilization": None, "real_macs": int(st.get("macs", 0)),
                             "padded_macs": None, "intrinsic": None, "dram_bytes": None, "time_ms": dt * 1e3})
            for t in self._free_after.get(i, ()):
                values.pop(t, None)
        self._outputs = [np.array(values[o["name"]]) for o in self.outputs]
        self._profile = rows
        return list(self._outputs)

    # -- profile ------------------------------------------------------------------------------------------
    def profile(self) -> list[dict]:
        """Per-layer rows of the last run: name, op, target ("accel" or "cpu"), ``ran_on`` (``accel:<device>`` or
        ``cpu:numpy``), cycles, ``accel_ms`` (cycles at the config's clock) and utilization (accel rows),
        ``real_macs``, ``padded_macs`` (with block padding, accel rows) and ``time_ms`` (measured wall time of the
        step here: host-op time, or the device call's time for accel rows)."""
        if not self._profile:
            raise RuntimeError("no profile yet: call run() first")
        return [dict(r) for r in self._profile]

    def profile_summary(self) -> dict:
        """Totals of the last run: accelerator layers, cycles and their time at the clock; host layers and their
        measured time."""
        rows = self.profile()
        acc = [r for r in rows if r["target"] == "accel"]
        cycles = sum(r["cycles"] for r in acc)
        accel_ms = cycles / (float(self.cfg.clock_mhz) * 1e3)
        cpu_ms = sum(r["time_ms"] for r in rows if r["target"] == "cpu")
        return {"accel_layers": len(acc), "cpu_layers": len(rows) - len(acc), "accel_cycles": cycles,
                "accel_time_ms": accel_ms, "cpu_time_ms": cpu_ms, "end_to_end_ms": accel_ms + cpu_ms,
                "real_macs": sum(r["real_macs"] for r in rows),
                "macs": sum(r["padded_macs"] for r in acc)}

    def layer_programs(self) -> list[tuple[str, int, Program]]:
        """``(layer name, call index, Program)`` of every accelerator program, in run order (``vta sim/disasm
        --layer``)."""
        return [(st["name"], c, prog) for st in self.steps if st["kind"] == "accel"
                for c, (prog, _) in enumerate(st["_calls"])]


def load_module(path: str | Path, device: "str | Device" = "sim", **device_options: Any) -> RuntimeModule:
    """Load an exported module (``Module.export`` / ``vta build``) and bind it to ``device`` ("sim", "rtl",
    "pynq" with ``bitstream=...``, or a Device object); raises :class:`jit_runtime.errors.ModuleFileError` on a
    damaged or mismatched file."""
    return RuntimeModule(path, device, **device_options)
