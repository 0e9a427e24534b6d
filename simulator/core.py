"""``Simulator``: the four units of a VTA-style core running one instruction stream from DRAM."""
from __future__ import annotations

import numpy as np

from isa.config import HwConfig
from isa.instructions import Alu, Finish, Gemm, Load, Store
from simulator.alu import AluExecutor
from simulator.blas import blas_session
from simulator.budget import DEFAULT_MAX_CYCLES, check_budget, with_progress
from simulator.dram import Dma, check_image
from simulator.functional import run_functional
from isa.intrinsics import intrinsics
from simulator.errors import InvalidInstructionError
from simulator.gemm import GemmExecutor
from simulator.tensor import make_executor
from simulator.program import Decoder
from simulator.result import SimResult
from simulator.scratchpads import Scratchpads
from simulator.replay import run_program


class Simulator:
    """Cycle-accurate (``timing=True``) or functional model of one core.

    Scratchpad contents persist across :meth:`run` calls (as SRAM does) until :meth:`reset`.
    """

    def __init__(self, cfg: HwConfig, *, timing: bool = True, trace: bool = False,
                 max_cycles: int | None = DEFAULT_MAX_CYCLES, progress: bool | None = None, replay: bool = True):
        """``max_cycles``: the cycle budget (None: none), see :mod:`simulator.budget`; ``progress``: a progress
        bar (None: only for programs of at least ``budget.PROGRESS_MIN_CYCLES`` cycles); ``replay``: a program
        run again replays its recorded timeline instead of running the timing engine (:mod:`simulator.replay`;
        same bytes and cycles)."""
        if max_cycles is not None and (not isinstance(max_cycles, int) or max_cycles < 1):
            raise ValueError(f"max_cycles must be a positive integer or None, got {max_cycles!r}")
        self.cfg, self.timing, self.trace = cfg, timing, trace
        self.max_cycles, self.progress, self.replay = max_cycles, progress, replay
        self.sp = Scratchpads(cfg)
        self._dma = Dma(cfg, self.sp)
        self._decoder = Decoder(cfg)
        self._alu = AluExecutor(cfg, self.sp)
        self._tensor: dict = {}  # intrinsic name -> executor (simulator.tensor.make_executor), made on first use

    @property
    def _gemm(self) -> GemmExecutor:
        """The GEMM declaration's executor (its dense-plan hook; tests look at its plans)."""
        return self._executor("gemm")

    def _executor(self, name: str):
        ex = self._tensor.get(name)
        if ex is None:
            intr = intrinsics(self.cfg).get(name)
            if intr is None or intr.kind != "tensor":
                raise InvalidInstructionError(f"tensor intrinsic {name!r} is not available on HwConfig "
                                              f"{self.cfg.name!r}")
            ex = make_executor(self.cfg, self.sp, intr)
            self._tensor[name] = ex
        return ex

    @property
    def scratchpads(self) -> dict[str, np.ndarray]:
        """The scratchpad arrays by memory name (uop, inp, wgt, acc, out)."""
        return self.sp.as_dict()

    def reset(self) -> None:
        """Zero every scratchpad."""
        self.sp.reset()

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> SimResult:
        """Run ``n_insns`` instructions at byte ``insn_addr`` of ``dram`` (modified in place)."""
        check_image(dram)
        cfg, sp = self.cfg, self.sp
        sp.wgt_version += 1  # the scratchpads may have been written directly since the last run
        prog = self._decoder.decode(dram, insn_addr, n_insns)  # cached by the program's bytes
        infos = prog.infos
        alu, load, store = self._alu.execute, self._dma.load, self._dma.store

        def execute(i: int) -> None:
            insn = infos[i].insn
            if isinstance(insn, Gemm):  # GEMM or another declared tensor intrinsic
                self._executor(insn.intrinsic).execute(i, insn)
            elif isinstance(insn, Alu):
                alu(i, insn)
            elif isinstance(insn, Load):
                load(dram, insn)
            elif isinstance(insn, Store):
                store(dram, insn)
            else:
                assert isinstance(insn, Finish)

        floor = check_budget(infos, self.max_cycles)
        execute, close = with_progress(execute, infos, floor, self.progress)
        try:
            with blas_session():
                if self.timing:
                    return SimResult(cfg, infos, run_program(cfg, prog, execute, self.max_cycles, self.replay))
                run_functional(cfg, infos, execute)
                return SimResult(cfg, infos, None)
        finally:
            close()
