import numpy as np
import pytest

from isa import make_config
from jit_runtime import CommandQueue, UnknownDeviceError, device_names, make_device, register_device
from jit_runtime import device as device_mod
from jit_runtime import suite

CFG = make_config("tiny")


def test_unknown_device_lists_the_known_ones():
    with pytest.raises(UnknownDeviceError, match="unknown device 'fpga9'; known devices: .*sim, sim-functional"):
        make_device("fpga9", CFG)
    program, _ = suite.relu(CFG)
    with pytest.raises(UnknownDeviceError):
        program.run("fpga9")


class CountingDevice:
    """A device that delegates to the simulator and counts runs (what hw/ will do for ``rtl``)."""

    runs = 0

    def __init__(self, cfg, trace=False):
        from simulator import Simulator
        self.sim = Simulator(cfg, trace=trace)

    def run(self, dram, insn_addr, n_insns):
        CountingDevice.runs += 1
        return self.sim.run(dram, insn_addr, n_insns)


def test_registered_device_runs_programs_and_queues():
    register_device("counting", CountingDevice)
    try:
        assert "counting" in device_names()
        with pytest.raises(ValueError, match="already registered"):
            register_device("counting", CountingDevice)
        program, expected = suite.shift_and_scale(CFG)
        res = program.run("counting")
        assert CountingDevice.runs == 1
        np.testing.assert_array_equal(res.outputs["y"], expected["y"])
        q = CommandQueue(CFG, device="counting")
        x = q.alloc((4, 1, 4), np.int32, name="x")
        x.copy_from(np.full((4, 1, 4), 5, np.int32))
        q.load_2d("acc", 0, x, 0, x_size=4, y_size=1, x_stride=4)
        q.push_alu(lambda k: (k.loop_begin(4, 1, 1), k.push(0, 0), k.loop_end()), op="MUL", use_imm=True, imm=3)
        q.dep_push("compute", "store")
        q.dep_pop("compute", "store")
        y = q.alloc((4, 1, 4), np.int8, name="y")
        q.store_2d(0, y, 0, x_size=4, y_size=1, x_stride=4)
        r = q.synchronize()
        assert CountingDevice.runs == 2 and r.cycles > 0
        assert (y.copy_to() == 15).all()
        # a device instance can be passed directly as well
        q.push_alu(lambda k: k.push(0, 0), op="ADD", use_imm=True, imm=1)
        q.synchronize(device=CountingDevice(CFG))
        assert CountingDevice.runs == 3
    finally:
        device_mod._REGISTRY.pop("counting", None)


def test_synchronize_runs_in_place_and_reports_the_uop_cache():
    q = CommandQueue(CFG)
    x = q.alloc((8, 1, 4), np.int32, name="x")
    y = q.alloc((8, 1, 4), np.int8, name="y")
    data = np.arange(-16, 16, dtype=np.int32).reshape(8, 1, 4)
    x.copy_from(data)

    def body(k):
        k.loop_begin(8, 1, 1)
        k.push(0, 0)
        k.loop_end()
    q.load_2d("acc", 0, x, 0, x_size=8, y_size=1, x_stride=8)
    q.push_alu(body, op="MAX", use_imm=True, imm=0, signature="clip")
    q.push_alu(body, op="MIN", use_imm=True, imm=10, signature="clip")
    q.dep_push("compute", "store")
    q.dep_pop("compute", "store")
    q.store_2d(0, y, 0, x_size=8, y_size=1, x_stride=8)
    res = q.synchronize()
    np.testing.assert_array_equal(y.copy_to(), np.clip(data, 0, 10).astype(np.int8))
    assert res.profile["runtime"]["uop_cache"] == {"hits": 1, "misses": 1, "evictions": 0, "uops_loaded": 1}
    assert res.cycles == res.profile["cycles"]
    assert q.instructions == []  # the queue is ready for the next program
    # the next program starts with an empty uop scratchpad: the cached kernel is loaded again (a miss)
    q.push_alu(body, op="ADD", use_imm=True, imm=1, signature="clip")
    res2 = q.synchronize()
    assert res2.profile["runtime"]["uop_cache"]["misses"] == 1
