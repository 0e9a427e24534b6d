"""``TargetAccelBackend``: the int8 conv2d/dense layers of a lowered QDQ model on a CPU/GPU target (models built for
llvm; on cuda a model's int8 layers stay NCHW and run as ordinary kernels: :mod:`compiler.executor.targets`).

The same layer contract as :class:`compiler.graph.ref_backend.RefAccelBackend` (packed int8 in and out,
int32 accumulation, the requant epilogue), computed by the operator library's integer direct conv2d
(:mod:`compiler.topi.conv2d_direct` with :mod:`compiler.topi.requant_int`), so it is bit-exact with ``ref``.
A dense layer is a 1x1 convolution over a 1x1 image. On ``llvm``, convs with one group or depthwise (no dilation,
int8 outputs, 16-channel output blocks) run :mod:`compiler.topi.conv2d_int8` on the packed layout itself
(u8 x s8 channel quads, ``vpdpbusd``, where the CPU has VNNI; else int16 pair products, ``pmaddwd``; no numpy
unpack/pack); the others unpack and repack.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import weakref

import numpy as np

from compiler import te

from compiler.graph.accel_interface import (AccelBackend, check_conv_operands, dense_operands, host_profile,
                                            pack_activation, pad_channels, pad_requant, unpack_activation,
                                            unpack_weight)
from jit_runtime.host_ops.requant import Requant
from compiler.backend.plans.compile import compile_plan
from compiler.backend.plans.plans import OpPlan
from compiler.backend.plans.plans_int8 import int8_conv_kernel
from compiler.topi import conv2d_direct, conv2d_int8, requant_int


LAYER_CACHE = 1024  # prepared packed conv layers kept per backend
ADDRESS_CACHE = 4096  # data addresses of arrays passed to the packed layers (the Module's arena views)


def fill_idle_channels(rq: Requant, w_oihw: np.ndarray | None, bias) -> Requant:
    """``rq`` with the multiplier/shift of idle channels (all-zero weights, zero bias, multiplier 0 and shift 0: the
    block padding, whose output is ``clip(zero point)`` whatever the scale) set to the other channels' common
    ones, so a per-tensor scale stays one (:func:`compiler.topi.requant_int.uniform_scale`); else ``rq`` as is."""
    if w_oihw is None:
        return rq
    o = w_oihw.shape[0]
    m = np.broadcast_to(np.asarray(rq.multiplier, np.int64), (o,))
    sh = np.broadcast_to(np.asarray(rq.shift, np.int64), (o,))
    b = np.asarray(0 if bias is None else bias)
    if b.size not in (1, o):
        return rq
    b = np.broadcast_to(b.reshape(-1), (o,))
    idle = (m == 0) & (sh == 0) & (b == 0) & ~np.any(w_oihw.reshape(o, -1) != 0, axis=1)
    if not idle.any() or idle.all():
        return rq
    mu, su = np.unique(m[~idle]), np.unique(sh[~idle])
    if mu.size != 1 or su.size != 1:
        return rq
    return dataclasses.replace(rq, multiplier=np.where(idle, mu[0], m), shift=np.where(idle, su[0], sh))


class TargetAccelBackend(AccelBackend):
    """Integer conv2d/dense for ``target`` ("llvm" or "cuda"); ``last_profile`` has MAC and byte counts."""

    runs_on_host = True  # the Module profiles its layers as CPU layers (time measured, no accelerator MACs)
    writes_into = True  # conv2d/dense take ``out=``: the Module passes the output's arena slot (no copy after)

    def __init__(self, config, target: str = "llvm") -> None:
        self.config = config
        self.target = target
        self.last_profile: dict = {}
        self.runs_on = target  # where its layers run, for the profile (no accelerator involved)
        self._weights: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(packed weight) -> (array, library layout)
        self.packed_layers = 0  # conv layers of the last prepare() that run on the packed layout (no repack)
        self._layers: dict[tuple, tuple] = {}  # a packed conv layer's call -> (w, requant, bias, prepared state)
        self._dense_views: dict[int, tuple] = {}  # id(dense weight) -> (weight, its 1x1-conv view)
        self._addresses: dict[int, tuple] = {}  # id(array) -> (weak reference, data address)
        self._last_call: tuple | None = None  # the last packed layer run: (thread, kernel, addresses, profile, state)
        self.int8_quads: bool | None = None  # packed convs on u8 x s8 quads; None: where the CPU has VNNI

    def before_run(self) -> None:
        """:meth:`AccelBackend.before_run`: on llvm, the thread pool's idle workers start spinning now, so the
        run's first parallel loop finds them ready (waking one takes tens of microseconds or more)."""
        if self.target == "llvm":
            from compiler.backend.llvm.parallel import wake_workers

            wake_workers()

    def native_before_run(self):
        """:meth:`before_run` as a native call (a :class:`~compiler.backend.llvm.native_replay.KernelCall`: the
        thread pool's wake of its parked workers) for the executor's native replay; None where it has none."""
        if self.target != "llvm":
            return None
        from compiler.backend.llvm.parallel import native_wake

        return native_wake()

    def _packed_spec(self, spec: conv2d_direct.Conv2dSpec, rq: Requant,
                     w_oihw: np.ndarray | None = None) -> "conv2d_int8.PackedConvSpec | None":
        """The packed-layout kernel's spec for ``spec``, or None where it does not apply (then unpack/repack);
        ``w_oihw`` (the unpacked weight, if known): input channels with zero weights are skipped."""
        from compiler.backend.llvm.host import int8_dot

        if self.target != "llvm" or requant_int.out_dtype(rq) != "int8":
            return None
        cfg = self.config
        ps = conv2d_int8.PackedConvSpec(spec, cfg.batch, cfg.block_in, cfg.block_out)
        quads = int8_dot() is not None if self.int8_quads is None else self.int8_quads
        if quads and not spec.depthwise:
            ps = dataclasses.replace(ps, quads=True)
        try:
            ps.check()
            if w_oihw is not None:
                ps = dataclasses.replace(ps, pairs=conv2d_int8.used_pairs(ps, w_oihw))
                ps.check()
        except te.TeError:
            return None
        return ps

    def supports_residual(self, residual) -> str | None:
        """None when a residual QAdd fuses into this backend's conv epilogue (llvm: the packed kernel's output stage;
        a conv that falls back to the unpacked kernel adds on the host); else why not."""
        if self.target != "llvm":
            return f"target {self.target!r} runs the residual Add on the host"
        return conv2d_int8.residual_error(residual.params)

    def _packed_kernel(self, ps: "conv2d_int8.PackedConvSpec", rq: Requant, residual=None):
        from compiler.backend.llvm.host import target_cpu, vector_bits

        scal = (int(rq.pre_shift), int(rq.zero_point), int(rq.clip_low), int(rq.out_max))
        bits = vector_bits(target_cpu())
        res = None if residual is None else (residual.params, bool(residual.conv_is_a))
        key = ("qconv2d_packed", ps, scal, bits, requant_int.uniform_scale(rq), res)  # per-tensor scales compiled in

        def make():
            extra, fn, dt = requant_int.requant_stage(rq, ps.conv.o, specialize=True)
            op = conv2d_int8.conv2d_packed(ps, (extra, fn, dt), bits, res)
            return op.inputs, op.out, lambda s: conv2d_int8.schedule_packed(op, s)

        return compile_plan(OpPlan(key, make, lambda ins: list(ins)), self.target)

    def _run(self, spec: conv2d_direct.Conv2dSpec, x: np.ndarray, w_oihw: np.ndarray, w_key: np.ndarray,
             bias, rq: Requant) -> np.ndarray:
        cached = self._weights.get(id(w_key))
        if cached is None or cached[0] is not w_key:
            cached = (w_key, int8_conv_kernel(spec, w_oihw, rq, self.target)[2])
            self._weights[id(w_key)] = cached
        params = requant_int.requant_params(rq, bias, spec.o)
        fn = self._kernel(spec, rq)
        if self.target == "cuda":
            fn.pin(cached[1])  # the packed weight stays on the GPU between runs
        return np.asarray(fn(np.ascontiguousarray(x), cached[1], *params)).reshape(spec.n, spec.o, spec.oh, spec.ow)

    def _kernel(self, spec: conv2d_direct.Conv2dSpec, rq: Requant):
        """The compiled int8 conv + requant kernel of ``spec`` (compiled once per shape and epilogue constants)."""
        key, make, _ = int8_conv_kernel(spec, None, rq, self.target)
        return compile_plan(OpPlan(key, make, lambda ins: list(ins)), self.target)

    def prepare(self, g) -> int:
        """Compile the kernels of ``g``'s AccelConv2D/AccelDense layers from their static shapes (no data runs);
        returns how many layers were prepared."""
        count = self.packed_layers = 0
        for n in g.nodes:
            if n.op not in ("AccelConv2D", "AccelDense"):
                continue
            a = n.attrs
            xs_shape = g.tensors[n.inputs[0]].shape
            w = g.constants.get(n.inputs[1])  # None: a weight computed at run time (attention's MatMuls)
            w_shape = g.tensors[n.inputs[1]].shape if w is None else w.shape
            if n.op == "AccelConv2D":
                spec = self._conv_spec(xs_shape, w_shape, a["strides"], a["pads"], int(a.get("group", 1)),
                                       int(a.get("pad_value", 0)))
                rq = pad_requant(a["requant"], spec.o)
                w_oihw = None if w is None else unpack_weight(w)[:, :spec.cg]
                ps = self._packed_spec(spec, rq, w_oihw)
                rq = fill_idle_channels(rq, w_oihw, self._const_bias(g, n, spec.o))
                res = a.get("residual")
                if ps is not None:
                    self._packed_kernel(ps, rq, res if res is not None and self.supports_residual(res) is None
                                        else None)
                    self.packed_layers += 1
                    count += 1
                    continue
            else:
                nb, kb, b, bi = xs_shape
                spec = conv2d_direct.Conv2dSpec(nb * b, kb * bi, 1, 1, w_shape[0] * w_shape[2], 1, 1, dtype="int8")
                rq = pad_requant(a["requant"], spec.o)
                w_oihw = None if w is None else unpack_weight(w).reshape(spec.o, spec.c, 1, 1)
                ps = self._packed_spec(spec, rq, w_oihw)
                rq = fill_idle_channels(rq, w_oihw, self._const_bias(g, n, spec.o))
                if ps is not None:  # dense = 1x1 conv on the packed layout (see dense())
                    self._packed_kernel(ps, rq)
                    self.packed_layers += 1
                    count += 1
                    continue
            self._kernel(spec, pad_requant(a["requant"], spec.o))
            count += 1
        return count

    @staticmethod
    def _const_bias(g, n, o: int):
        """The layer's bias padded to ``o`` channels (None: no bias; ``np.nan``: computed at run time)."""
        if len(n.inputs) < 3 or not n.inputs[2]:
            return None
        b = g.constants.get(n.inputs[2])
        return np.full(o, np.nan) if b is None else pad_channels(b, o)

    @staticmethod
    def _conv_spec(x_shape, w_shape, stride, padding, groups: int, pad_value: int) -> conv2d_direct.Conv2dSpec:
        """The unpacked conv geometry of packed shapes x (N/B, C/BI, H, W, B, BI) and w (O/BO, C/BI, KH, KW, BO, BI)."""
        nb, cb, h, wd, b, bi = x_shape
        ob, ib, kh, kw, bo, _ = w_shape
        n, c, o, cw = nb * b, cb * bi, ob * bo, ib * bi
        if groups > 1 and ib == 1 and ob == cb and groups > cb:
            cw, groups = 1, c  # depthwise: every padded channel is its own group
        if c != cw * groups:
            raise ValueError(f"conv2d: input has {c} padded channels, weight {cw} x groups {groups}")
        return conv2d_direct.Conv2dSpec(n, c, h, wd, o, kh, kw, tuple(int(v) for v in stride),
                                        tuple(int(v) for v in padding), (1, 1), int(groups), "int8", int(pad_value))

    def _run_packed(self, state, x: np.ndarray, out: np.ndarray | None = None,
                    other: np.ndarray | None = None) -> np.ndarray:
        fn, data_shape, fixed, out_shape, size, temps, prof, _ = state
        if out is None or out.dtype != np.int8 or out.size != size or not out.flags.c_contiguous:
            out = np.empty(out_shape, np.int8)
        elif out.shape != out_shape:
            out = out.reshape(out_shape)  # else the caller's array itself (the Module sees its slot back)
        x_in, other_in = x, other
        if x.size * x.itemsize != math.prod(data_shape) or not x.flags.c_contiguous:
            x = np.ascontiguousarray(x).reshape(data_shape)  # raises on a wrong size
        if other is None:
            addresses = (self._address(x), *fixed, self._address(out), *temps)
        else:  # the residual operand, packed like the output
            if other.dtype != np.int8 or other.size != size:
                raise ValueError(f"conv2d: the residual operand is {other.dtype} {other.shape}; the output is int8 "
                                 f"{out_shape} (packed)")
            other = np.ascontiguousarray(other)
            addresses = (self._address(x), *fixed, self._address(other), self._address(out), *temps)
        fn.run_addresses(addresses)
        self.last_profile = prof
        # the same call again (see last_call): only where it read the caller's own arrays (no copies made here)
        self._last_call = ((threading.get_ident(), fn, addresses, prof, state) if x is x_in and other is other_in
                           else None)
        return out

    def last_call(self):
        """A zero-argument callable that repeats the last :meth:`conv2d` / :meth:`dense` call's kernel on the same
        memory (the same prepared layer and data addresses), or None where that call did not run a prepared packed
        layer on the caller's own arrays. The caller must pass the same array objects again, unchanged, kept alive:
        the Module's bound calls do (its arena views and constants, compared by identity each run)."""
        last = self._last_call
        if last is None or last[0] != threading.get_ident():  # another thread's call came in between: none
            return None
        _, fn, addresses, prof, state = last

        def again() -> None:
            fn.run_addresses(addresses)
            self.last_profile = prof
        again.state = state  # type: ignore[attr-defined]  (the prepared arrays stay alive with the call)
        # the same kernel call for a native caller (the executor's native replay; last_profile is this call's already)
        again.native = fn.native_call(addresses)  # type: ignore[attr-defined]
        return again

    def _address(self, a: np.ndarray) -> int:
        """``a.ctypes.data`` (~3 us), remembered for the arrays that come back every run (the Module's arena
        views) through a weak reference: a dead array's entry never matches (nor a new one with its id)."""
        hit = self._addresses.get(id(a))
        if hit is not None and hit[0]() is a:
            return hit[1]
        if len(self._addresses) >= ADDRESS_CACHE:
            self._addresses.clear()
        addr = a.ctypes.data
        self._addresses[id(a)] = (weakref.ref(a), addr)
        return addr

    def _profile(self, macs: int, x, w, bias, out) -> None:
        self.last_profile = host_profile(macs, x, w, bias, out)

    def conv2d(self, x, w, bias, *, stride, padding, groups, requant: Requant, pad_value: int = 0,
               out: np.ndarray | None = None, residual: np.ndarray | None = None,
               residual_add=None) -> np.ndarray:
        """``out``: where the packed int8 result may go (used when its shape and dtype fit; the result is returned).
        ``residual`` (int8, packed like the output) with ``residual_add`` (:class:`compiler.topi.residual.Residual`,
        see :meth:`supports_residual`): the QAdd of the conv's result and ``residual``, fused."""
        cfg = self.config
        self._last_call = None
        if (residual is None) != (residual_add is None):
            raise ValueError("conv2d: give both residual (the other operand) and residual_add (its QAdd), or neither")
        key = (id(w), id(requant), id(bias), tuple(stride), tuple(padding), int(groups), int(pad_value), x.shape,
               id(residual_add))
        layer = self._layers.get(key)
        if (layer is not None and layer[0] is w and layer[1] is requant and layer[2] is bias and layer[4] is residual_add
                and x.dtype == np.int8):
            return self._run_packed(layer[3], x, out, residual)
        if residual_add is not None:
            why = self.supports_residual(residual_add)
            if why is not None:
                raise ValueError(f"conv2d: the residual Add cannot be fused: {why}")
        check_conv_operands(cfg, x, w)
        spec = self._conv_spec(x.shape, w.shape, stride, padding, int(groups), int(pad_value))
        o = spec.o
        rq = pad_requant(requant, o)
        w_oihw = unpack_weight(w)[:, :spec.cg]  # depthwise: one input channel per group
        ps = self._packed_spec(spec, rq, w_oihw)
        if ps is not None:  # the packed layout in and out, the layer's arguments prepared once
            rq = fill_idle_channels(rq, w_oihw, None if bias is None else pad_channels(bias, o))
            fn = self._packed_kernel(ps, rq, residual_add)
            wp = conv2d_int8.pack_weight_pairs(ps, w_oihw)
            params = requant_int.requant_params(rq, pad_channels(bias, o), o)
            if ps.quads:  # the copy's x + 128 added 128 * sum(w) per channel: taken off the bias (int32 wrap)
                params[0] = (params[0] - conv2d_int8.u8_offset(ps, w_oihw)).astype(np.int32)
            n_out = (spec.n // cfg.batch, o // cfg.block_out, spec.oh, spec.ow, cfg.batch, cfg.block_out)
            prof = host_profile(spec.macs, x, w, bias, np.empty(n_out, np.int8))
            temps = fn.temp_arrays()
            keep = (wp, params, temps)  # the fixed arrays: alive as long as the state holds their addresses
            state = (fn, ps.data_shape, tuple(a.ctypes.data for a in (wp, *params)), n_out, math.prod(n_out),
                     tuple(a.ctypes.data for a in temps), prof, keep)
            if len(self._layers) >= LAYER_CACHE:  # weights computed at run time: new objects every call
                self._layers.clear()
                self._dense_views.clear()
            self._layers[key] = (w, requant, bias, state, residual_add)
            return self._run_packed(state, x, out, residual)
        xs, ws = unpack_activation(x), unpack_weight(w)[:, :spec.cg]  # depthwise: one input channel per group
        out = self._run(spec, xs, ws, w, pad_channels(bias, o), pad_requant(requant, o))
        packed = pack_activation(out.astype(np.int8), cfg.batch, cfg.block_out)
        if residual_add is not None:  # the unpacked kernel: the exact Add on the host
            from jit_runtime.host_ops.int_elementwise import qadd

            p = residual_add.params
            packed = qadd(packed, residual, p) if residual_add.conv_is_a else qadd(residual, packed, p)
        self._profile(spec.macs, x, w, bias, packed)
        return packed

    def dense(self, x, w, bias, *, requant: Requant, out: np.ndarray | None = None) -> np.ndarray:
        cfg = self.config
        self._last_call = None
        if self.target == "llvm" and np.ndim(x) == 4 and np.ndim(w) == 4:  # a 1x1 conv on a 1x1 image, same memory
            view = self._dense_views.get(id(w))
            if view is None or view[0] is not w:
                view = (w, np.asarray(w).reshape(w.shape[0], w.shape[1], 1, 1, w.shape[2], w.shape[3]))
                self._dense_views[id(w)] = view
            nb, kb, b, bi = x.shape
            y = self.conv2d(np.asarray(x).reshape(nb, kb, 1, 1, b, bi), view[1], bias, stride=(1, 1),
                            padding=(0, 0, 0, 0), groups=1, requant=requant, out=out)
            if y.ndim == 6 and y.shape[2:4] == (1, 1):
                return y.reshape(y.shape[0], y.shape[1], y.shape[4], y.shape[5])
        xs, ws = dense_operands(x, w)
        n, k = xs.shape
        m = ws.shape[0]
        spec = conv2d_direct.Conv2dSpec(n, k, 1, 1, m, 1, 1, dtype="int8")
        out = self._run(spec, xs.reshape(n, k, 1, 1), ws.reshape(m, k, 1, 1), w, pad_channels(bias, m),
                        pad_requant(requant, m))
        packed = pack_activation(out.reshape(n, m).astype(np.int8), cfg.batch, cfg.block_out)
        self._profile(n * k * m, x, w, bias, packed)
        return packed
