import numpy as np
import pytest

from isa import make_config
from jit_runtime import CommandQueue, DeviceBufferError, UseAfterFreeError

CFG = make_config("pynq-z1")


def test_round_trip_and_alignment():
    q = CommandQueue(CFG)
    x = np.arange(100 * 100, dtype=np.int32).reshape(100, 100)
    b = q.alloc(x.shape, np.int32, name="x")
    b.copy_from(x)
    assert np.array_equal(b.copy_to(), x)
    out = np.empty_like(x)
    b.copy_to(out)
    assert np.array_equal(out, x)
    for mem in ("uop", "inp", "wgt", "acc", "out"):
        assert b.addr % CFG.elem_bytes(mem) == 0
        assert b.elem_offset(CFG, mem) * CFG.elem_bytes(mem) == b.addr


def test_buffers_survive_dram_growth():
    q = CommandQueue(CFG)
    a = q.alloc(16, np.int8, name="a")
    a.copy_from(np.arange(16, dtype=np.int8))
    q.alloc(1 << 20, np.int8, name="big")
    assert np.array_equal(a.copy_to(), np.arange(16, dtype=np.int8))


@pytest.mark.parametrize("array", [np.zeros((4, 5), np.int32), np.zeros((4, 4), np.int8), np.zeros(16, np.int32)])
def test_copy_of_wrong_shape_or_dtype_raises(array):
    q = CommandQueue(CFG)
    b = q.alloc((4, 4), np.int32, name="b")
    with pytest.raises(DeviceBufferError, match=r"shape \(4, 4\) dtype int32"):
        b.copy_from(array)
    with pytest.raises(DeviceBufferError):
        b.copy_to(array)


def test_use_after_free_raises():
    q = CommandQueue(CFG)
    b = q.alloc((4, 16), np.int8, name="b")
    b.free()
    with pytest.raises(UseAfterFreeError, match="'b'.*after free"):
        b.copy_from(np.zeros((4, 16), np.int8))
    with pytest.raises(UseAfterFreeError):
        b.copy_to()
    with pytest.raises(UseAfterFreeError):
        b.free()
    with pytest.raises(UseAfterFreeError):
        q.load_2d("inp", 0, b, 0, x_size=4, y_size=1, x_stride=4)
    with pytest.raises(UseAfterFreeError):
        q.store_2d(0, b, 0, x_size=4, y_size=1, x_stride=4)
    assert "b" not in q.buffers()
    q.alloc(4, name="b")  # the name is free again


def test_duplicate_live_name_and_out_of_range_dma():
    q = CommandQueue(CFG)
    b = q.alloc((4, 16), np.int8, name="b")  # 4 inp elements of 16 bytes
    with pytest.raises(DeviceBufferError, match="already named"):
        q.alloc(4, name="b")
    with pytest.raises(DeviceBufferError, match="out of range"):
        q.load_2d("inp", 0, b, 1, x_size=4, y_size=1, x_stride=4)
    with pytest.raises(ValueError, match="scratchpad range"):
        q.load_2d("inp", CFG.inp_depth - 1, b, 0, x_size=4, y_size=1, x_stride=4)
    with pytest.raises(ValueError, match="must be one of"):
        q.load_2d("out", 0, b, 0, x_size=1, y_size=1, x_stride=1)
