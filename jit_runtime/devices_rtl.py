"""Registers the ``rtl`` device (the Amaranth RTL under Verilator, see :mod:`hw.device`) with the runtime.

The factory imports :mod:`hw` only when an ``rtl`` device is made, so the runtime does not
depend on the hardware package otherwise.
"""
from __future__ import annotations

from jit_runtime.device import register_device
from jit_runtime.errors import RuntimeApiError


def _rtl(cfg, trace: bool = False):
    from hw.device import make_rtl_device

    return make_rtl_device(cfg, trace=trace)


try:
    register_device("rtl", _rtl)
except RuntimeApiError:  # already registered (this module re-imported, or a user's own "rtl")
    pass
