"""Hardware design-space exploration: which accelerator configuration for this model and this FPGA.

:mod:`compiler.dse.space` (the space: HwConfig fields as lists or ranges, pruned by the config validator),
:mod:`compiler.dse.evaluate` (pure (config, model) -> record functions: latency by the timing engine, an analytic
resource estimate), :mod:`compiler.dse.log` (the resumable JSON-lines log), :mod:`compiler.dse.sweep` (the
stages and the Pareto front), :mod:`compiler.dse.report` (table and plot). Evaluations run through
:mod:`compiler.scaleout` (a loop, a process pool or Ray tasks). docs/dse.md is the user's guide.
"""
from compiler.dse.evaluate import estimate_resources, latency_key, latency_record
from compiler.dse.log import ResultLog
from compiler.dse.space import Point, Space, SpaceError, parse_space
from compiler.dse.sweep import DseResult, ResourceModel, TimingModel, apply_fmax, pareto, run_sweep

__all__ = ["DseResult", "Point", "ResourceModel", "ResultLog", "Space", "SpaceError", "TimingModel", "apply_fmax", "estimate_resources",
           "latency_key", "latency_record", "pareto", "parse_space", "run_sweep"]
