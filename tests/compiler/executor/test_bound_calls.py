"""Repeated runs of a model on the llvm target call each kernel through a call bound to the executor's arena arrays
(checked and addressed once): later runs read the current input, whether it is changed in place or a new array,
and give onnxruntime's results on one and two threads."""
from __future__ import annotations

import numpy as np
from compiler.backend import set_num_threads
from compiler.executor import build
from compiler.quant.ort_tools import ort_run
from compiler.zoo import mobilenet_v2_small


def _rel_err(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())


def _qdq_small(seed: int):
    """A seeded rng and ``mobilenet_v2_small`` quantized by onnxruntime (QDQ, defaults) built for llvm and for the
    ``ref`` executor."""
    import warnings

    from compiler.quant.ort_tools import ort_quantize_static

    rng = np.random.default_rng(seed)
    calib = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = ort_quantize_static(mobilenet_v2_small(), calib, per_channel=False, defaults=True)
    return rng, build(q, target="llvm", progress=False), build(q, target="ref", progress=False, fuse_residual=False)


def test_bound_kernel_calls_follow_the_input():
    model = mobilenet_v2_small()
    mod = build(model, target="llvm", progress=False)
    for threads in (1, 2):
        _check(mod, model, np.random.default_rng(threads), threads)


def _check(mod, model, rng, threads: int) -> None:
    set_num_threads(threads)
    try:
        x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
        first = mod(input=x)
        kernels = sum(r["cpu_backend"] == "llvm" for r in mod.profile())
        assert kernels > 10 and len(mod.cpu._bound) == kernels  # every kernel's call is bound after one run
        np.testing.assert_array_equal(mod(input=x), first)  # bound calls: same bytes
        x[...] = rng.standard_normal(x.shape)  # the same array, new values
        got = mod(input=x)
        assert _rel_err(got, ort_run(model, {"input": x})[0]) < 1e-5
        y = rng.standard_normal(x.shape).astype(np.float32)  # a new array: copied into the module's input buffer
        got = mod(input=y)
        assert _rel_err(got, ort_run(model, {"input": y})[0]) < 1e-5
        assert not np.array_equal(got, first)
    finally:
        set_num_threads(None)


def test_int8_runs_keep_their_bound_calls():
    """A QDQ model on llvm: from the second run on, no kernel call binds again (each node reads the same arena array
    objects every run, also after a layer that returns a reshaped view of its slot, as the dense head does), and the
    results stay the ``ref`` executor's bit for bit."""
    rng, mod, ref = _qdq_small(5)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    mod(input=x)
    mod(input=x)
    bound = {k: (v.inputs, v.result) for k, v in mod.cpu._bound.items()}
    assert any(n.op == "DequantizeLinear" and id(n) in bound for n in mod.graph.nodes)
    x[...] = rng.standard_normal(x.shape)
    got = mod(input=x)
    assert mod.cpu._bound.keys() == bound.keys()
    for k, (ins, call) in bound.items():
        assert mod.cpu._bound[k].result is call and all(a is b for a, b in zip(mod.cpu._bound[k].inputs, ins))
    np.testing.assert_array_equal(got, ref(input=x))


def test_view_nodes_keep_their_view():
    """Metadata-only nodes (Flatten here) where their inputs are the same arena arrays as in the last run: the same
    result object every run, tracking the input's current values (Flatten's output has its own arena slot: its data
    is copied there by memmove, and the slot is the result)."""
    model = mobilenet_v2_small()
    mod = build(model, target="llvm", progress=False)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    mod(input=x)
    views = {k: v.result[2] for k, v in mod.cpu._views.items()}  # result: (node, memmove args, the view returned)
    flat = [v for v in mod.cpu._views.values() if v.result[0].op == "Flatten"]
    assert flat and flat[0].result[1] is not None and flat[0].result[2] is flat[0].out  # copied into its slot
    x[...] = rng.standard_normal(x.shape)
    got = mod(input=x)
    assert all(mod.cpu._views[k].result[2] is v for k, v in views.items())
    assert any(r["op"] == "Flatten" and r["cpu_backend"] == "view" for r in mod.profile())
    assert _rel_err(got, ort_run(model, {"input": x})[0]) < 1e-5


