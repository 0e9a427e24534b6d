"""A steady cuda run is replayed as its device operations alone (compiler.backend.cuda.run_replay), checked on the
emulated device (``VTA_CUDA_DEVICE=emulate``): the same values and bus traffic as the general path, and the general
path again wherever the replay would not do what it does."""
from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from compiler.backend.cuda import device as cuda_device
from compiler.backend.cuda.device import EmulatedDevice, record_ops, replayable
from compiler.backend.cuda.mirror import mirror_host_buffer
from compiler.backend.cuda.run_replay import DeviceReplay
from compiler.backend.plans.backend import _args_resident
from compiler.executor import build
from compiler.quant.ort_tools import ort_run
from compiler.zoo import resnet18_small
from tests.compiler.backend.test_cuda_residency import _branchy_model

logging.getLogger().setLevel(logging.ERROR)
SHAPE = (1, 3, 32, 32)


@pytest.fixture(scope="module")
def small():
    return resnet18_small()


@pytest.fixture
def replays(monkeypatch):
    """The replays' results as they run: a list of True (the operations were made) / False (refused)."""
    made = []
    real = DeviceReplay.run

    def spy(self, on_device=False):
        secs = real(self, on_device)
        made.append(secs is not None)
        return secs
    monkeypatch.setattr(DeviceReplay, "run", spy)
    return made


def _x(seed: int, shape=SHAPE) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_steady_runs_replay_with_new_inputs(emulated, small, replays):
    """Two runs in a row that make the same device operations (the first run also uploads the weights: the second
    and third agree) make the next onwards a replay: each still uploads its own input once and downloads the output
    once, and equals onnxruntime; the profile keeps a row per node. Until then, the module says why not."""
    mod = build(small, target="cuda", progress=False)
    mod(input=_x(0))
    assert mod.replay_refusal.startswith("host work in ")  # the first run finds which arguments lie on the device
    mod(input=_x(1))
    # the weights' and arena's first uploads: not the steady state yet
    assert mod.replay_refusal in ("its device operations differ from the run before",
                                  "the run left its arena's device mirror otherwise than it found it (a host write "
                                  "into it, a first upload)")
    mod(input=_x(2))
    assert replays == [] and mod._device_replay is not None and mod.replay_refusal is None
    for seed in range(3, 7):
        up, down = emulated.uploads, emulated.downloads
        got = mod(input=_x(seed))
        assert (emulated.uploads - up, emulated.downloads - down) == (1, 1)
        np.testing.assert_allclose(got, ort_run(small, {"input": _x(seed)})[0], rtol=1e-4, atol=1e-4)
    assert replays == [True] * 4
    rows = mod.profile()
    assert len(rows) == len(mod.graph.nodes) and all(r["time_ms"] >= 0 for r in rows)


def test_a_run_with_host_nodes_is_never_replayed(emulated, replays):
    """Transpose and Concat run on the host: their work is not in the device operations, so no replay is made."""
    model = _branchy_model()
    mod = build(model, target="cuda", progress=False)
    for seed in range(4):
        x = _x(seed, (1, 3, 12, 12))
        np.testing.assert_allclose(mod(input=x), ort_run(model, {"input": x})[0], rtol=1e-4, atol=1e-4)
    assert replays == [] and mod._device_replay is None
    host = [n for n in mod.graph.nodes if n.op in ("Transpose", "Concat")]
    assert host and mod.replay_refusal.startswith(f"host work in {len(host)} node(s): ")
    assert all(f"{n.name} ({n.op})" in mod.replay_refusal for n in host)


def test_replay_refused_where_the_state_moved(emulated, small, replays, monkeypatch):
    """The device changed, or the host wrote the arena (its device copy is stale): the replay is dropped, the
    general path runs, values stay right, and the replay comes back once two runs agree again. Another arena's
    mirror is none of its business."""
    mod = build(small, target="cuda", progress=False)

    def check(seed):
        np.testing.assert_allclose(mod(input=_x(seed)), ort_run(small, {"input": _x(seed)})[0], rtol=1e-4, atol=1e-4)
    for seed in range(4):
        check(seed)
    assert replays == [True]
    monkeypatch.setitem(cuda_device._DEVICE, "emulate", EmulatedDevice())
    for seed in range(4, 8):
        check(seed)
    # refused on the new device (its first run moves the arena and the weights there), made again once two agreed
    assert replays == [True, False, True]
    other_arena = np.zeros(4096, np.uint8)  # another model's arena (or a tuner's) comes and changes: not this run's
    mirror_host_buffer(other_arena)
    mod.cpu.host_wrote([other_arena])
    check(8)
    assert replays == [True, False, True, True]
    mod.cpu.host_wrote([mod._arena])
    check(9)
    assert replays == [True, False, True, True, False]


