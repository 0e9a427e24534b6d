"""Chrome/Perfetto trace JSON and a matplotlib timeline of a timed run.

Trace time unit: one cycle is shown as one microsecond (``ts``/``dur`` are cycle numbers);
the real duration at the config clock is ``cycles / clock_mhz`` microseconds (in the metadata).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from isa.config import HwConfig
from simulator.program import UNITS, InsnInfo
from simulator.timing_engine import Timeline

LANES = ("fetch", "load", "compute", "store", "dram port")


def trace_events(cfg: HwConfig, infos: list[InsnInfo], tl: Timeline) -> list[dict[str, Any]]:
    """Chrome trace events: one lane (tid) per unit plus the DRAM port; ``X`` events with index and disassembly."""
    ev: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0,
                                 "args": {"name": f"vta core {cfg.name} @ {cfg.clock_mhz} MHz (1 cycle = 1 us)"}}]
    for tid, lane in enumerate(LANES):
        ev.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": tid, "args": {"name": lane}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": tid, "args": {"sort_index": tid}})
    port = LANES.index("dram port")
    for first, count, req, grant, end in tl.bursts:
        args = {"first": first, "count": count, "request": req, "grant": grant}
        ev.append({"ph": "X", "name": f"fetch {first}..{first + count - 1}", "cat": "fetch", "pid": 0, "tid": 0,
                   "ts": grant, "dur": end - grant, "args": args})
        ev.append({"ph": "X", "name": "fetch", "cat": "dram", "pid": 0, "tid": port, "ts": grant,
                   "dur": end - grant, "args": args})
    for i, info in enumerate(infos):
        tid = 1 + info.unit
        args = {"index": i, "asm": info.asm, "dispatch": tl.dispatch[i], "take": tl.take[i], "start": tl.start[i],
                "grant": tl.grant[i], "end": tl.end[i]}
        if tl.start[i] > tl.take[i]:
            ev.append({"ph": "X", "name": "wait tokens", "cat": "stall", "pid": 0, "tid": tid, "ts": tl.take[i],
                       "dur": tl.start[i] - tl.take[i], "args": {"index": i}})
        ev.append({"ph": "X", "name": info.kind, "cat": UNITS[info.unit], "pid": 0, "tid": tid, "ts": tl.start[i],
                   "dur": tl.end[i] - tl.start[i], "args": args})
        if info.port:
            ev.append({"ph": "X", "name": info.kind, "cat": "dram", "pid": 0, "tid": port, "ts": tl.grant[i],
                       "dur": tl.end[i] - tl.grant[i], "args": {"index": i, "asm": info.asm}})
    return ev


def write_trace(path: str | Path, cfg: HwConfig, infos: list[InsnInfo], tl: Timeline) -> Path:
    path = Path(path)
    data = {"traceEvents": trace_events(cfg, infos, tl), "displayTimeUnit": "ms",
            "metadata": {"config": cfg.name, "clock_mhz": cfg.clock_mhz, "cycles": tl.cycles,
                         "time_unit": "1 trace microsecond = 1 cycle"}}
    path.write_text(json.dumps(data))
    return path


def plot_timeline(path: str | Path, cfg: HwConfig, infos: list[InsnInfo], tl: Timeline) -> Path:
    """A PNG with one row per lane; DMA, GEMM, ALU and other instructions in different colours."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    colours = {"LOAD": "tab:blue", "STORE": "tab:green", "GEMM": "tab:red", "ALU": "tab:orange",
               "FINISH": "black", "fetch": "tab:gray", "wait": "lightgray"}
    rows: dict[int, list[tuple[int, int, str]]] = {k: [] for k in range(len(LANES))}
    for _first, _count, _req, grant, end in tl.bursts:
        rows[0].append((grant, end - grant, colours["fetch"]))
        rows[4].append((grant, end - grant, colours["fetch"]))
    for i, info in enumerate(infos):
        c = colours[info.kind.split(".")[0]]
        lane = 1 + info.unit
        if tl.start[i] > tl.take[i]:
            rows[lane].append((tl.take[i], tl.start[i] - tl.take[i], colours["wait"]))
        rows[lane].append((tl.start[i], max(1, tl.end[i] - tl.start[i]), c))
        if info.port:
            rows[4].append((tl.grant[i], tl.end[i] - tl.grant[i], c))
    fig = Figure(figsize=(12, 3.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for k, bars in rows.items():
        if bars:
            ax.broken_barh([(s, d) for s, d, _ in bars], (len(LANES) - 1 - k - 0.4, 0.8),
                           facecolors=[c for _, _, c in bars], edgecolor="none")
    ax.set_yticks(range(len(LANES)), list(reversed(LANES)))
    ax.set_xlabel(f"cycle ({cfg.name} @ {cfg.clock_mhz} MHz; {tl.cycles} cycles total)")
    ax.set_xlim(0, max(1, tl.cycles))
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(handles, list(colours), loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=len(colours), fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100, format="png")  # the path as given (no ".png" appended)
    return path
