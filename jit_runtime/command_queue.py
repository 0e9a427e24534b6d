"""The command queue: builds an instruction stream through VTA-like calls and runs it on a device.

Typical use (see ``docs/runtime.md``)::

    q = CommandQueue(cfg)                              # device="sim"
    x = q.alloc((rows, cfg.batch, cfg.block_out), np.int32, name="x"); x.copy_from(data)
    y = q.alloc((rows, cfg.batch, cfg.block_out), np.int8, name="y")
    q.load_2d("acc", 0, x, 0, x_size=rows, y_size=1, x_stride=rows)
    q.push_alu(relu_kernel, op="MAX", use_imm=True, imm=0, signature=("relu", rows))
    q.dep_push("compute", "store"); q.dep_pop("compute", "store")
    q.store_2d(0, y, 0, x_size=rows, y_size=1, x_stride=rows)
    result = q.synchronize()                           # appends FINISH, runs, returns cycles/profile

Dependency pops fold into the next instruction of the popping unit; pushes attach to the
pushing unit's last instruction, or become a one-cycle NOP when they cannot.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Hashable

import numpy as np

from isa import Alu, Finish, Instruction, Load, MemType, Store, Unit, alu_op, encode, encode_stream, unit_of
from isa.alu import op_supported, unsupported_reason
from isa.encoding import layouts
from isa.intrinsics import declaration, insn_class
from jit_runtime.buffers import DeviceBuffer, buffer_alignment
from jit_runtime.deps import TOKEN_QUEUES, add_flags, as_unit, nop, pop_flag, push_flag, queue_name
from jit_runtime.device import Device, make_device
from jit_runtime.dram import Dram
from jit_runtime.errors import DependencyError, DeviceBufferError, KernelError, RuntimeApiError
from jit_runtime.program import BufferInfo, Program, RunResult, stream_summary
from jit_runtime.uop_kernel import KernelBuilder, UopCache, UopKernel, make_kernel

if TYPE_CHECKING:
    from isa import HwConfig

LOADABLE = {"inp": MemType.INP, "wgt": MemType.WGT, "acc": MemType.ACC}
Finit = Callable[[KernelBuilder], None]


class CommandQueue:
    """Builds one program at a time; ``synchronize()`` runs it, ``finalize()`` returns it unrun."""

    def __init__(self, cfg: "HwConfig", device: "str | Device" = "sim", *, dram: Dram | None = None):
        self.cfg = cfg
        self.device = device
        self.dram = dram if dram is not None else Dram()
        self.align = buffer_alignment(cfg)
        self._buffers: dict[str, DeviceBuffer] = {}
        self._kernels: dict[Hashable, UopKernel] = {}
        self._uop_cache = UopCache(cfg.uop_depth, align=max(1, cfg.bus_bytes // cfg.uop_elem_bytes))
        self._builder: KernelBuilder | None = None
        self._reset_stream()

    # ================================================================ buffers
    def alloc(self, shape: int | tuple[int, ...], dtype: Any = np.int8, *, name: str | None = None) -> DeviceBuffer:
        """A zeroed DRAM buffer, aligned for every memory type; ``name`` labels it in saved programs."""
        live = {n for n, b in self._buffers.items() if not b.freed}
        if name is None:
            name = f"buf{len(self._buffers)}"
            while name in self._buffers:
                name += "_"
        elif name in live:
            raise DeviceBufferError(f"a live buffer is already named {name!r}")
        buf = DeviceBuffer.allocate(self.dram, shape, dtype, name=name, align=self.align)
        self._buffers[name] = buf
        return buf

    def free(self, buf: DeviceBuffer) -> None:
        """Release ``buf`` (same as ``buf.free()``); using it afterwards raises ``UseAfterFreeError``."""
        buf.free()

    def buffers(self) -> dict[str, DeviceBuffer]:
        """The live (not freed) user buffers by name."""
        return {n: b for n, b in self._buffers.items() if not b.freed}

    # ============================================================ DMA: 2-D
    def load_2d(self, mem: str, sram_base: int, buf: DeviceBuffer, elem_offset: int, x_size: int, y_size: int,
                x_stride: int, *, x_pad0: int = 0, y_pad0: int = 0, x_pad1: int = 0, y_pad1: int = 0,
                pad_value: int = 0) -> Load:
        """LOAD ``y_size`` rows of ``x_size`` ``mem`` elements (row pitch ``x_stride``) from ``buf`` at
        element ``elem_offset`` into scratchpad ``mem`` ("inp", "wgt" or "acc") from ``sram_base``,
        surrounded by padding: every lane of a pad element is ``pad_value`` (INP only, e.g. the activation
        zero point; WGT/ACC pad with 0). INP/WGT run on the load unit, ACC on the compute unit."""
        key = str(mem).lower()
        if key not in LOADABLE:
            raise RuntimeApiError(f"load_2d: memory {mem!r} must be one of {', '.join(LOADABLE)} "
                                  f"(micro-ops are loaded by push_gemm/push_alu)")
        pad_value = int(pad_value)
        if pad_value and key != "inp":
            raise RuntimeApiError(f"load_2d: pad_value={pad_value} is only allowed for mem='inp' ({key} pads with 0)")
        pv = layouts(self.cfg)["MEM"].field("pad_value")
        if not pv.lo_value <= pad_value <= pv.hi_value:
            raise RuntimeApiError(f"load_2d: pad_value={pad_value} does not fit the {pv.width}-bit signed pad_value "
                                  f"field (allowed {pv.lo_value}..{pv.hi_value})")
        rows, cols = y_pad0 + y_size + y_pad1, x_pad0 + x_size + x_pad1
        self._check_sram("load_2d", key, sram_base, rows * cols)
        dram_base = self._dram_base("load_2d", key, buf, elem_offset, x_size, y_size, x_stride)
        insn = Load(LOADABLE[key], sram_base, dram_base, y_size, x_size, x_stride, y_pad0, y_pad1, x_pad0, x_pad1,
                    pad_value=pad_value)
        return self._emit(insn)  # type: ignore[return-value]

    def store_2d(self, sram_base: int, buf: DeviceBuffer, elem_offset: int, x_size: int, y_size: int,
                 x_stride: int) -> Store:
        """STORE ``y_size`` rows of ``x_size`` OUT elements from ``sram_base`` into ``buf`` at element
        ``elem_offset`` (row pitch ``x_stride``), on the store unit."""
        self._check_sram("store_2d", "out", sram_base, x_size * y_size)
        dram_base = self._dram_base("store_2d", "out", buf, elem_offset, x_size, y_size, x_stride)
        return self._emit(Store(MemType.OUT, sram_base, dram_base, y_size, x_size, x_stride))  # type: ignore

    def _check_sram(self, what: str, mem: str, base: int, n: int) -> None:
        depth = self.cfg.depth(mem)
        if base < 0 or base + n > depth:
            raise RuntimeApiError(f"{what}: {mem} scratchpad range [{base}, {base + n}) is outside 0..{depth}")

    def _dram_base(self, what: str, mem: str, buf: DeviceBuffer, offset: int, x_size: int, y_size: int,
                   x_stride: int) -> int:
        base = buf.elem_offset(self.cfg, mem)  # raises on a freed buffer
        if min(offset, x_size, y_size) < 0:
            raise RuntimeApiError(f"{what}: elem_offset, x_size and y_size must be >= 0")
        if y_size > 1 and x_stride < x_size:
            raise RuntimeApiError(f"{what}: x_stride={x_stride} is smaller than x_size={x_size}")
        if x_size and y_size:
            end = offset + (y_size - 1) * x_stride + x_size
            n = buf.n_elems(self.cfg, mem)
            if end > n:
                raise DeviceBufferError(f"{what}: elements [{offset}, {end}) of buffer {buf.name!r} are out of "
                                        f"range: it holds {n} {mem} elements of {self.cfg.elem_bytes(mem)} bytes")
        return base + offset

    # =========================================================== micro-kernels
    def uop_loop_begin(self, extent: int, dst_factor: int = 0, src_factor: int = 0, wgt_factor: int = 0) -> None:
        """Open a uop loop in the kernel being recorded (inside a finit callback)."""
        self._current_builder("uop_loop_begin").loop_begin(extent, dst_factor, src_factor, wgt_factor)

    def uop_loop_end(self) -> None:
        self._current_builder("uop_loop_end").loop_end()

    def uop_push(self, dst: int, src: int, wgt: int = 0) -> None:
        self._current_builder("uop_push").push(dst, src, wgt)

    def _current_builder(self, what: str) -> KernelBuilder:
        if self._builder is None:
            raise KernelError(f"{what} outside a micro-kernel: call it from the finit of push_gemm/push_alu")
        return self._builder

    def kernel(self, mode: str, finit: Finit, signature: Hashable | None = None) -> UopKernel:
        """The kernel for ``signature``: recorded by ``finit`` on first use, cached afterwards.
        With ``signature=None`` ``finit`` always runs and kernels are shared by content."""
        if signature is not None:
            cached = self._kernels.get((mode, "sig", signature))
            if cached is not None:
                return cached
        if self._builder is not None:
            raise KernelError("a micro-kernel cannot be recorded inside another one")
        builder = KernelBuilder(mode)
        self._builder = builder
        try:
            finit(builder)
        finally:
            self._builder = None
        k = make_kernel(self.cfg, builder, signature)
        if k.key in self._kernels:
            return self._kernels[k.key]
        self._check_kernel_indices(k)
        k.buffer = DeviceBuffer.allocate(self.dram, (k.size,), np.uint32, name=f"uop_kernel{len(self._kernels)}",
                                         align=self.align)
        k.buffer.copy_from(k.words)
        self._kernels[k.key] = k
        return k

    def _check_kernel_indices(self, k: UopKernel) -> None:
        spans = {"dst": 0, "src": 0, "wgt": 0}
        for loop in k.loops:
            spans["dst"] += (loop.extent - 1) * loop.dst_factor
            spans["src"] += (loop.extent - 1) * loop.src_factor
            spans["wgt"] += (loop.extent - 1) * loop.wgt_factor
        depths = {"dst": ("acc", self.cfg.acc_depth),
                  "src": ("inp", self.cfg.inp_depth) if k.mode == "gemm" else ("acc", self.cfg.acc_depth),
                  "wgt": ("wgt", self.cfg.wgt_depth)}
        for idx, (mem, depth) in depths.items():
            top = max(getattr(u, idx) for u in k.uops) + spans[idx]
            if top >= depth:
                raise KernelError(f"{k.mode} micro-kernel reaches {mem} index {top} through its {idx} indices "
                                  f"and loops; the {mem} scratchpad has {depth} elements")

    def push_gemm(self, finit: Finit, *, signature: Hashable | None = None, reset: bool = False,
                  overwrite: bool = False, intrinsic: str = "gemm") -> UopKernel:
        """GEMM over the kernel's loops and uops: ``acc[dst] += inp[src] x wgt[wgt]^T``
        (``acc[dst] = 0`` with ``reset``; ``acc[dst] = inp x wgt^T`` with ``overwrite``, each dst at most
        once). Loads the uops first on a uop-cache miss. ``overwrite`` is an instruction flag, so the
        same recorded kernel serves accumulate and overwrite GEMMs. ``intrinsic`` names another declared
        tensor intrinsic (``isa.intrinsics``, e.g. ``"dwmac"``) with the same micro-op loop."""
        cls = insn_class(declaration(intrinsic))  # GEMM's class is Gemm itself (its declaration's insn_cls)
        k = self.kernel("gemm", finit, signature)
        base = self._make_resident(k)
        self._emit(cls(bool(reset), base, base + k.size, **k.loop_fields(), overwrite=bool(overwrite)))
        return k

    def push_alu(self, finit: Finit, *, op: str, use_imm: bool = False, imm: int = 0,
                 signature: Hashable | None = None, reset: bool = False) -> UopKernel:
        """ALU ``acc[dst] = op(acc[dst], imm if use_imm else acc[src])`` over the kernel's loops and uops.

        A record op (REQUANT) reads its per-channel parameters from ``wgt[src]`` and has no immediate."""
        aop = alu_op(op)  # raises with the list of known ops
        name = aop.name
        if not op_supported(aop, self.cfg):
            raise RuntimeApiError(f"push_alu: {unsupported_reason(aop, self.cfg)}")
        if aop.operand == "wgt" and use_imm:
            raise RuntimeApiError(f"push_alu: ALU.{name} reads its parameter records from wgt[src]; use_imm must be False")
        k = self.kernel("alu", finit, signature)
        base = self._make_resident(k)
        self._emit(Alu(name, bool(reset), base, base + k.size, use_imm=bool(use_imm), imm=int(imm),
                       **k.loop_fields()))
        return k

    def preload_kernels(self, kernels: list[UopKernel]) -> None:
        """Make ``kernels`` resident now, in one LOAD.UOP where the misses take one contiguous range of the uop
        scratchpad (always so at the start of a stream): a GEMM/ALU then never waits for the DRAM port to load
        its micro-ops behind a long LOAD of the other units. Kernels that do not fit together are left to load
        on first use."""
        todo, seen, total = [], set(), 0
        for k in kernels:
            if k.key in seen or self._uop_cache.is_resident(k):
                continue
            size = -(-k.size // self._uop_cache.align) * self._uop_cache.align
            if total + size > self._uop_cache.capacity:
                break
            seen.add(k.key)
            todo.append(k)
            total += size
        if len(todo) < 2:
            return
        bases = [self._uop_cache.lookup(k)[0] for k in todo]
        lo = min(bases)
        hi = max(b + k.size for b, k in zip(bases, todo))
        if hi - lo > total:  # not one range (kernels already resident in between): load each one
            for b, k in zip(bases, todo):
                self._emit(Load(MemType.UOP, b, k.buffer.elem_offset(self.cfg, "uop"), 1, k.size, k.size))
            return
        words = np.zeros(hi - lo, dtype=np.uint32)
        for b, k in zip(bases, todo):
            words[b - lo:b - lo + k.size] = k.words
        buf = DeviceBuffer.allocate(self.dram, words.shape, np.uint32, name=f"uop_preload{len(self._kernels)}",
                                    align=self.align)
        buf.copy_from(words)
        self._emit(Load(MemType.UOP, lo, buf.elem_offset(self.cfg, "uop"), 1, hi - lo, hi - lo))

    def _make_resident(self, k: UopKernel) -> int:
        base, hit = self._uop_cache.lookup(k)
        if not hit:
            assert k.buffer is not None
            dram_base = k.buffer.elem_offset(self.cfg, "uop")
            self._emit(Load(MemType.UOP, base, dram_base, 1, k.size, k.size))
        return base

    def clear_kernel_cache(self) -> None:
        """Forget every recorded kernel and free their DRAM copies (the next push re-records).
        Only between programs: the current stream may still load uops from those copies."""
        if self._insns:
            raise KernelError("clear_kernel_cache with instructions pending: call it after synchronize/finalize")
        for k in self._kernels.values():
            if k.buffer is not None and not k.buffer.freed:
                k.buffer.free()
        self._kernels.clear()
        self._uop_cache.reset()

    # ========================================================= dependencies
    def dep_push(self, from_unit: "Unit | str", to_unit: "Unit | str") -> None:
        """``from_unit`` sends a token to ``to_unit`` once its work so far is done."""
        src, dst = as_unit(from_unit), as_unit(to_unit)
        flag = push_flag(src, dst)
        self._pushes[queue_name(src, dst)] += 1
        last = self._last.get(src)
        if not self._pending[src] and last is not None and not getattr(self._insns[last].deps, flag):
            self._insns[last] = add_flags(self._insns[last], {flag})
            return
        self._emit(nop(src, **{flag: True}))

    def dep_pop(self, from_unit: "Unit | str", to_unit: "Unit | str") -> None:
        """``to_unit``'s next instruction waits for (and consumes) a token from ``from_unit``."""
        src, dst = as_unit(from_unit), as_unit(to_unit)
        flag = pop_flag(src, dst)
        self._pops[queue_name(src, dst)] += 1
        if flag in self._pending[dst]:  # a second pop of the same queue needs its own instruction
            self._emit(nop(dst))
        self._pending[dst].add(flag)

    def token_counts(self) -> dict[str, dict[str, int]]:
        """Pushes and pops so far in this program, per token queue."""
        return {q: {"push": self._pushes[q], "pop": self._pops[q]} for q in TOKEN_QUEUES}

    def _check_tokens(self) -> None:
        bad = [f"{q} (pushes {self._pushes[q]}, pops {self._pops[q]})" for q in TOKEN_QUEUES
               if self._pops[q] > self._pushes[q]]
        if bad:
            raise DependencyError("dependency pop(s) with no matching push: " + "; ".join(bad) +
                                  ". Each dep_pop(a, b) needs a dep_push(a, b) in the same program")

    def _drain_tokens(self) -> None:
        """Balance every token queue and make FINISH wait for load and store to be done."""
        for unit, back, fwd in ((Unit.LOAD, "compute->load", "load->compute"),
                                (Unit.STORE, "compute->store", "store->compute")):
            outstanding = self._pushes[back] - self._pops[back]
            if not outstanding and not self._pending[unit]:
                last = self._last.get(unit)
                if last is None:
                    continue  # the unit never ran: nothing to wait for
                if getattr(self._insns[last].deps, push_flag(unit, Unit.COMPUTE)):
                    continue  # its last instruction already tells compute it is done
            for _ in range(outstanding):
                self.dep_pop(Unit.COMPUTE, unit)
            self.dep_push(unit, Unit.COMPUTE)
        for queue in ("load->compute", "store->compute"):
            src = Unit.LOAD if queue.startswith("load") else Unit.STORE
            for _ in range(self._pushes[queue] - self._pops[queue]):
                self.dep_pop(src, Unit.COMPUTE)

    # ========================================================== the stream
    def _reset_stream(self) -> None:
        self._insns: list[Instruction] = []
        self._last: dict[Unit, int] = {}
        self._pending: dict[Unit, set[str]] = {u: set() for u in Unit}
        self._pushes: Counter[str] = Counter()
        self._pops: Counter[str] = Counter()
        self._uop_cache.reset()

    def _emit(self, insn: Instruction) -> Instruction:
        unit = unit_of(insn)
        insn = add_flags(insn, self._pending[unit])
        self._pending[unit] = set()
        encode(insn, self.cfg)  # a field that does not fit fails here, at the call that made it
        self._insns.append(insn)
        self._last[unit] = len(self._insns) - 1
        return insn

    @property
    def instructions(self) -> list[Instruction]:
        """The instructions emitted so far (FINISH and the final token drain are added by synchronize)."""
        return list(self._insns)

    def _close(self) -> tuple[list[Instruction], dict[str, Any]]:
        self._check_tokens()
        self._drain_tokens()
        assert not self._pending[Unit.LOAD] and not self._pending[Unit.STORE]
        self._emit(Finish())  # carries compute's final pops: it starts after the last load and store
        insns = self._insns
        runtime = {"uop_cache": self._uop_cache.stats.as_dict(), "tokens": self.token_counts(),
                   **stream_summary(insns)}
        return insns, runtime

    def _place(self, words: np.ndarray) -> int:
        """Write the encoded stream ``words`` (uint8) into DRAM; returns its address."""
        addr = self.dram.alloc(words.size, self.align)
        self.dram.image[addr:addr + words.size] = words
        return addr

    def finalize(self, *, name: str = "program", expected: dict[str, np.ndarray] | None = None) -> Program:
        """Close the stream (token drain + FINISH) and return it as a :class:`Program`, without running.
        The program holds a copy of the used DRAM image; the queue is then ready for the next program."""
        insns, runtime = self._close()
        words = encode_stream(insns, self.cfg).reshape(-1)  # encoded once: placed in DRAM and kept in the Program
        addr = self._place(words)
        try:
            image = self.dram.image[:self.dram.used_end].copy()
            bufs = {n: BufferInfo(b.addr, b.shape, b.dtype.str) for n, b in self.buffers().items()}
            return Program(self.cfg, words, image, addr, len(insns), bufs,
                           dict(expected or {}), runtime, name)
        finally:
            self.dram.free(addr)
            self._reset_stream()

    def synchronize(self, *, device: "str | Device | None" = None, trace: bool = False) -> RunResult:
        """Close the stream, run it on the device in place (buffers see the results) and wait.
        Returns cycles and the profile (device profile + ``"runtime"``: uop cache, tokens, counts)."""
        insns, runtime = self._close()
        addr = self._place(encode_stream(insns, self.cfg).reshape(-1))
        try:
            dev = make_device(self.device if device is None else device, self.cfg, trace=trace)
            res = dev.run(self.dram.image, addr, len(insns))
        finally:
            self.dram.free(addr)
            self._reset_stream()
        profile = dict(res.profile)
        profile["runtime"] = runtime
        return RunResult(int(res.cycles), profile, res)
