"""The Xilinx estimate's routing factor, measured on ECP5 (fpga.ecp5_sta; docs/fpga.md "Routing factor").

For every routed ECP5 flow directory (default: each ``build/timing/*/`` whose nextpnr log says routing completed):
nextpnr's post-route period (1000 / Fmax) over the logic-only yosys ``sta`` path of the very netlist nextpnr
placed (the Xilinx estimate's method, on ECP5 cell delays). Also the routed critical path's own routed/logic split
(``path_factor``), which overstates the factor (the routed critical path is the one with the most routing).
The last output line is one JSON object:

    {"designs": [{dir, fmax_mhz, routed_ns, logic_only_ns, factor, path_factor, ...}],
     "factor": {"min", "max", "mean"}, "path_factor": {...}, "in_use": ROUTING_FACTOR}

    python benchmarks/calibrate_routing.py [DIR ...]

Each sta reads a netlist nextpnr already has (seconds to a minute per design; no synthesis, no place and route).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def routed_dirs(root: Path) -> list[Path]:
    """Flow directories under ``root`` with a netlist and a completed nextpnr route."""
    return sorted(d for d in root.iterdir() if (d / "top.json").exists() and (d / "top.tim").exists()
                  and "Routing complete" in (d / "top.tim").read_text(errors="replace"))


def summary(values: list[float]) -> dict:
    return {"min": min(values), "max": max(values), "mean": round(statistics.fmean(values), 3)} if values else {}


def main(argv: list[str] | None = None) -> int:
    from fpga.ecp5_sta import routing_factor
    from fpga.timing import CACHE, ROUTING_FACTOR

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="ECP5 flow directories (default: the routed ones in build/timing)")
    args = ap.parse_args(argv)
    dirs = args.dirs or (routed_dirs(CACHE) if CACHE.exists() else [])
    if not dirs:
        print("no routed ECP5 flow directory: run `vta hw timing --config tiny` first", file=sys.stderr)
        return 2
    rows = []
    for d in dirs:
        rec = routing_factor(d)
        rows.append(rec)
        print(f"{Path(d).name}: routed {rec['routed_ns']} ns ({rec['fmax_mhz']} MHz), logic-only {rec['logic_only_ns']} "
              f"ns -> factor {rec['factor']} (routed path's own split {rec['path_factor']})", flush=True)
    print(json.dumps({"designs": rows, "factor": summary([r["factor"] for r in rows]),
                      "path_factor": summary([r["path_factor"] for r in rows if r["path_factor"]]),
                      "in_use": ROUTING_FACTOR}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
