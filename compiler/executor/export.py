"""Export a compiled ``Module`` as one file the runtime layer runs alone (:mod:`jit_runtime.module_file`).

Accelerator layers are compiled on first use (a program per shape, inputs patched into its DRAM image), so
export runs the model once and records every program run. How each layer's input bytes reach its
programs' slots and how the programs' outputs form the layer output (dense as a 1x1 conv, row stripes of
large planes, depthwise weight packing, ...) is captured by *index tracing*: the layer runs again with
inputs whose values encode their element indices, base-127 digit by digit (``0`` marks a lane no input
element reaches), with the programs replaced by ones that return their output indices the same way. The
decoded maps are checked against the real run before they are written. Weights and epilogue constants
are written into the programs' DRAM images; only activations travel at run time.
"""
from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

import numpy as np

from compiler.graph.ir import Node
from compiler.graph.offload import node_macs
from compiler.graph.partition import node_target
from jit_runtime.host_ops import KERNELS
from jit_runtime.module_file import encode_attr, save_module_file
from jit_runtime.program import Program

BASE = 127  # digits 0..126 fit int8 (and every output dtype)
#: attributes that only describe a node (not read by its kernel): left out of the file
INFO_ATTRS = frozenset({"fusion_group", "host_reason"})


class ExportError(ValueError):
    """A module that cannot be exported (its target compiles no programs, a layer whose data movement could not
    be captured, an attribute an exported module cannot hold)."""


def call_accel(backend, n: Node, ins: list, residual: bool, out: np.ndarray | None = None) -> np.ndarray:
    """Run accelerator node ``n`` on ``backend`` (``residual``: with its fused residual Add; ``out``: an array the
    backend may write the result into, passed only to backends with ``writes_into``)."""
    a = n.attrs
    extra = {"out": out} if out is not None else {}
    if n.op == "AccelConv2D":
        if a.get("pad_value"):
            extra["pad_value"] = int(a["pad_value"])
        if residual:
            extra.update(residual=ins[3], residual_add=a["residual"])
        return backend.conv2d(ins[0], ins[1], ins[2], stride=tuple(a["strides"]), padding=tuple(a["pads"]),
                              groups=int(a.get("group", 1)), requant=a["requant"], **extra)
    return backend.dense(ins[0], ins[1], ins[2], requant=a["requant"], **extra)


def _digits(n: int) -> int:
    d = 1
    while BASE ** d <= n:
        d += 1
    return d


