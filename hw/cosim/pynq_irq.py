"""The interrupt path of the pynq shim (:mod:`hw.cosim.pynq_shim`): an ``axi_intc`` model with one level-sensitive
input (the accelerator's ``irq``) and, for its output (the PS interrupt), a UIO device stand-in on a pseudo-terminal
that the host opens as pynq's ``UioController`` opens ``/dev/uioN``."""
from __future__ import annotations

import os
import select
import signal
import threading
import tty
from typing import Callable

#: GIC interrupt id of the first PL-to-PS interrupt line (IRQ_F2P[0] on Zynq-7000, pl_ps_irq0[0] on ZynqMP)
RAW_IRQ = {"zynq": 61, "zynquplus": 121}
#: axi_intc register offsets (PG099)
ISR, IPR, IER, IAR, SIE, CIE, IVR, MER = range(0, 0x20, 4)


class IntcModel:
    """An ``axi_intc`` with one level-sensitive input (the accelerator's ``irq``) whose output drives ``uio``."""

    def __init__(self, uio: "UioPty"):
        self.isr = self.ier = self.mer = 0
        self.level = False
        self.uio = uio
        self._lock = threading.Lock()
        uio.on_enable = self._update

    def set_level(self, high: bool) -> None:
        with self._lock:
            self.level = high
            if high:
                self.isr |= 1
        self._update()

    @property
    def output(self) -> bool:
        return bool(self.mer & 1) and bool(self.isr & self.ier)

    def _update(self) -> None:
        with self._lock:
            out = self.output
        if out:
            self.uio.fire()

    def read(self, off: int) -> int:
        with self._lock:
            if off == IVR:
                p = self.isr & self.ier
                return (p & -p).bit_length() - 1 if p else 0xFFFF_FFFF
            return {ISR: self.isr, IPR: self.isr & self.ier, IER: self.ier, MER: self.mer}.get(off, 0)

    def write(self, off: int, v: int) -> None:
        with self._lock:
            if off == ISR and not self.mer & 2:  # software interrupts only before the hardware is enabled
                self.isr |= v & 1
            elif off == IER:
                self.ier = v & 1
            elif off == IAR:
                self.isr &= ~v
                if self.level:  # level input: still active
                    self.isr |= 1
            elif off == SIE:
                self.ier |= v & 1
            elif off == CIE:
                self.ier &= ~v
            elif off == MER:
                self.mer = v & 3
        self._update()


class UioPty:
    """A UIO device stand-in: a pseudo-terminal in raw mode. The host opens :attr:`path` (``open(path, "r+b")``
    as pynq's ``UioController`` does) and writes a non-zero 4-byte word to enable the interrupt; :meth:`fire`
    (when enabled) sends the 4-byte event count and disables it until the next enable, as ``uio_pdrv_genirq``."""

    def __init__(self, stats: dict | None = None):
        self.stats = stats if stats is not None else {}
        self.master, self._slave = os.openpty()
        tty.setraw(self._slave)
        self.path = os.ttyname(self._slave)
        self.enabled = False
        self.count = 0
        self.on_enable: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._serve, name="vta-shim-uio", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        buf = b""
        while not self._stop:
            r, _, _ = select.select([self.master], [], [], 0.05)
            if not r:
                continue
            try:
                buf += os.read(self.master, 64)
            except OSError:
                return
            while len(buf) >= 4:
                word, buf = buf[:4], buf[4:]
                with self._lock:
                    self.enabled = any(word)
                if any(word):
                    self.on_enable()

    def fire(self) -> None:
        with self._lock:
            if not self.enabled:
                return
            self.enabled = False
            self.count += 1
            self.stats["irq_fired"] = self.stats.get("irq_fired", 0) + 1
            os.write(self.master, self.count.to_bytes(4, "little"))

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        try:  # the pty became the controlling terminal (a session leader without one opened it, e.g. a Jupyter
            os.tcgetpgrp(self._slave)  # kernel: open() without O_NOCTTY): closing the master hangs up the session
            ctty = True
        except OSError:
            ctty = False
        if ctty and threading.current_thread() is not threading.main_thread():
            return  # SIGHUP cannot be held off from here: keep the two descriptors
        old = signal.signal(signal.SIGHUP, signal.SIG_IGN) if ctty else None
        try:
            for fd in (self.master, self._slave):
                try:
                    os.close(fd)
                except OSError:
                    pass
        finally:
            if ctty:
                signal.signal(signal.SIGHUP, old)
