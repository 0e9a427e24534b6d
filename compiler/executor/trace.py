"""Chrome/Perfetto trace JSON of a module run's accelerator layers.

Accelerator layers run one after another; each is drawn on a ``layers`` lane. The source of the
timings, reported in the trace metadata and returned to the caller, is one of:

* ``"simulator events"``: the backend's profile carries a ``sim_result`` (a simulator
  ``SimResult``, or the runtime's ``RunResult`` wrapping one): per-instruction fetch/load/compute/store/DRAM lanes, shifted per layer;
* ``"simulator cycles"``: the backend reports per-layer cycle counts (and per-unit busy
  cycles under ``device.units``, shown as one bar per unit and layer);
* ``"wall-clock profile rows"``: no cycle counts (e.g. the numpy reference backend): layers are
  drawn with their measured host time.

Time unit: with cycles, one trace microsecond is one cycle (as in ``simulator.trace``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

UNIT_LANES = ("fetch", "load", "compute", "store")


def _meta(tid: int, name: str) -> list[dict]:
    return [{"ph": "M", "name": "thread_name", "pid": 0, "tid": tid, "args": {"name": name}},
            {"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": tid, "args": {"sort_index": tid}}]


def _sim_result(detail: dict):
    """The simulator ``SimResult`` of a layer (also unwrapped from a runtime ``RunResult``), if timed."""
    res = detail.get("sim_result")
    res = getattr(res, "device_result", None) or res
    ok = all(getattr(res, a, None) is not None for a in ("cfg", "infos", "timeline"))
    return res if ok else None


def _sim_events(detail: dict, offset: int, tid_base: int) -> list[dict]:
    from simulator.trace import trace_events  # only reached when the sim backend provides results

    res = _sim_result(detail)
    out = []
    for e in trace_events(res.cfg, res.infos, res.timeline):
        if e.get("ph") != "X":
            continue
        e = dict(e, ts=e["ts"] + offset, tid=tid_base + e["tid"])
        out.append(e)
    return out


def accel_trace(rows: list[dict], details: list[dict], clock_mhz: float, title: str = "model") -> tuple[dict, str]:
    """Build the trace dict from ``Module.profile()`` rows and the raw backend profiles of accel rows."""
    acc = [r for r in rows if r["target"] == "accel"]
    if len(details) != len(acc):
        details = [{} for _ in acc]
    with_cycles = bool(acc) and all(r["cycles"] for r in acc)
    with_events = with_cycles and all(_sim_result(d) is not None for d in details)
    source = "simulator events" if with_events else "simulator cycles" if with_cycles else "wall-clock profile rows"
    unit = "1 trace microsecond = 1 cycle" if with_cycles else "1 trace microsecond = 1 host microsecond"
    ev: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0,
                                 "args": {"name": f"{title}: accelerator layers @ {clock_mhz} MHz ({source})"}}]
    ev += _meta(0, "layers")
    lanes = ("fetch", "load", "compute", "store", "dram port") if with_events else UNIT_LANES
    for k, lane in enumerate(lanes):
        ev += _meta(1 + k, lane)
    t = 0
    for r, d in zip(acc, details):
        dur = int(r["cycles"]) if with_cycles else max(1, int(round(r["time_ms"] * 1e3)))
        args = {k: r[k] for k in ("op", "cycles", "utilization", "macs", "bytes", "time_ms")}
        ev.append({"ph": "X", "name": r["name"], "cat": r["op"], "pid": 0, "tid": 0, "ts": t, "dur": dur, "args": args})
        if with_events:
            ev += _sim_events(d, t, 1)
        else:
            units = (d.get("device") or {}).get("units", {}) if isinstance(d.get("device"), dict) else {}
            for k, lane in enumerate(UNIT_LANES):
                busy = int((units.get(lane) or {}).get("busy", 0))
                if busy:
                    ev.append({"ph": "X", "name": f"{r['name']} {lane} busy", "cat": lane, "pid": 0, "tid": 1 + k,
                               "ts": t, "dur": busy, "args": dict(units[lane])})
        t += dur
    meta = {"source": source, "time_unit": unit, "clock_mhz": clock_mhz, "accel_layers": len(acc),
            "total": t, "latency_ms": t / (clock_mhz * 1e3) if with_cycles else t / 1e3}
    return {"traceEvents": ev, "displayTimeUnit": "ms", "metadata": meta}, source


def write_accel_trace(path: str | Path, rows: list[dict], details: list[dict], clock_mhz: float,
                      title: str = "model") -> str:
    """Write the trace JSON to ``path``; returns the timing source (see the module docstring)."""
    data, source = accel_trace(rows, details, clock_mhz, title)
    Path(path).write_text(json.dumps(data, default=float))
    return source
