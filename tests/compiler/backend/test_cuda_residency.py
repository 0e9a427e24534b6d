"""The cuda target keeps a model's intermediate tensors on the device: the arena's device mirror, checked on the
emulated device (``VTA_CUDA_DEVICE=emulate``: this CPU plays the GPU and counts what crosses the bus)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import compiler
from compiler.backend.cuda import device as cuda_device
from compiler.backend.cuda.device import EmulatedDevice, device_kind, get_device
from compiler.backend.cuda.mirror import DEVICE, HOST, SAME, DeviceMirror, find_mirror, mirror_host_buffer
from compiler.executor import build
from compiler.quant.ort_tools import ort_run
from compiler.zoo.builder import OnnxBuilder
from tests.compiler.backend.test_build_op_cuda import _gpu_schedule

logging.getLogger().setLevel(logging.ERROR)
RNG = np.random.default_rng(5)


def _counts(dev) -> tuple[int, int, int, int]:
    return dev.uploads, dev.upload_bytes, dev.downloads, dev.download_bytes


def test_mirror_states_follow_kernels_and_host():
    """Byte ranges move host -> same (uploaded for a read) -> device (a kernel wrote) -> same (downloaded), and a
    host write makes a range host-newer again; only stale bytes cross, and neighbouring runs merge."""
    dev = EmulatedDevice()
    host = np.arange(64, dtype=np.uint8)
    m = DeviceMirror(host)
    lo = host.ctypes.data
    assert m.state(lo, lo + 64) == [(0, 64, HOST)]
    d = m.for_read(dev, lo + 8, lo + 24)
    assert (dev.uploads, dev.upload_bytes) == (1, 16)
    assert m.state(lo, lo + 64) == [(0, 8, HOST), (8, 24, SAME), (24, 64, HOST)]
    assert bytes((np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * 16).from_address(d)))) == bytes(range(8, 24))
    m.for_read(dev, lo + 8, lo + 24)  # nothing stale: no copy
    assert dev.uploads == 1
    w = m.for_write(dev, lo + 16, lo + 40)
    np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * 24).from_address(w))[:] = 200  # "the kernel" writes
    assert m.state(lo, lo + 64) == [(0, 8, HOST), (8, 16, SAME), (16, 40, DEVICE), (40, 64, HOST)]
    assert host[20] == 20  # the host copy is stale until asked for
    m.to_host(lo + 30, lo + 50)  # downloads only the device-newer part, 30..40
    assert (dev.downloads, dev.download_bytes) == (1, 10)
    assert list(host[28:42]) == [28, 29] + [200] * 10 + [40, 41]
    m.host_wrote(lo, lo + 64)
    assert m.state(lo, lo + 64) == [(0, 64, HOST)]


def test_mirror_is_found_by_address_and_dropped_with_its_buffer(emulated):
    import gc

    arena = np.zeros(4096, np.uint8)
    mirror_host_buffer(arena)
    view = arena[1024:2048].view(np.float32)
    hit = find_mirror(view)
    assert hit is not None and hit[1] == arena.ctypes.data + 1024 and hit[2] - hit[1] == 1024
    assert find_mirror(np.zeros(16, np.float32)) is None  # memory of its own
    assert find_mirror(arena[::2]) is None  # not contiguous: never used in place
    del view, hit, arena
    gc.collect()
    assert find_mirror(np.zeros(4096, np.uint8)) is None


def test_device_kind_is_checked(monkeypatch):
    monkeypatch.setenv("VTA_CUDA_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"VTA_CUDA_DEVICE='tpu': allowed values are gpu, emulate"):
        device_kind()
    monkeypatch.delenv("VTA_CUDA_DEVICE")
    assert device_kind() == "gpu"


def test_no_gpu_error_names_the_emulator(monkeypatch):
    monkeypatch.setenv("VTA_CUDA_DEVICE", "gpu")
    monkeypatch.setattr(cuda_device, "gpu_present", lambda: False)
    monkeypatch.setattr(cuda_device, "_DEVICE", {})
    with pytest.raises(cuda_device.NoGpuError, match="VTA_CUDA_DEVICE=emulate"):
        get_device()


def test_an_op_runs_on_the_emulated_device(emulated):
    """A single op (no mirror): inputs copied in, the output copied back, values as numpy's."""
    op = compiler.build_op(_gpu_schedule(), target="cuda")
    a = RNG.standard_normal((64, 128)).astype(np.float32)
    b = RNG.standard_normal(128).astype(np.float32)
    before = _counts(emulated)
    np.testing.assert_allclose(op(a, b), np.maximum(a * 2 + b, 0).sum(1), rtol=1e-5, atol=1e-4)
    up, up_b, down, down_b = (x - y for x, y in zip(_counts(emulated), before))
    assert (up, up_b, down, down_b) == (2, a.nbytes + b.nbytes, 1, 64 * 4)