def test_view_node_that_copies_is_made_every_run():
    """A Reshape of a non-contiguous array is a copy, not a view: it is not kept, so a later run sees new values."""
    from compiler.backend.plans.backend import TargetCpuBackend
    from compiler.graph.ir import Node

    cpu = TargetCpuBackend("llvm")
    node = Node("Reshape", ["x", "shape"], ["y"], name="r")
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    xt, shape = base.T, np.array([12], np.int64)  # (4, 3), not C-contiguous: reshape copies
    first = cpu.run_node_into(node, [xt, shape], [None])[0]
    np.testing.assert_array_equal(first, base.T.ravel())
    assert id(node) not in cpu._views
    base += 100
    np.testing.assert_array_equal(cpu.run_node_into(node, [xt, shape], [None])[0], base.T.ravel())
    flat = base.reshape(3, 4)  # contiguous: a view, kept, and it follows the values
    view = cpu.run_node_into(node, [flat, shape], [None])[0]
    assert cpu._views[id(node)].result[2] is view and cpu._views[id(node)].result[1] is None
    base -= 7
    again = cpu.run_node_into(node, [flat, shape], [None])[0]
    assert again is view
    np.testing.assert_array_equal(again, base.ravel())
    slot = np.empty(12, np.float32)  # a planned output slot: the data copied there each call, the slot returned
    assert cpu.run_node_into(node, [flat, shape], [slot])[0] is slot
    base *= 3
    assert cpu.run_node_into(node, [flat, shape], [slot])[0] is slot and cpu._views[id(node)].result[1] is not None
    np.testing.assert_array_equal(slot, base.ravel())


def test_int8_accel_layers_repeat_their_prepared_calls():
    """The packed int8 layers (convs, dense head) on llvm: from the second run on, each runs through the backend's
    repeat of its last call (no conv2d/dense call: both raise here), on one and two threads, and the results stay the
    ``ref`` executor's bit for bit for new input values, in the same array or a new one."""
    rng, mod, ref = _qdq_small(7)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    mod(input=x)
    accel = [i for i, n in enumerate(mod.graph.nodes) if n.op in ("AccelConv2D", "AccelDense")]
    assert len(accel) > 10 and set(mod._accel_bound) == set(accel)
    backend = mod.accel

    def refuse(*_a, **_k):
        raise AssertionError("a bound layer called the backend again")
    backend.conv2d = backend.dense = refuse  # instance attributes: the bound calls never look them up
    try:
        for threads in (1, 2):
            set_num_threads(threads)
            x[...] = rng.standard_normal(x.shape)  # the same array, new values
            np.testing.assert_array_equal(mod(input=x), ref(input=x))
            y = rng.standard_normal(x.shape).astype(np.float32)  # a new input array: the arena's views stay the same
            np.testing.assert_array_equal(mod(input=y), ref(input=y))
    finally:
        set_num_threads(None)
        del backend.conv2d, backend.dense


def test_last_call_is_none_where_the_layer_read_a_copy():
    """``TargetAccelBackend.last_call``: the repeat of a prepared packed layer's call rewrites its output from the
    input's current values; None in another thread, after a call whose input had to be copied (not C-contiguous) or
    that did not run the packed kernel."""
    from compiler.backend.plans.accel import TargetAccelBackend
    from compiler.graph.ref_backend import RefAccelBackend
    from isa import make_config
    from jit_runtime.host_ops.layout import pack_activation, pack_weight
    from jit_runtime.host_ops.requant import Requant

    cfg = make_config()
    rng = np.random.default_rng(3)
    x = pack_activation(rng.integers(-128, 128, (1, 32, 5, 5), dtype=np.int8), cfg.batch, cfg.block_in)
    w = pack_weight(rng.integers(-128, 128, (16, 32, 3, 3), dtype=np.int8), cfg.block_out, cfg.block_in)
    rq = Requant(0, np.full(16, 1 << 30), np.full(16, 38), False, -128, 127, zero_point=2)
    kw = dict(stride=(1, 1), padding=(1, 1, 1, 1), groups=1, requant=rq)
    tb = TargetAccelBackend(cfg)
    out = tb.conv2d(x, w, None, **kw)
    again = tb.last_call()
    assert again is not None
    x[...] = rng.integers(-128, 128, x.shape, dtype=np.int8)
    again()
    np.testing.assert_array_equal(out, RefAccelBackend(cfg).conv2d(x, w, None, **kw))
    import threading

    seen = []
    t = threading.Thread(target=lambda: seen.append(tb.last_call()))  # another thread: not its call to repeat
    t.start()
    t.join()
    assert seen == [None] and tb.last_call() is not None
    strided = np.empty(x.shape[:-1] + (2 * x.shape[-1],), np.int8)[..., ::2]
    strided[...] = x
    tb.conv2d(strided, w, None, **kw)
    assert tb.last_call() is None
    grouped = pack_weight(rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8), cfg.block_out, cfg.block_in)
    tb.conv2d(x, grouped, None, **{**kw, "groups": 2})  # two groups of 16: the unpacked kernel
    assert tb.last_call() is None
