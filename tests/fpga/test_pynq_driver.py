"""The pynq host driver (jit_runtime.devices_pynq) on the RTL-backed pynq shim (hw/cosim/pynq_shim.py), tiny config:
suite and random programs and a compiled model's accelerator layers byte- and cycle-exact with the simulator,
and the bad-input paths (signature mismatch, missing .hwh, memory outside the contiguous buffer) refused
before anything runs. The >= 50-program proof is benchmarks/bench_pynq_cosim.py."""
from __future__ import annotations

import shutil
import types

import numpy as np
import pytest

from isa import make_config

CFG = make_config("tiny")  # the overlay and shim fixtures (conftest.py) are built for it
pytestmark = pytest.mark.xdist_group("pynq-shim")  # one worker: one shim process for the module


@pytest.fixture(scope="module")
def device(shim, overlay):
    from jit_runtime.devices_pynq import PynqDevice

    return PynqDevice(CFG, overlay, pynq=shim)


def test_suite_and_random_programs_match_the_simulator(device, shim):
    from hw.cosim.pynq_check import CrossCheckDevice
    from hw.random_programs import random_program
    from jit_runtime.suite import suite_cases

    xc = CrossCheckDevice(CFG, device)
    cases = suite_cases(CFG)
    progs = [(n, cases[n]()[0]) for n in ("relu", "padded_load_all", "gemm_vt2", "alu_mul_tensor")]
    progs += [(f"random{s}", random_program(CFG, s)) for s in range(4)]
    before = dict(shim.stats)
    for name, p in progs:
        xc.label = name
        dram = p.dram.copy()
        res = xc.run(dram, p.insn_addr, p.n_insns)
        # the accelerator saw physical addresses: the image sits in the shim's contiguous region
        assert shim.phys_base <= res.profile["image_phys_addr"] < shim.phys_base + shim.mem_bytes
        assert res.profile["image_phys_addr"] % 4096 == 0
    assert xc.mismatches == [] and len(xc.checks) == len(progs)
    assert all(c.sim_cycles > 0 for c in xc.checks)
    n = len(progs)
    assert shim.stats["flush"] - before["flush"] == n and shim.stats["invalidate"] - before["invalidate"] == n
    assert shim.stats["irq_fired"] - before["irq_fired"] >= n  # every run ended by its interrupt (axi_intc, UIO)


def test_polling_wait_gives_the_same_result(shim, overlay):
    """wait='poll' (no interrupt): CTRL.done polled over MMIO while the design runs."""
    from jit_runtime.devices_pynq import PynqDevice
    from jit_runtime.suite import suite_cases
    from simulator import Simulator

    p = suite_cases(CFG)["relu"]()[0]
    loaded = shim.overlay or shim.Overlay(str(overlay))  # this worker may not have run the device fixture
    dev = PynqDevice(CFG, overlay, pynq=types.SimpleNamespace(Overlay=lambda path: loaded, MMIO=shim.MMIO,
                                                              Interrupt=shim.Interrupt, allocate=shim.allocate),
                     wait="poll")
    assert dev.irq is None
    a, b = p.dram.copy(), p.dram.copy()
    want = Simulator(CFG).run(a, p.insn_addr, p.n_insns)
    waits = shim.stats["irq_fired"]
    got = dev.run(b, p.insn_addr, p.n_insns)
    assert np.array_equal(a, b) and got.cycles == int(want.cycles) and shim.stats["irq_fired"] == waits
    dev.close()


def test_signature_mismatch_is_refused_before_anything_runs(shim, overlay):
    from jit_runtime import ConfigMismatchError
    from jit_runtime.devices_pynq import PynqDevice
    from isa.signature import config_signature

    host = CFG.replace(name="tiny-big-acc", acc_buff_size=4096)
    loaded = shim.overlay or shim.Overlay(str(overlay))  # this worker may not have run the device fixture
    writes = shim.stats["mmio_write"]
    with pytest.raises(ConfigMismatchError, match=rf"reads 0x{config_signature(CFG):08X}.*'tiny-big-acc' has "
                                                  rf"signature 0x{config_signature(host):08X}.*nothing was run"):
        PynqDevice(host, overlay, pynq=types.SimpleNamespace(Overlay=lambda path: loaded, MMIO=shim.MMIO,
                                                             Interrupt=shim.Interrupt, allocate=shim.allocate))
    assert shim.stats["mmio_write"] == writes
    # a name, clock or DRAM latency alone does not change the signature
    assert config_signature(CFG.replace(name="x", clock_mhz=50.0, dram_latency=20)) == config_signature(CFG)


