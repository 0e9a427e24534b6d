"""The ``Device`` protocol and the device registry.

A device runs an instruction stream that sits in a DRAM image::

    result = device.run(dram, insn_addr, n_insns)   # dram: uint8 1-D, modified in place
    result.cycles, result.profile

Built in: ``"sim"`` (cycle-accurate simulator, the default) and ``"sim-functional"``
(the simulator without timing). Other packages add theirs with
``register_device("rtl", factory)`` where ``factory(cfg, trace=False) -> Device``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

import numpy as np

from jit_runtime.errors import RuntimeApiError, UnknownDeviceError

if TYPE_CHECKING:
    from isa import HwConfig


@runtime_checkable
class DeviceResult(Protocol):
    """What ``Device.run`` returns. Simulator results also offer ``write_trace(path)``/``plot_timeline(path)``."""

    cycles: int
    profile: dict


@runtime_checkable
class Device(Protocol):
    """Anything that executes a program from a DRAM image."""

    def run(self, dram: np.ndarray, insn_addr: int, n_insns: int) -> DeviceResult: ...


DeviceFactory = Callable[..., Device]
_REGISTRY: dict[str, DeviceFactory] = {}
#: Devices registered by a module imported on first use (so the runtime does not import ``hw`` eagerly).
_LAZY: dict[str, str] = {"rtl": "hw.register_devices", "rtl-check": "hw.register_devices",
                        "pynq": "jit_runtime.devices_pynq"}


def register_device(name: str, factory: DeviceFactory, *, replace: bool = False) -> None:
    """Make ``name`` usable as ``device=name``; ``factory(cfg, trace=False)`` builds the device."""
    if not name or not isinstance(name, str):
        raise RuntimeApiError(f"device name {name!r} must be a non-empty string")
    if name in _REGISTRY and not replace:
        raise RuntimeApiError(f"device {name!r} is already registered (pass replace=True to override)")
    _REGISTRY[name] = factory


def device_names() -> list[str]:
    return sorted(set(_REGISTRY) | set(_LAZY))


def make_device(device: "str | Device", cfg: "HwConfig", *, trace: bool = False) -> Device:
    """A device from a registered name (or pass a ``Device`` instance through unchanged)."""
    if not isinstance(device, str):
        if not isinstance(device, Device):
            raise RuntimeApiError(f"{device!r} is neither a device name nor an object with run(dram, insn_addr, n_insns)")
        return device
    factory = _REGISTRY.get(device)
    if factory is None and device in _LAZY:
        import importlib

        importlib.import_module(_LAZY[device])  # registers the device on import
        factory = _REGISTRY.get(device)
    if factory is None:
        raise UnknownDeviceError(f"unknown device {device!r}; known devices: {', '.join(device_names())}")
    return factory(cfg, trace=trace)


def _simulator(cfg: "HwConfig", *, timing: bool, trace: bool) -> Any:
    from simulator import Simulator  # imported on use: the runtime works without a simulator installed

    return Simulator(cfg, timing=timing, trace=trace)


register_device("sim", lambda cfg, trace=False: _simulator(cfg, timing=True, trace=trace))
register_device("sim-functional", lambda cfg, trace=False: _simulator(cfg, timing=False, trace=trace))