def _code(offset: int, size: int, p: int) -> np.ndarray:
    """Digit ``p`` of ``index + 1`` for indices ``offset .. offset + size - 1``."""
    return ((np.arange(offset, offset + size, dtype=np.int64) + 1) // BASE ** p) % BASE


class _LayerCapture:
    """The programs one accelerator layer runs and the index maps of its inputs and output."""

    def __init__(self, backend, n: Node, ins: list, residual: bool, positions: list[int]) -> None:
        self.backend, self.n, self.ins, self.residual, self.positions = backend, n, ins, residual, positions
        self.sizes = [int(np.asarray(ins[p]).size) for p in positions]
        self.offsets = np.cumsum([0] + self.sizes)

    def run(self) -> None:
        real: list = []

        def record(rep, inputs):
            res = rep.run(inputs)
            real.append((rep, inputs, np.asarray(res[0]).reshape(-1)))
            return res
        self.backend.replay_hook = record
        try:
            self.out = np.asarray(call_accel(self.backend, self.n, self.ins, self.residual))
            self.profile = dict(self.backend.last_profile)
        finally:
            self.backend.replay_hook = None
        self.calls = real
        out_sizes = [o.size for _, _, o in real]
        out_offsets = np.cumsum([0] + out_sizes)
        n_digits = _digits(max(int(self.offsets[-1]), int(out_offsets[-1])) + 1)
        slot_idx = [{t: np.zeros(np.asarray(a).size, np.int64) for t, a in inputs.items() if t not in self._consts(rep)}
                    for rep, inputs, _ in real]
        out_idx = np.zeros(self.out.size, np.int64)
        for p in range(n_digits):
            coded = list(self.ins)
            for pos, off, size in zip(self.positions, self.offsets, self.sizes):
                coded[pos] = _code(int(off), size, p).astype(np.int8).reshape(np.shape(self.ins[pos]))
            k = [0]

            def fake(rep, inputs):
                j = k[0]
                k[0] += 1
                if j >= len(real) or rep is not real[j][0]:
                    raise ExportError(f"layer {self.n.name!r}: the programs it runs depend on its input values")
                for t in slot_idx[j]:
                    slot_idx[j][t] += np.asarray(inputs[t]).reshape(-1).astype(np.int64) * BASE ** p
                o = _code(int(out_offsets[j]), out_sizes[j], p).astype(rep.out.dtype).reshape(rep.out.shape)
                return o, 0, {}, None
            self.backend.replay_hook = fake
            try:
                got = np.asarray(call_accel(self.backend, self.n, coded, self.residual))
            finally:
                self.backend.replay_hook = None
            out_idx += got.reshape(-1).astype(np.int64) * BASE ** p
        self.slot_idx = [{t: v - 1 for t, v in d.items()} for d in slot_idx]
        self.out_idx = out_idx - 1
        self._verify()

    @staticmethod
    def _consts(rep) -> set:
        return {t for t, _ in rep.comp.consts}

    def _flat(self) -> np.ndarray:
        return np.concatenate([np.asarray(self.ins[p]).reshape(-1) for p in self.positions])

    def _verify(self) -> None:
        """The decoded maps reproduce the real run's slot bytes and layer output exactly."""
        flat = np.concatenate([self._flat(), np.zeros(1, np.int8)])
        for j, (rep, inputs, _) in enumerate(self.calls):
            for t, idx in self.slot_idx[j].items():
                if not np.array_equal(flat[idx], np.asarray(inputs[t]).reshape(-1)):
                    raise ExportError(f"layer {self.n.name!r}: the bytes of its program input {t.name!r} could not "
                                      "be traced to the layer's inputs (is it computed from them?)")
        outs = np.concatenate([o for _, _, o in self.calls] + [np.zeros(1, self.calls[0][2].dtype)])
        if not np.array_equal(outs[self.out_idx], self.out.reshape(-1)):
            raise ExportError(f"layer {self.n.name!r}: its output could not be traced to its programs' outputs")


def _is_range(idx: np.ndarray, start: int) -> bool:
    return bool(idx.size) and idx[0] == start and idx[-1] == start + idx.size - 1 and \
        np.array_equal(idx, np.arange(start, start + idx.size))


class _Exporter:
    def __init__(self, mod) -> None:
        self.mod = mod
        self.g = mod.graph
        self.steps: list[dict] = []
        self.programs: list[Program] = []
        self._stored: dict = {}  # (program, image digest) -> its index in programs
        self.arrays: dict[str, np.ndarray] = {}

    def _index(self, idx: np.ndarray) -> str:
        key = f"idx.{sum(k.startswith('idx.') for k in self.arrays)}"
        self.arrays[key] = idx.astype(np.int32 if idx.max(initial=0) < 2 ** 31 else np.int64)
        return key

    def accel(self, n: Node, ins: list) -> np.ndarray:
        from compiler.graph.conv_stripes import stripe_rows

        backend = self.mod.accel
        res = n.attrs.get("residual") if n.op == "AccelConv2D" else None
        native = res is not None and backend.supports_residual(res) is None and \
            stripe_rows(ins[0].shape[2], ins[0].shape[3], ins[1].shape[2], ins[1].shape[3], n.attrs["strides"],
                        n.attrs["pads"]) is None
        positions = [0, 1] + ([3] if native else [])
        if len(n.inputs) > 2 and n.inputs[2] and n.inputs[2] not in self.g.constants:
            raise ExportError(f"layer {n.name!r} ({n.op}): its bias {n.inputs[2]!r} is computed at run time; an "
                              "exported module bakes biases into the programs, so they must be constants")
        cap = _LayerCapture(backend, n, ins, native, positions)
        cap.run()
        names = [n.inputs[p] for p in positions]
        const = [nm in self.g.constants for nm in names]
        flat = np.concatenate([cap._flat(), np.zeros(1, np.int8)])
        calls, referenced = [], set()
        for j, (rep, inputs, _) in enumerate(cap.calls):
            image = rep.program.dram.copy()
            consts = cap._consts(rep)
            slots = []
            for t, (addr, dt, nbytes) in rep.where.items():
                if t in consts:
                    image[addr:addr + nbytes] = np.ascontiguousarray(inputs[t], dtype=dt).reshape(-1).view(np.uint8)
                    continue
                idx = cap.slot_idx[j][t]
                src = np.searchsorted(cap.offsets, idx, side="right") - 1  # which traced input each index reads
                used = set(src[idx >= 0].tolist())
                if used and all(const[u] for u in used):  # weights: written into the image once
                    image[addr:addr + nbytes] = flat[idx].astype(dt).view(np.uint8)
                    continue
                whole = [u for u in used if cap.sizes[u] == idx.size and _is_range(idx, int(cap.offsets[u]))]
                if whole:
                    slots.append({"addr": int(addr), "dtype": np.dtype(dt).str, "nbytes": int(nbytes), "source": whole[0]})
                else:
                    slots.append({"addr": int(addr), "dtype": np.dtype(dt).str, "nbytes": int(nbytes), "_idx": idx})
                referenced |= used
            p = rep.program
            same = (id(p), hashlib.sha256(image.tobytes()).hexdigest())
            if same not in self._stored:  # batch tiles run one program many times: stored once
                self.programs.append(Program(p.cfg, p.insn_bytes, image, p.insn_addr, p.n_insns, dict(p.buffers), {},
                                             dict(p.runtime), f"{n.name} call {j}"))
                self._stored[same] = len(self.programs) - 1
            calls.append({"program": self._stored[same], "slots": slots})
        # inputs the remaining slots read, their indices renumbered over just those
        keep = sorted(referenced | {s["source"] for c in calls for s in c["slots"] if "source" in s})
        new_off = dict(zip(keep, np.cumsum([0] + [cap.sizes[u] for u in keep])))
        for c in calls:
            for s in c["slots"]:
                if "source" in s:
                    s["source"] = keep.index(s["source"])
                else:
                    idx = s.pop("_idx")
                    src = np.searchsorted(cap.offsets, idx, side="right") - 1
                    shift = np.array([new_off.get(u, 0) - int(cap.offsets[u]) for u in range(len(cap.sizes))])
                    s["index"] = self._index(np.where(idx >= 0, idx + shift[np.clip(src, 0, None)], -1))
        out_idx = cap.out_idx
        identity = _is_range(out_idx, 0) and out_idx.size == sum(o.size for _, _, o in cap.calls)
        out_name = n.outputs[0] if not (res is not None and not native) else self.g.fresh_name(f"{n.outputs[0]}/conv")
        prof = cap.profile
        self.steps.append({"kind": "accel", "name": n.name, "op": n.op, "inputs": [names[u] for u in keep],
                           "input_sizes": [cap.sizes[u] for u in keep], "output": out_name,
                           "shape": list(cap.out.shape), "dtype": cap.out.dtype.str, "calls": calls,
                           "out_index": None if identity else self._index(out_idx),
                           "macs": node_macs(self.g, n), "padded_macs": int(prof.get("macs", 0)),
                           "intrinsic": prof.get("intrinsic", "gemm")})
        out = cap.out
        if res is not None and not native:  # the residual Add on the host, as Module runs it
            self.steps.append({"kind": "host", "name": f"{n.name}/residual_add", "op": "QAdd",
                               "inputs": [out_name, n.inputs[3]] if res.conv_is_a else [n.inputs[3], out_name],
                               "outputs": [n.outputs[0]], "attrs": {"qadd": encode_attr(res.params, self.arrays, n.name)}})
            out = KERNELS["QAdd"]({"qadd": res.params}, *((out, ins[3]) if res.conv_is_a else (ins[3], out)))
        return out

    def host(self, n: Node, ins: list) -> list[np.ndarray]:
        if n.op not in KERNELS:
            raise ExportError(f"layer {n.name!r}: op {n.op!r} has no host-op kernel in the runtime")
        attrs = {k: encode_attr(v, self.arrays, f"layer {n.name!r} attribute {k!r}")
                 for k, v in n.attrs.items() if k not in INFO_ATTRS}
        self.steps.append({"kind": "host", "name": n.name, "op": n.op, "inputs": list(n.inputs),
                           "outputs": list(n.outputs), "attrs": attrs, "macs": node_macs(self.g, n)})
        from compiler.graph.cpu_backend import NumpyCpuBackend

        return NumpyCpuBackend().run_node(n, ins)

    def export(self, path, feeds: dict[str, np.ndarray], target: str) -> Path:
        g = self.g
        values = dict(g.constants)
        values.update(feeds)
        for n in g.nodes:
            ins = [values[i] if i else None for i in n.inputs]
            if node_target(n) == "accel":
                values[n.outputs[0]] = self.accel(n, ins)
            else:
                for name, v in zip(n.outputs, self.host(n, ins)):
                    if name:
                        values[name] = v
        used = {t for st in self.steps for t in st["inputs"] if t in g.constants}
        constants = {}
        for k, name in enumerate(sorted(used)):
            constants[name] = f"const.{k}"
            self.arrays[f"const.{k}"] = np.asarray(g.constants[name])
        spec = [{"name": i, "shape": list(g.tensors[i].shape), "dtype": np.dtype(g.tensors[i].dtype).str}
                for i in g.inputs]
        outs = [{"name": o, "shape": list(np.shape(values[o])), "dtype": np.asarray(values[o]).dtype.str}
                for o in g.outputs]
        try:
            version = metadata.version("vta-stack")
        except metadata.PackageNotFoundError:
            version = "source"
        header = {"name": g.name, "inputs": spec, "outputs": outs, "constants": constants, "steps": self.steps,
                  "producer": {"vta-stack": version, "target": target}}
        return save_module_file(path, header, self.programs, self.arrays)


def export_module(mod, path: str | Path, inputs: dict | None = None) -> Path:
    """Write ``mod`` (built for an accelerator target that compiles programs: sim, rtl, pynq) to ``path``.

    ``inputs``: sample feeds to run the export with (default: the inputs last set, else zeros); the programs do
    not depend on them, only on shapes."""
    if not callable(getattr(mod.accel, "_run_replay", None)) or not hasattr(mod.accel, "replay_hook"):
        raise ExportError(f"a module built for target {getattr(mod, 'target', type(mod.accel).__name__)!r} cannot be "
                          "exported: export records accelerator programs; build for target 'sim' (or rtl/pynq)")
    feeds = {}
    for name in mod.graph.inputs:
        info = mod.graph.tensors[name]
        given = (inputs or {}).get(name, mod._inputs.get(name))
        feeds[name] = np.zeros(info.shape, info.dtype) if given is None else np.asarray(given).astype(info.dtype)
    n_accel = sum(node_target(n) == "accel" for n in mod.graph.nodes)
    if not n_accel:
        raise ExportError("the model has no accelerator layers: nothing to export (it runs on the host alone)")
    return _Exporter(mod).export(path, feeds, str(getattr(mod.accel, "runs_on", "accel")))
