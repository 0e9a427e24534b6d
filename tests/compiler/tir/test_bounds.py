"""The bound inference both lowerings share (compiler.tir.bounds), in plain integer arithmetic: loop values through
split/fuse relations must give back the root index they enumerate, and the extents must cover each axis once."""
from compiler import te
from compiler.schedule import create_schedule
from compiler.tir.bounds import leaf_extents, root_values


def _stage():
    a = te.placeholder((10, 6), "int32", "a")
    b = te.compute((10, 6), lambda i, j: a[i, j] + 1, name="b", dtype="int32")
    s = create_schedule(b)
    st = s[b]
    i, j = st.op.axes
    io, ii = st.split(i, 4)       # ragged: 10 = 3 x 4 - 2
    f = st.fuse(ii, j)            # 4 x 6 = 24
    return st, i, j, io, ii, f


def _ints(st, ext, leaf):
    return root_values(st.relations, leaf, ext.__getitem__, lambda o, k, i: o * k + i,
                       lambda v, n, _: (v // n, v % n))


def test_extents_through_a_ragged_split_and_a_fuse():
    st, i, j, io, ii, f = _stage()
    ext = leaf_extents(st.relations, {i: 10, j: 6})
    assert (ext[io], ext[ii], ext[f]) == (3, 4, 24)
    assert leaf_extents(st.relations, {i: 3, j: 6})[ii] == 3  # a factor past the extent: inner loop is the extent


def test_root_values_enumerate_each_root_index_once():
    st, i, j, io, ii, f = _stage()
    ext = leaf_extents(st.relations, {i: 10, j: 6})
    seen = []
    for vo in range(ext[io]):
        for vf in range(ext[f]):
            val = _ints(st, ext, {io: vo, f: vf})
            assert val[ii] == vf // 6 and val[j] == vf % 6
            seen.append((val[i], val[j]))
    inside = [(x, y) for x, y in seen if x < 10]  # the ragged tail (i = 10, 11) is what the lowerings guard
    assert sorted(inside) == [(x, y) for x in range(10) for y in range(6)]
    assert len(seen) - len(inside) == 2 * 6
