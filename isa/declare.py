"""Declaring a tensor intrinsic: :func:`register_intrinsic` checks a :class:`~isa.intrinsics.IntrinsicDecl`
against the presets (semantics, operand shapes, the instruction format's 128-bit fit) and adds it to the registry
of :mod:`isa.intrinsics`; :func:`unregister_intrinsic` removes it.

The top of isa's own order: config -> encoding -> intrinsics (declarations) -> declared_timing; checking a
declaration needs the configs and the encodings, so it lives here, above them all.
"""
from __future__ import annotations

from isa.config import HwConfig, preset_names
from isa.encoding import layouts
from isa.errors import ConfigError
from isa.instructions import Gemm
from isa.intrinsics import _BUILTIN, _DECLS, _VERSION, OPCODE_SPACE, RESERVED_OPCODES, IntrinsicDecl, Timing, instantiate


def register_intrinsic(decl: IntrinsicDecl, check_configs: tuple[str, ...] | None = None) -> IntrinsicDecl:
    """Register ``decl``; checked now against the presets ``check_configs`` (default: every preset the
    declaration supports): semantics, operand shapes and the instruction format's 128-bit fit.

    Raises ConfigError naming what is wrong (a taken opcode, an unknown scope, a semantics that is not
    a tensor expression, fields that do not fit) and leaves the registry unchanged."""
    name = decl.name
    if not (isinstance(name, str) and name.isidentifier() and name == name.lower()):
        raise ConfigError(f"intrinsic name {name!r} must be a lower-case identifier")
    if name in _DECLS or name.startswith("alu"):
        raise ConfigError(f"intrinsic {name!r} is already registered (or names the ALU family)")
    if not (isinstance(decl.opcode, int) and 0 <= decl.opcode < OPCODE_SPACE):
        raise ConfigError(f"intrinsic {name}: opcode {decl.opcode!r} must be an integer in 0..{OPCODE_SPACE - 1} "
                          f"(the instruction opcode field is 3 bits)")
    taken = dict(RESERVED_OPCODES)
    taken.update({d.opcode: d.name for d in _DECLS.values()})
    if decl.opcode in taken:
        free = [o for o in range(OPCODE_SPACE) if o not in taken]
        raise ConfigError(f"intrinsic {name}: opcode {decl.opcode} is taken by {taken[decl.opcode]}; free opcodes: "
                          f"{', '.join(map(str, free)) or 'none'}")
    why = decl.timing.problem() if isinstance(decl.timing, Timing) else f"timing {decl.timing!r} is not a Timing"
    if why:
        raise ConfigError(f"intrinsic {name}: {why}")
    if decl.executor is not None and not (callable(decl.executor) or
                                          (isinstance(decl.executor, str) and decl.executor.count(":") == 1)):
        raise ConfigError(f"intrinsic {name}: executor must be a factory executor(cfg, scratchpads) or its import "
                          f"path 'module:attr', got {decl.executor!r}")
    if decl.insn_cls is not None and not (isinstance(decl.insn_cls, type) and issubclass(decl.insn_cls, Gemm)
                                          and decl.insn_cls.opcode == decl.opcode and not decl.fields):
        raise ConfigError(f"intrinsic {name}: insn_cls must be an isa.instructions.Gemm class with opcode "
                          f"{decl.opcode} and the declaration must have no extra fields")
    reserved = {"opcode", "reset", "uop_bgn", "uop_end", "iter_out", "iter_in", "overwrite"} | {
        f"{o}_factor_{w}" for o in ("dst", "src", "wgt") for w in ("out", "in")}
    seen: set[str] = set()
    for f in decl.fields:
        if f.name in reserved or not f.name.isidentifier():
            raise ConfigError(f"intrinsic {name}: extra field {f.name!r} clashes with the micro-op loop fields "
                              f"or is not an identifier")
        if f.name in seen:
            raise ConfigError(f"intrinsic {name}: extra field {f.name!r} is declared twice")
        seen.add(f.name)
    configs = check_configs if check_configs is not None else tuple(preset_names())
    _DECLS[name] = decl
    _VERSION[0] += 1
    try:
        checked = 0
        for p in configs:
            cfg = HwConfig.from_preset(p)
            if not decl.supported(cfg):
                continue
            checked += 1
            for f in decl.fields:
                w = f.width(cfg)
                if not isinstance(w, int) or w < 1:
                    raise ConfigError(f"intrinsic {name} on HwConfig {cfg.name!r}: extra field {f.name!r} is {w!r} "
                                      f"bits wide; a field needs at least 1 bit")
            instantiate(decl, cfg)
            layouts(cfg)
        if check_configs is None and not checked:
            raise ConfigError(f"intrinsic {name}: no preset supports it")
    except Exception:
        del _DECLS[name]
        _VERSION[0] += 1
        raise
    return decl


def unregister_intrinsic(name: str) -> None:
    """Remove a registered declaration (built-in ones cannot be removed)."""
    if name in _BUILTIN:
        raise ConfigError(f"intrinsic {name} is built in and cannot be unregistered")
    if name not in _DECLS:
        raise KeyError(f"no registered intrinsic {name!r}")
    del _DECLS[name]
    _VERSION[0] += 1
