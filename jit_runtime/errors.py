"""Exceptions raised by the JIT runtime.

All are ``ValueError`` subclasses so the ``vta`` command prints them as one clear line.
"""


class RuntimeApiError(ValueError):
    """Base class: the runtime API was used in a way that cannot work."""


class DeviceBufferError(RuntimeApiError):
    """A DRAM buffer copy or access does not match the buffer (shape, dtype, bounds, alignment)."""


class UseAfterFreeError(DeviceBufferError):
    """A freed DRAM buffer was used."""


class OutOfMemoryError(RuntimeApiError):
    """The DRAM image cannot grow to satisfy an allocation (or a scratchpad range is too small)."""


class UopLoopError(RuntimeApiError):
    """Unbalanced uop loop begin/end, or more than two loop levels."""


class KernelError(RuntimeApiError):
    """A micro-kernel is empty, too big for the uop scratchpad, or recorded outside ``push_gemm``/``push_alu``."""


class DependencyError(RuntimeApiError):
    """A dependency push/pop between units that are not neighbours, or pops without matching pushes."""


class UnknownDeviceError(RuntimeApiError):
    """A device name that is not registered."""


class ProgramFileError(RuntimeApiError):
    """A program file that cannot be read (not a program, wrong format version, corrupt)."""


class ModuleFileError(ProgramFileError):
    """An exported module file (``.vtamod``) that cannot be read: damaged, another format version, a config
    whose signature does not match, steps that refer to what the file does not hold."""



class DeviceMismatchError(ValueError):
    """Two devices that must agree (the RTL and the simulator under ``rtl-check``) returned different DRAM
    bytes or cycle counts for the same program. The model executor re-raises it naming the layer."""


class BitstreamError(RuntimeApiError):
    """A PYNQ bitstream that cannot be used: missing ``.bit``/``.hwh``, no accelerator in its design, or the
    ``pynq`` package is not installed."""


class ConfigMismatchError(BitstreamError):
    """The bitstream's config signature register differs from the host config's signature."""


class ContiguousMemoryError(DeviceBufferError):
    """A buffer or DMA range outside the physically contiguous memory the accelerator can reach."""