def test_missing_hwh_is_refused_before_the_overlay_loads(tmp_path, overlay):
    from hw.cosim.pynq_shim import PynqShim
    from jit_runtime import BitstreamError
    from jit_runtime.devices_pynq import PynqDevice

    shutil.copy(overlay, tmp_path / "vta.bit")
    with PynqShim(mem_bytes=1 << 20) as fresh:
        with pytest.raises(BitstreamError, match=r"vta.hwh is missing beside .*vta.bit.*copy it|copy both"):
            PynqDevice(CFG, tmp_path / "vta.bit", pynq=fresh)
        assert fresh.backend is None and fresh.overlay is None  # nothing loaded, nothing started
        with pytest.raises(BitstreamError, match="does not exist"):
            PynqDevice(CFG, tmp_path / "nope.bit", pynq=fresh)


def test_memory_outside_the_contiguous_buffer_is_refused(device, shim):
    from dataclasses import replace

    from isa import decode_stream, encode_stream
    from jit_runtime import ContiguousMemoryError
    from jit_runtime.devices_pynq import PynqDevice
    from jit_runtime.suite import suite_cases

    p = suite_cases(CFG)["relu"]()[0]
    insns = decode_stream(p.insn_bytes, CFG)
    i = next(k for k, x in enumerate(insns) if type(x).__name__ == "Store")
    insns[i] = replace(insns[i], dram_base=p.dram.size)  # a STORE past the end of the image
    dram = p.dram.copy()
    dram[p.insn_addr:p.insn_addr + 16 * len(insns)] = encode_stream(insns, CFG).reshape(-1)
    writes = shim.stats["mmio_write"]
    with pytest.raises(ContiguousMemoryError, match=rf"instruction {i} \(STORE\) reaches DRAM bytes .*outside the "
                                                    rf"{p.dram.size}-byte image.*nothing was run"):
        device.run(dram, p.insn_addr, p.n_insns)
    with pytest.raises(ContiguousMemoryError, match="instructions .* outside"):
        device.run(p.dram.copy(), p.dram.size - 16, 4)
    assert shim.stats["mmio_write"] == writes
    # a buffer that is not physically contiguous memory (no physical address) is refused too
    dev = PynqDevice(CFG, device.bitstream, pynq=types.SimpleNamespace(
        Overlay=lambda path: shim.overlay, MMIO=shim.MMIO, Interrupt=shim.Interrupt,
        allocate=lambda shape, dtype: np.zeros(shape, dtype)))
    with pytest.raises(ContiguousMemoryError, match="not in contiguous memory"):
        dev.run(p.dram.copy(), p.insn_addr, p.n_insns)
    assert shim.stats["mmio_write"] == writes


def test_no_pynq_and_no_bitstream_are_clear_errors(monkeypatch):
    import builtins

    from jit_runtime import BitstreamError
    from jit_runtime.devices_pynq import _import_pynq, make_pynq_device

    monkeypatch.delenv("VTA_BITSTREAM", raising=False)
    with pytest.raises(BitstreamError, match="needs a bitstream.*--bitstream FILE"):
        make_pynq_device(CFG)
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "pynq" else real(name, *a, **k))
    with pytest.raises(BitstreamError, match="pip install pynq"):
        _import_pynq()


def _small_model():
    from compiler.zoo.builder import OnnxBuilder

    b = OnnxBuilder(7)
    y = b.conv_bn("input", 3, 8, 3)
    y = b.conv_bn(y, 8, 8, 3, stride=2)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    return b.model("m", "input", (1, 3, 8, 8), b.gemm(y, 8, 4))


def test_compiled_model_on_the_pynq_target_equals_the_sim_target(overlay):
    """build(model, target="pynq") with the shim: same outputs and per-layer cycles as target="sim"."""
    from compiler.executor import build
    from hw.cosim.pynq_shim import PynqShim

    rng = np.random.default_rng(0)
    calib = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ms = build(_small_model(), CFG, target="sim", calibration=calib, progress=False)
    ms.set_input("input", x)
    want = ms.run()
    with PynqShim(mem_bytes=16 << 20) as s:
        mp = build(_small_model(), CFG, target="pynq", calibration=calib, progress=False,
                   target_options={"bitstream": overlay, "pynq": s})
        mp.set_input("input", x)
        got = mp.run()
        assert s.stats["flush"] >= 3  # the two convolutions and the dense layer ran through the driver
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    cyc = [r.get("cycles") for r in mp.profile() if r.get("cycles")]
    assert cyc == [r.get("cycles") for r in ms.profile() if r.get("cycles")] and len(cyc) >= 3


