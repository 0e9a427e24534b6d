"""Registries of the backends `build` binds a model to: accelerator backends (``target=name``) and CPU backends
(``cpu=name``)."""
from __future__ import annotations

from typing import Callable

from compiler.graph.accel_interface import AccelBackend
from compiler.graph.cpu_backend import CpuBackend, NumpyCpuBackend

BackendFactory = Callable[[object], AccelBackend]
_REGISTRY: dict[str, BackendFactory] = {}


def register_accel_backend(name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Register ``factory(config) -> AccelBackend`` under ``name`` (e.g. ``"sim"``)."""
    if not replace and name in _REGISTRY and _REGISTRY[name] is not factory:
        raise ValueError(f"accelerator backend {name!r} is already registered (pass replace=True to override)")
    _REGISTRY[name] = factory


def available_accel_backends() -> list[str]:
    return sorted(_REGISTRY)


def create_accel_backend(name: str, config, **options) -> AccelBackend:
    """Instantiate the backend registered as ``name`` for ``config`` (``options``: backend-specific, e.g. the
    ``pynq`` target's ``bitstream``)."""
    if name not in _REGISTRY:
        raise ValueError(f"no accelerator backend registered as {name!r}; registered: {available_accel_backends()}")
    backend = _REGISTRY[name](config, **options)
    missing = [m for m in ("conv2d", "dense") if not callable(getattr(backend, m, None))]
    if missing:
        raise TypeError(f"backend {name!r} lacks AccelBackend methods {missing}")
    return backend


def _register_builtin() -> None:
    from compiler.graph.ref_backend import RefAccelBackend

    register_accel_backend("ref", RefAccelBackend)
    register_accel_backend("sim", _sim_backend)
    register_accel_backend("rtl", _rtl_backend)
    register_accel_backend("rtl-check", _rtl_check_backend)
    register_accel_backend("pynq", _pynq_backend)


def _sim_backend(config):
    """The accelerator backend on the cycle-accurate simulator (imported lazily: it pulls in the runtime)."""
    from compiler.backend.accel.backend import SimAccelBackend

    return SimAccelBackend(config)


def _rtl_backend(config):
    """The same compiled layers run on the RTL (Verilator, compiled harness): the hardware's bytes and cycles."""
    from compiler.backend.accel.backend import SimAccelBackend

    return SimAccelBackend(config, device="rtl")


def _rtl_check_backend(config):
    """Every layer on the RTL and on the simulator; the first layer whose bytes or cycles differ raises
    ``jit_runtime.errors.DeviceMismatchError`` naming it."""
    from compiler.backend.accel.backend import SimAccelBackend

    return SimAccelBackend(config, device="rtl-check")


def _pynq_backend(config, bitstream=None, pynq=None, **device_options):
    """The accelerator layers on a PYNQ board (``jit_runtime.devices_pynq``): the compiled programs of the
    ``sim`` backend, run by one pynq device (the overlay is loaded once). ``bitstream`` defaults to
    ``$VTA_BITSTREAM``; ``pynq`` is the pynq module or a compatible shim (``hw.cosim.pynq_shim.PynqShim``)."""
    from compiler.backend.accel.backend import SimAccelBackend
    from compiler.graph.accel_interface import as_hw_config
    from jit_runtime.devices_pynq import make_pynq_device

    cfg = as_hw_config(config)
    return SimAccelBackend(cfg, device=make_pynq_device(cfg, bitstream=bitstream, pynq=pynq, **device_options))


_register_builtin()


CPU_BACKENDS = ("numpy", "llvm")


def create_cpu_backend(cpu: "CpuBackend | str | None") -> CpuBackend:
    """A CPU backend from a name in ``CPU_BACKENDS`` (None = numpy) or an existing backend object."""
    if cpu is None or cpu == "numpy":
        return NumpyCpuBackend()
    if cpu == "llvm":
        from compiler.backend.plans.backend import TargetCpuBackend  # imported lazily: it pulls in llvmlite

        return TargetCpuBackend("llvm", lazy=True)
    if isinstance(cpu, str):
        raise ValueError(f"unknown CPU backend {cpu!r}; available: {', '.join(CPU_BACKENDS)}")
    if not isinstance(cpu, CpuBackend):
        raise TypeError(f"cpu={cpu!r} is neither a backend name {CPU_BACKENDS} nor a CpuBackend object")
    return cpu
