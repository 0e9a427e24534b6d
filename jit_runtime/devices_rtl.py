"""Registers the RTL devices with the runtime: ``rtl`` (the Amaranth RTL under Verilator, compiled harness)
and ``rtl-check`` (the RTL and the simulator side by side, failing on any difference); see :mod:`hw.device`.

The factories import :mod:`hw` only when such a device is made, so the runtime does not depend on the
hardware package otherwise.
"""
from __future__ import annotations

from jit_runtime.device import register_device
from jit_runtime.errors import RuntimeApiError


def _rtl(cfg, trace: bool = False):
    from hw.device import make_rtl_device

    return make_rtl_device(cfg, trace=trace)


def _rtl_check(cfg, trace: bool = False):
    from hw.device import make_checked_rtl_device

    return make_checked_rtl_device(cfg, trace=trace)


for _name, _factory in (("rtl", _rtl), ("rtl-check", _rtl_check)):
    try:
        register_device(_name, _factory)
    except RuntimeApiError:  # already registered (this module re-imported, or a user's own device)
        pass