def test_cocotb_backend_still_agrees(overlay):
    """The cocotb co-simulation (bare vta_top, kept as a cross-check of the harness backend) under the same driver."""
    from hw.cosim.pynq_shim import CocotbBackend, PynqShim
    from jit_runtime.devices_pynq import PynqDevice
    from jit_runtime.suite import suite_cases
    from simulator import Simulator

    p = suite_cases(CFG)["relu"]()[0]
    a, b = p.dram.copy(), p.dram.copy()
    want = Simulator(CFG).run(a, p.insn_addr, p.n_insns)
    with PynqShim(mem_bytes=1 << 20, backend=CocotbBackend, pynq=False) as s:
        dev = PynqDevice(CFG, overlay, pynq=s)
        got = dev.run(b, p.insn_addr, p.n_insns)
        assert s.stats["irq_wait"] >= 1 and s.stats["flush"] == 1
    assert np.array_equal(a, b) and got.cycles == int(want.cycles)


def _reencoded(raw, base):
    """The reference relocation: decode every instruction, move each LOAD/STORE dram_base, encode again."""
    from dataclasses import replace

    from isa import Load, Store, decode_stream, encode_stream

    insns = [replace(i, dram_base=i.dram_base + base // CFG.elem_bytes(i.mem.name.lower()))
             if isinstance(i, (Load, Store)) else i for i in decode_stream(raw, CFG)]
    return encode_stream(insns, CFG).reshape(-1)


def test_relocation_patches_only_the_dram_base_fields():
    """The driver's vectorized relocation (dram_base rewritten in the LOAD/STORE words) gives the same bytes as
    re-encoding every instruction, on random programs and a blocked GEMM; a base whose addresses do not fit the
    field is refused, naming the first such instruction."""
    from dataclasses import replace

    from hw.random_programs import random_program
    from isa.encoding import INSN_BYTES, check_stream
    from jit_runtime import ContiguousMemoryError
    from jit_runtime.blocked_gemm import blocked_gemm, default_plan
    from jit_runtime.devices_pynq import relocate

    progs = [random_program(CFG, s) for s in range(6)]
    progs.append(blocked_gemm(CFG, replace(default_plan(CFG), n=64, k=64, m=64))[0])
    for p in progs:
        raw = p.dram[p.insn_addr:p.insn_addr + INSN_BYTES * p.n_insns]
        for base in (0x1800_0000, 0x6000_0000, 4096, 0xFFF0_0000):
            fast = relocate(check_stream(raw, CFG), CFG, base)
            assert np.array_equal(fast, _reencoded(raw, base)) and not np.array_equal(fast, raw)
    first = next(i for i, w in enumerate(check_stream(raw, CFG)) if int(w[0]) & 7 in (0, 1))  # first LOAD/STORE
    with pytest.raises(ContiguousMemoryError, match=rf"instruction {first} \((LOAD|STORE)\): dram_base .* does not "
                                                    rf"fit its 32-bit field"):
        relocate(check_stream(raw, CFG), CFG, 1 << 40)


def test_bad_streams_are_refused_before_anything_runs(device, shim):
    """The vectorized check refuses what decoding each instruction refused, with the decoder's message: an unknown
    opcode, an unknown memory type, an unknown ALU opcode; and a LOAD reaching past the image."""
    from dataclasses import replace

    from isa import EncodingError, Load, MemType, decode, decode_stream, encode_stream
    from isa.alu import alu_ops
    from isa.encoding import INSN_BYTES, layouts
    from isa.intrinsics import RESERVED_OPCODES, tensor_declarations
    from jit_runtime import ContiguousMemoryError
    from jit_runtime.suite import suite_cases

    p = suite_cases(CFG)["relu"]()[0]
    at = slice(p.insn_addr, p.insn_addr + INSN_BYTES * p.n_insns)
    insns = decode_stream(p.dram[at], CFG)
    lays = layouts(CFG)
    alu_i = next(k for k, x in enumerate(insns) if type(x).__name__ == "Alu")
    load_i = next(k for k, x in enumerate(insns) if isinstance(x, Load) and x.y_size)
    opcodes = set(RESERVED_OPCODES) | {d.opcode for d in tensor_declarations(CFG)}
    corrupt = {  # what -> (instruction index, field, a value the decoder refuses)
        "opcode": (2, lays["MEM"].field("opcode"), next(o for o in range(8) if o not in opcodes)),
        "memory type": (load_i, lays["MEM"].field("mem"), len(MemType)),
        "ALU opcode": (alu_i, lays["ALU"].field("alu_opcode"), max(o.opcode for o in alu_ops()) + 1),
    }
    writes = shim.stats["mmio_write"]
    for what, (i, f, value) in corrupt.items():
        dram = p.dram.copy()
        word = int.from_bytes(dram[at][i * 16:(i + 1) * 16].tobytes(), "little")
        word = (word & ~(((1 << f.width) - 1) << f.lo)) | (value << f.lo)
        dram[p.insn_addr + 16 * i:p.insn_addr + 16 * (i + 1)] = np.frombuffer(word.to_bytes(16, "little"), np.uint8)
        with pytest.raises(EncodingError) as want:
            decode(word, CFG)
        with pytest.raises(EncodingError) as got:
            device.run(dram, p.insn_addr, p.n_insns)
        assert str(got.value) == str(want.value) and what.split()[-1].lower() in str(got.value).lower()
    insns[load_i] = replace(insns[load_i], dram_base=p.dram.size // CFG.elem_bytes(insns[load_i].mem.name.lower()))
    dram = p.dram.copy()
    dram[at] = encode_stream(insns, CFG).reshape(-1)
    with pytest.raises(ContiguousMemoryError, match=rf"instruction {load_i} \(LOAD\) reaches DRAM bytes .*outside "
                                                    rf"the {p.dram.size}-byte image.*nothing was run"):
        device.run(dram, p.insn_addr, p.n_insns)
    assert shim.stats["mmio_write"] == writes


def test_start_finish_lets_the_host_work_while_the_accelerator_runs(overlay):
    """start() returns while the accelerator runs; finish() gives run()'s bytes and cycles; a second start before
    finish, and finish without start, are refused; CrossCheckDevice's process worker agrees with the simulator
    run in this process."""
    from hw.cosim.pynq_check import CrossCheckDevice
    from hw.cosim.pynq_shim import PynqShim
    from jit_runtime import RuntimeApiError
    from jit_runtime.devices_pynq import PynqDevice
    from jit_runtime.suite import suite_cases
    from simulator import Simulator

    cases = suite_cases(CFG)  # programs that load everything they read (the device's scratchpads hold older data)
    p, q = cases["gemm_vt2"]()[0], cases["relu"]()[0]
    sim = Simulator(CFG)
    want_p, want_q = p.dram.copy(), q.dram.copy()
    cyc_p = int(sim.run(want_p, p.insn_addr, p.n_insns).cycles)
    cyc_q = int(sim.run(want_q, q.insn_addr, q.n_insns).cycles)
    with PynqShim(mem_bytes=4 << 20) as shim:  # its own overlay: pynq's Interrupt of another shim is gone
        device = PynqDevice(CFG, overlay, pynq=shim)
        got = p.dram.copy()
        device.start(got, p.insn_addr, p.n_insns)
        with pytest.raises(RuntimeApiError, match="already running.*finish"):
            device.start(q.dram.copy(), q.insn_addr, q.n_insns)
        assert np.array_equal(got, p.dram)  # nothing copied back before finish()
        res = device.finish()
        assert np.array_equal(got, want_p) and res.cycles == cyc_p
        with pytest.raises(RuntimeApiError, match="finish\\(\\) without a started program"):
            device.finish()
        xc = CrossCheckDevice(CFG, device, worker="process")
        try:
            xc.label = "q"
            got = q.dram.copy()
            xc.start(got, q.insn_addr, q.n_insns)
            xc.label = "changed while it ran"
            assert xc.finish().cycles == cyc_q and np.array_equal(got, want_q)
        finally:
            xc.close()
        assert [(c.name, c.sim_cycles, c.ok) for c in xc.checks] == [("q#0", cyc_q, True)]
