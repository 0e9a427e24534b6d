"""Dependency tokens between the load, compute and store units (VTA's push/pop prev/next).

There are four token queues, named ``"<from>-><to>"``: load->compute, compute->load,
compute->store and store->compute. ``prev``/``next`` are relative to the unit that owns
the instruction, in pipeline order load -> compute -> store.
"""
from __future__ import annotations

from functools import lru_cache

from isa import Deps, Gemm, Instruction, Load, MemType, Store, Unit, with_deps
from jit_runtime.errors import DependencyError

TOKEN_QUEUES = ("load->compute", "compute->load", "compute->store", "store->compute")


_BY_NAME = {u.name.lower(): u for u in Unit}


def as_unit(unit: "Unit | str") -> Unit:
    """``Unit.LOAD`` etc. from a ``Unit`` or its name (``"load"``, ``"compute"``, ``"store"``)."""
    if isinstance(unit, Unit):
        return unit
    got = _BY_NAME.get(unit) if isinstance(unit, str) else None
    if got is not None:
        return got
    try:
        return Unit[str(unit).upper()]
    except KeyError:
        raise DependencyError(f"unknown unit {unit!r}; units: load, compute, store") from None


@lru_cache(maxsize=None)  # units are few; an error is raised again on every call (lru_cache keeps no errors)
def queue_name(src: Unit, dst: Unit) -> str:
    """The token queue from ``src`` to ``dst``; raises unless the units are neighbours."""
    if abs(int(src) - int(dst)) != 1:
        raise DependencyError(f"no token queue from {src.name.lower()} to {dst.name.lower()}: tokens only "
                              f"flow between neighbours ({', '.join(TOKEN_QUEUES)})")
    return f"{src.name.lower()}->{dst.name.lower()}"


@lru_cache(maxsize=None)
def push_flag(src: Unit, dst: Unit) -> str:
    """The flag set on ``src``'s instruction to push a token to ``dst``."""
    queue_name(src, dst)
    return "push_next" if dst > src else "push_prev"


@lru_cache(maxsize=None)
def pop_flag(src: Unit, dst: Unit) -> str:
    """The flag set on ``dst``'s instruction to pop a token pushed by ``src``."""
    queue_name(src, dst)
    return "pop_prev" if src < dst else "pop_next"


def nop(unit: Unit, **flags: bool) -> Instruction:
    """A one-cycle instruction for ``unit`` that only carries dependency flags."""
    deps = Deps(**flags)
    if unit == Unit.LOAD:
        return Load(MemType.INP, 0, 0, 0, 0, 0, deps=deps)
    if unit == Unit.STORE:
        return Store(MemType.OUT, 0, 0, 0, 0, 0, deps=deps)
    return Gemm(False, 0, 0, 0, 0, deps=deps)


def add_flags(insn: Instruction, flags: set[str]) -> Instruction:
    return with_deps(insn, **{f: True for f in flags}) if flags else insn


__all__ = ["TOKEN_QUEUES", "as_unit", "queue_name", "push_flag", "pop_flag", "nop", "add_flags"]
