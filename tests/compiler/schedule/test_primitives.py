"""Schedule primitives reshape loops and reject invalid uses when applied, saying why."""
import pytest

from compiler import te
from compiler.schedule import ScheduleError, create_schedule


def _simple():
    a = te.placeholder((8, 12), "int32", "a")
    b = te.compute((8, 12), lambda i, j: a[i, j] + 1, name="b")
    c = te.compute((8, 12), lambda i, j: b[i, j] * 2, name="c")
    return a, b, c, create_schedule(c)


def test_split_tile_fuse_reorder():
    a, b, c, s = _simple()
    i, j = s[c].leaf_iter_vars
    io, jo, ii, ji = s[c].tile(i, j, 4, 5)
    assert [v.name for v in s[c].leaf_iter_vars] == ["i.outer", "j.outer", "i.inner", "j.inner"]
    assert (io.extent, jo.extent, ii.extent, ji.extent) == (2, 3, 4, 5)
    f = s[c].fuse(io, jo)
    assert f.extent == 6 and s[c].leaf_iter_vars[0] is f


def test_errors_when_applied():
    a, b, c, s = _simple()
    i, j = s[c].leaf_iter_vars
    with pytest.raises(ScheduleError, match="exceeds the loop extent"):
        s[c].split(i, 9)
    with pytest.raises(ScheduleError, match="must be directly outside"):
        s[c].fuse(j, i)
    io, ii = s[c].split(i, 4)
    with pytest.raises(ScheduleError, match="not one of its current loops"):
        s[c].split(i, 2)
    with pytest.raises(ScheduleError, match="listed twice"):
        s[c].reorder(io, io)
    with pytest.raises(ScheduleError, match="is not read"):
        s[c].compute_at(s[b], s[b].leaf_iter_vars[0])
    with pytest.raises(ScheduleError, match="unknown scope"):
        s[b].set_scope("l2")
    with pytest.raises(ScheduleError, match="set_scope\\('acc'\\) first"):
        s[b].pragma(s[b].leaf_iter_vars[0], "alu")
    with pytest.raises(ScheduleError, match="unknown pragma"):
        s[c].pragma(io, "prefetch")
    with pytest.raises(ScheduleError, match="placeholder lives in DRAM"):
        s[a].set_scope("inp")


def test_cache_read_rewrites_readers_and_vthread_checks():
    a, b, c, s = _simple()
    ac = s.cache_read(a, "acc", [b])
    assert a not in b.op.inputs and ac in b.op.inputs
    with pytest.raises(ScheduleError, match="does not read"):
        s.cache_read(a, "inp", [c])
    i, j = s[c].leaf_iter_vars
    io, ii = s[c].split(i, 4)
    s[c].bind_vthread(io)
    with pytest.raises(ScheduleError, match="bound to virtual threads"):
        s[c].split(io, 1)
    with pytest.raises(ScheduleError, match="already bound"):
        s[c].bind_vthread(ii)


def test_cache_write_and_compute_at():
    a, b, c, s = _simple()
    cw = s.cache_write(c, "acc")
    assert c.op.inputs == [cw]
    s[cw].compute_at(s[c], s[c].leaf_iter_vars[0])
    assert s[cw].attach[0] is s[c]