def _branchy_model():
    """Convs on the device around host-side nodes (Transpose and Concat run in numpy on every target), a view
    (Flatten) and a dense layer: each boundary must bring the right copy up to date."""
    b = OnnxBuilder(seed=3)
    x = b.conv_bn("input", 3, 8, 3)
    y = b.conv_bn(x, 8, 8, 3)
    t = b.op("Transpose", [y], perm=[0, 1, 3, 2])  # host
    z = b.conv_bn(t, 8, 8, 1)
    c = b.op("Concat", [z, x], axis=1)  # host, one operand computed long before
    w = b.conv_bn(c, 16, 8, 3, stride=2)
    s = b.op("Add", [w, b.conv_bn(w, 8, 8, 1, act=None)])
    p = b.op("GlobalAveragePool", [s])
    f = b.op("Flatten", [p])
    return b.model("branchy", "input", (1, 3, 12, 12), b.gemm(f, 8, 5))


def test_model_stays_on_the_device_between_kernels(emulated):
    """After the first run (weights uploaded once), a run copies the input up once and the output down once, even
    with host-side nodes in the middle (their inputs come down, their outputs go up: counted apart below); values
    equal onnxruntime's run after run."""
    from compiler.zoo import resnet18_small

    model = resnet18_small()
    mod = build(model, target="cuda", progress=False)
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.testing.assert_allclose(mod(input=x), ort_run(model, {"input": x})[0], rtol=1e-4, atol=1e-4)
    for scale in (2.0, -0.5):
        before = _counts(emulated)
        got = mod(input=x * scale)
        up, up_b, down, down_b = (a - b for a, b in zip(_counts(emulated), before))
        assert (up, up_b) == (1, x.nbytes) and (down, down_b) == (1, got.nbytes)
        np.testing.assert_allclose(got, ort_run(model, {"input": x * scale})[0], rtol=1e-4, atol=1e-4)


def test_host_nodes_between_kernels_see_and_publish_current_data(emulated):
    model = _branchy_model()
    mod = build(model, target="cuda", progress=False)
    host_nodes = [n.op for n in mod.graph.nodes if n.op in ("Transpose", "Concat")]
    assert host_nodes == ["Transpose", "Concat"]
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 3, 12, 12)).astype(np.float32)
        np.testing.assert_allclose(mod(input=x), ort_run(model, {"input": x})[0], rtol=1e-4, atol=1e-4)
    before = _counts(emulated)
    mod(input=x)
    up, _, down, _ = (a - b for a, b in zip(_counts(emulated), before))
    # down: the Transpose's input, the Concat's two inputs, the output; up: the input and the two host results
    assert (up, down) == (3, 4)


def test_llvm_modules_mirror_nothing():
    from compiler.zoo import resnet18_small

    mod = build(resnet18_small(), target="llvm", progress=False)
    assert mod._mirrored is False and find_mirror(mod._arena[:64]) is None


def test_mirror_keeps_both_copies_coherent_under_random_use():
    """Random interleavings of kernel reads/writes and host reads/writes over random byte ranges of a 256-byte
    buffer, against a model of what each byte must hold: every kernel read sees the latest value (wherever it was
    written), every host read too, and only stale bytes cross the bus (each upload or download moves bytes the
    other side wrote since)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    size = 256
    op = st.tuples(st.sampled_from(["kread", "kwrite", "hread", "hwrite"]), st.integers(0, size - 1),
                   st.integers(1, size))

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.lists(op, min_size=1, max_size=40))
    def run(ops):
        dev = EmulatedDevice()
        host = np.zeros(size, np.uint8)
        m = DeviceMirror(host)
        lo = host.ctypes.data
        truth = np.zeros(size, np.uint8)  # what every byte holds now, on whichever side wrote it last
        newer = np.full(size, "h")  # which side wrote each byte last (h: host, d: device, s: both agree)
        stamp = 0
        for kind, a, n in ops:
            b = min(size, a + n)
            stamp = stamp % 250 + 1
            if kind == "kread":
                up = dev.upload_bytes
                d = m.for_read(dev, lo + a, lo + b)
                seen = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (b - a)).from_address(d))
                np.testing.assert_array_equal(seen, truth[a:b])
                assert dev.upload_bytes - up == int(np.count_nonzero(newer[a:b] == "h"))
                newer[a:b][newer[a:b] == "h"] = "s"
            elif kind == "kwrite":
                d = m.for_write(dev, lo + a, lo + b)
                np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (b - a)).from_address(d))[:] = stamp
                truth[a:b] = stamp
                newer[a:b] = "d"
            elif kind == "hread":
                down = dev.download_bytes
                m.to_host(lo + a, lo + b)
                np.testing.assert_array_equal(host[a:b], truth[a:b])
                assert dev.download_bytes - down == int(np.count_nonzero(newer[a:b] == "d"))
                newer[a:b][newer[a:b] == "d"] = "s"
            else:
                host[a:b] = stamp
                m.host_wrote(lo + a, lo + b)
                truth[a:b] = stamp
                newer[a:b] = "h"
            runs = m.state(lo, lo + size)
            assert runs[0][0] == 0 and runs[-1][1] == size and all(x[1] == y[0] for x, y in zip(runs, runs[1:]))
            assert all(x[2] != y[2] for x, y in zip(runs, runs[1:]))  # neighbours merged

    run()
