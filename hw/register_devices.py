"""Registers the RTL devices with the runtime: ``rtl`` (the Amaranth RTL under Verilator, compiled harness)
and ``rtl-check`` (the RTL and the simulator side by side, failing on any difference); see :mod:`hw.device`.

The runtime imports this module by name the first time such a device is asked for
(``jit_runtime.device._LAZY``), so the runtime never imports the hardware package itself.
"""
from __future__ import annotations

from hw.device import make_checked_rtl_device, make_rtl_device
from jit_runtime.device import register_device
from jit_runtime.errors import RuntimeApiError

for _name, _factory in (("rtl", make_rtl_device), ("rtl-check", make_checked_rtl_device)):
    try:
        register_device(_name, _factory)
    except RuntimeApiError:  # already registered (this module re-imported, or a user's own device)
        pass
