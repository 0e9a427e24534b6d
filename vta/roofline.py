"""The roofline of a run's accelerator layers (``vta run --roofline``).

The roof: the config's peak MACs per cycle (``macs_per_cycle``) and its DRAM port's bytes per cycle
(``bus_bytes``: one bus word per beat); a layer of arithmetic intensity I (real MACs per DRAM byte)
can do at most ``min(peak, I * bytes_per_cycle)`` MACs per cycle. Each accelerator layer is a point:
its intensity (the model's real MACs, no block padding, over the bytes its programs moved over the
DRAM port: instruction fetch, micro-ops, loads and stores, as the cycle model counts them) and what it
attained (real MACs / cycles).
"""
from __future__ import annotations

from typing import Any


def roofline_points(rows: list[dict], cfg: Any) -> dict:
    """The roof of ``cfg`` and one point per accelerator row that has cycles and DRAM bytes."""
    peak, bw = float(cfg.macs_per_cycle), float(cfg.bus_bytes)
    layers = []
    for r in rows:
        if r.get("target") != "accel" or not r.get("cycles") or not r.get("dram_bytes"):
            continue
        intensity = r["real_macs"] / r["dram_bytes"]
        roof = min(peak, intensity * bw)
        layers.append({"name": r["name"], "op": r["op"], "real_macs": int(r["real_macs"]),
                       "dram_bytes": int(r["dram_bytes"]), "cycles": int(r["cycles"]), "intensity": intensity,
                       "macs_per_cycle": r["real_macs"] / r["cycles"], "roof": roof,
                       "bound": "memory" if intensity * bw < peak else "compute"})
    return {"peak_macs_per_cycle": peak, "dram_bytes_per_cycle": bw, "ridge_intensity": peak / bw, "layers": layers}


def plot_roofline(path: str, roof: dict, title: str) -> None:
    """Draw ``roof`` (from :func:`roofline_points`) on log-log axes and write it to ``path`` as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    peak, bw, ridge = roof["peak_macs_per_cycle"], roof["dram_bytes_per_cycle"], roof["ridge_intensity"]
    pts = roof["layers"]
    xs = [p["intensity"] for p in pts] + [ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    x = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.plot(x, np.minimum(peak, x * bw), color="black", label=f"roof: {peak:g} MACs/cycle, {bw:g} DRAM bytes/cycle")
    ax.axvline(ridge, color="grey", linestyle=":", linewidth=1)
    labelled: set = set()
    for k, p in enumerate(pts):
        label = None if p["bound"] in labelled else f"{p['bound']}-bound layer"
        labelled.add(p["bound"])
        ax.scatter(p["intensity"], p["macs_per_cycle"], color="tab:blue" if p["bound"] == "memory" else "tab:red",
                   zorder=3, label=label)
        ax.annotate(f"{k}: {p['name']}", (p["intensity"], p["macs_per_cycle"]), fontsize=6,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (real MACs / DRAM byte)")
    ax.set_ylabel("attained MACs / cycle")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
