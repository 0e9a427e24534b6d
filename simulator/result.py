"""``SimResult``: cycles, profile, per-instruction events, trace and timeline writers."""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from isa.config import HwConfig
from simulator.errors import SimulatorError
from simulator.profile import build_profile
from simulator.program import UNITS, InsnInfo
from simulator.timing_engine import Timeline


class Event(NamedTuple):
    """One instruction's cycle stamps (grant is -1 when it did not use the DRAM port)."""

    index: int
    unit: str
    kind: str
    take: int
    start: int
    end: int
    grant: int
    dispatch: int


class SimResult:
    """What :meth:`Simulator.run` returns."""

    def __init__(self, cfg: HwConfig, infos: list[InsnInfo], timeline: Timeline | None):
        self.cfg, self.infos, self.timeline = cfg, infos, timeline

    @property
    def cycles(self) -> int:
        """``T`` of the timing contract (0 in functional mode)."""
        return self.timeline.cycles if self.timeline else 0

    @cached_property
    def profile(self) -> dict[str, Any]:
        return build_profile(self.cfg, self.infos, self.timeline)

    @cached_property
    def events(self) -> list[Event]:
        """Per-instruction records of a timed run (empty in functional mode)."""
        tl = self.timeline
        if tl is None:
            return []
        return [Event(i, UNITS[info.unit], info.kind, tl.take[i], tl.start[i], tl.end[i], tl.grant[i], tl.dispatch[i])
                for i, info in enumerate(self.infos)]

    def _need_timing(self) -> Timeline:
        if self.timeline is None:
            raise SimulatorError("this run was functional (timing=False): it has no timeline to draw")
        return self.timeline

    def write_trace(self, path: str | Path) -> Path:
        """Chrome/Perfetto trace JSON (open in ui.perfetto.dev); 1 cycle is shown as 1 us."""
        from simulator.trace import write_trace
        return write_trace(path, self.cfg, self.infos, self._need_timing())

    def plot_timeline(self, path: str | Path) -> Path:
        """A PNG timeline (matplotlib, Agg) with one row per unit and one for the DRAM port."""
        from simulator.trace import plot_timeline
        return plot_timeline(path, self.cfg, self.infos, self._need_timing())
