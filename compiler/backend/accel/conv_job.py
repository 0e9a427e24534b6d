"""A conv2d layer compiled by the accelerator backend, as a co-simulation job (the RTL tests and ``bench_rtl`` replay it).

:func:`compiled_conv2d` compiles a packed int8 conv2d (+ bias + requant) with
:class:`compiler.backend.accel.backend.SimAccelBackend`, runs it on the simulator through a recording
runtime device and returns the DRAM image the device received (a co-simulation job), the
simulator's final image and cycles, the output read back and the numpy reference.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.config import HwConfig


def ref_conv2d(x, w, bias, pad, rq, pad_value: int = 0):
    """int64 reference of a stride-1 NCHW conv2d with symmetric ``pad`` (of ``pad_value``), then ``apply_requant``."""
    from jit_runtime.host_ops.requant import apply_requant

    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=pad_value)
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    acc = np.zeros((n, o, oh, ow), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + oh, kx:kx + ow], w[:, :, ky, kx].astype(np.int64))
    return apply_requant(acc, bias, rq)


class RecordingSim:
    """A runtime device: runs the simulator and records (input image, insn_addr, n_insns, output image, cycles)."""

    def __init__(self, cfg: HwConfig):
        from simulator import Simulator

        self.sim, self.runs = Simulator(cfg), []

    def run(self, dram, insn_addr, n_insns):
        before = dram.copy()
        res = self.sim.run(dram, insn_addr, n_insns)
        self.runs.append((before, insn_addr, n_insns, dram.copy(), int(res.cycles)))
        return res


@dataclass
class ConvJob:
    job: tuple[np.ndarray, int, int]  # (dram image, insn_addr, n_insns) as the device received it
    sim_dram: np.ndarray
    sim_cycles: int
    output: np.ndarray  # the backend's result (from the simulator run), packed
    expected: np.ndarray  # numpy reference, packed
    read_output: object  # image -> packed output
    insns: list
    device: RecordingSim


def compiled_conv2d(cfg: HwConfig, c: int = 16, o: int = 32, hw: int = 8, k: int = 3, pad: int = 1,
                    seed: int = 7, pad_value: int = 0, requant=None) -> ConvJob:
    """The layer with ``requant`` (default: rounding shift by 10 + relu) and padding of ``pad_value``."""
    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.graph.accel_interface import pack_activation, pack_weight
    from jit_runtime.host_ops.requant import Requant
    from isa import decode_stream

    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, c, hw, hw)).astype(np.int8)
    w = rng.integers(-128, 128, (o, c, k, k)).astype(np.int8)
    bias = rng.integers(-5000, 5000, o).astype(np.int32)
    rq = requant or Requant(shift=10, relu=True, out_min=0, out_max=127)
    dev = RecordingSim(cfg)
    be = SimAccelBackend(cfg, device=dev)
    got = be.conv2d(pack_activation(x, cfg.batch, cfg.block_in), pack_weight(w, cfg.block_out, cfg.block_in), bias,
                    stride=(1, 1), padding=(pad,) * 4, groups=1, requant=rq, pad_value=pad_value)
    expected = pack_activation(ref_conv2d(x, w, bias, pad, rq, pad_value), cfg.batch, cfg.block_out)
    assert len(dev.runs) == 1, "the backend ran the device more than once"
    img_in, addr, n, sim_img, cycles = dev.runs[0]
    rep = next(iter(be._replays.values()))
    insns = decode_stream(img_in[addr:addr + 16 * n], cfg)
    return ConvJob((img_in, addr, n), sim_img, cycles, got, expected,
                   lambda image: rep.out.read(image).reshape(got.shape), insns, dev)
