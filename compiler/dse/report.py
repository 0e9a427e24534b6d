"""Reports of a sweep: a rich table of the points and a matplotlib plot of latency against utilization."""
from __future__ import annotations

from pathlib import Path

from compiler.dse.sweep import RESOURCES, DseResult


def table(result: DseResult, limit: int | None = None):
    """A :class:`rich.table.Table`: every evaluated point, fastest first, front points marked; a timed point's
    latency is at min(clock, Fmax), and an Fmax below the point's clock is marked "(misses)"."""
    from rich.table import Table

    front = {r["index"] for r in result.front}
    keys = list(result.rows[0]["params"]) if result.rows else []
    t = Table(title=f"design space: {result.stats.get('points_evaluated')} points evaluated, "
                    f"{result.stats.get('points_pruned_invalid')} pruned, {len(front)} on the front")
    for k in ["#", *keys, "latency ms", "Fmax MHz", *RESOURCES, "util", "fits", "synthesis"]:
        t.add_column(k, justify="right" if k not in ("synthesis",) else "left")
    rows = sorted(result.rows, key=lambda r: (r["latency_ms"] is None, r["latency_ms"] or 0))
    for r in rows[:limit]:
        res = r.get("resources") or {}
        mark = "*" if r["index"] in front else ""
        lat = "error" if r["latency_ms"] is None else f"{r['latency_ms']:.3f}"
        util = f"{r['utilization']:.0%}" if r.get("utilization") is not None else (
            f"~{r['estimate_utilization']:.0%}" if r.get("estimate_utilization") is not None else "")
        fmax = "" if r.get("fmax_mhz") is None else f"{r['fmax_mhz']:g}" + ("" if r["meets"] else " (misses)")
        t.add_row(f"{mark}{r['index']}", *[str(r["params"][k]) for k in keys], lat, fmax,
                  *[str(res.get(k, "")) for k in RESOURCES], util,
                  "" if r.get("fits") is None else ("yes" if r["fits"] else "no"), str(r.get("synth", "")))
    return t


def plot(result: DseResult, path: str | Path, title: str = "design space") -> Path:
    """PNG: every point's latency against its utilization of the device (synthesized: filled, estimate only:
    hollow), the Pareto front as a line, and the capacity line at 100%."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    est = [r for r in result.rows if r.get("utilization") is None and r.get("estimate_utilization") is not None
           and r["latency_ms"] is not None]
    syn = [r for r in result.rows if r.get("utilization") is not None]
    if est:
        ax.scatter([100 * r["estimate_utilization"] for r in est], [r["latency_ms"] for r in est],
                   facecolors="none", edgecolors="gray", label="estimate (not synthesized)")
    if syn:
        ax.scatter([100 * r["utilization"] for r in syn], [r["latency_ms"] for r in syn], color="tab:blue",
                   label="synthesized (yosys)")
    if result.front:
        fr = sorted(result.front, key=lambda r: r["utilization"])
        ax.plot([100 * r["utilization"] for r in fr], [r["latency_ms"] for r in fr], "o-", color="tab:red",
                label="Pareto front")
    ax.axvline(100, color="k", linestyle="--", label=f"capacity ({result.stats.get('device', 'device')})")
    ax.set_xlabel("utilization of the device: max(LUT, DSP, RAMB36) %")
    ax.set_ylabel("model latency (ms)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