def test_other_threads_and_details_take_the_general_path(emulated, small, replays):
    mod = build(small, target="cuda", progress=False)
    for seed in range(4):
        mod(input=_x(seed))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("y", mod(input=_x(4))))
    t.start()
    t.join()
    np.testing.assert_allclose(got["y"], ort_run(small, {"input": _x(4)})[0], rtol=1e-4, atol=1e-4)
    mod.keep_details = True
    mod(input=_x(5))
    assert replays == [True]  # neither the other thread's run nor the detailed one replayed


@pytest.mark.parametrize("where", ["run_node_into", "to_host"])
def test_a_failed_run_stops_its_recording(emulated, small, replays, monkeypatch, where):
    """A run that fails in a node or in the outputs' download leaves no recording open: later runs record and
    replay again."""
    mod = build(small, target="cuda", progress=False)
    mod(input=_x(0))
    real = getattr(mod.cpu, where)
    calls, fail_at = {"n": 0}, 3 if where == "run_node_into" else 1  # a node in the middle; the download

    def fail_once(*args):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise RuntimeError("injected")
        return real(*args)
    monkeypatch.setattr(mod.cpu, where, fail_once)
    with pytest.raises(RuntimeError, match="injected"):
        mod(input=_x(1))
    for seed in range(2, 6):
        np.testing.assert_allclose(mod(input=_x(seed)), ort_run(small, {"input": _x(seed)})[0],
                                   rtol=1e-4, atol=1e-4)
    assert replays == [True, True]  # the two runs after the failed one agreed; the two after them replayed


def test_recorded_operations_replay_the_same_bytes():
    """record_ops logs copies and launches in order; replayable() repeats each (not logged again)."""
    dev = EmulatedDevice()
    src = np.arange(16, dtype=np.float32)
    dst = np.zeros(16, np.float32)
    d0, d1 = dev.alloc(64), dev.alloc(64)
    with record_ops(dev) as ops:
        dev.upload(d0, src.ctypes.data, 64)
        dev.copy(d1, d0, 64)
        dev.download(dst.ctypes.data, d1, 64)
        dev.synchronize()
        EmulatedDevice().upload(d1, src.ctypes.data, 4)  # another device: not this recording's
    assert [op[0] for op in ops] == ["upload", "copy", "download", "sync"]
    np.testing.assert_array_equal(dst, src)
    src += 100
    dst[:] = 0
    calls = [replayable(dev, op) for op in ops]
    with record_ops(dev) as again:
        for call in calls:
            call()
    assert len(again) == 4
    np.testing.assert_array_equal(dst, src)
    with record_ops(dev):
        with pytest.raises(RuntimeError, match="already recording"):
            record_ops(dev).start()
    with pytest.raises(ValueError, match="unknown device operation 'free'"):
        replayable(dev, ("free", d0))


def test_kernel_arguments_made_on_the_host_are_not_resident():
    """A kernel argument the node makes on the host each run (a cast, a packed copy) would be read from freed
    memory by a replay: only mirrored, pinned or input-owned arrays count as resident."""
    arena = np.zeros(1024, np.uint8)
    mirror_host_buffer(arena)

    class Op:
        pinned: set = set()

        def is_pinned(self, a):
            return id(a) in self.pinned

    op = Op()
    weights, graph_input = np.ones(8, np.float32), np.ones((2, 4), np.float32)
    op.pinned.add(id(weights))
    in_arena = arena[64:128].view(np.float32)
    assert _args_resident([graph_input, in_arena], [graph_input.reshape(8), in_arena, weights], op)
    assert not _args_resident([graph_input], [graph_input.astype(np.float64)], op)
    assert not _args_resident([in_arena], [in_arena.copy()], op)
    assert not _args_resident([graph_input], [graph_input[:, ::2]], op)  # the op would copy it (contiguous)


def test_device_timing_puts_the_devices_times_in_the_profile(emulated, small, replays, monkeypatch):
    """``device_timing``: a replayed run marks the device's timer before the first node's operations and after each
    node's (and the tail's); the profile's times are the timer's intervals (the emulated device's timer is the
    host clock: its kernels finish as they are launched)."""
    from compiler.backend.cuda.device import HostTimer

    timers = []

    class Spy(HostTimer):
        def seconds(self):
            self.got = super().seconds()
            return self.got
    monkeypatch.setattr(EmulatedDevice, "timer", lambda self, marks: timers.append((marks, Spy())) or timers[-1][1])
    mod = build(small, target="cuda", progress=False)
    mod.device_timing = True
    for seed in range(5):
        np.testing.assert_allclose(mod(input=_x(seed)), ort_run(small, {"input": _x(seed)})[0], rtol=1e-4, atol=1e-4)
    assert replays == [True, True] and len(timers) == 2
    nodes = len(mod.graph.nodes)
    marks, timer = timers[-1]
    assert marks == nodes + 2 and len(timer.times) == nodes + 2
    rows = mod.profile()
    np.testing.assert_allclose([r["time_ms"] for r in rows], np.array(timer.got[:nodes]) * 1e3)
    convs = [r["time_ms"] for r in rows if r["op"] in ("FusedConv", "Conv")]
    assert convs and min(convs) > 0
