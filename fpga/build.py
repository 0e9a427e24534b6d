"""Board builds of the self-test system (:mod:`fpga.soc`).

- ``ulx3s``: the ULX3S 85F (LFE5U-85F) open flow with YoWASP yosys / nextpnr-ecp5 / ecppack
  (:func:`fpga.timing.run_ecp5_flow`): a bitstream that meets the 25 MHz board clock, or
  :class:`fpga.timing.PlaceRouteError` naming nextpnr's Fmax and critical path.
- ``pynq-z1``: a Vivado build plan (``top.tcl``/``top.xdc``/``top.v`` + build script) for the xc7z020-clg400-1
  on the Arty Z7-20 platform (the same part as PYNQ-Z1/Z2; no PYNQ board file ships with amaranth-boards).
  No Xilinx place-and-route exists on the package registries, so the plan is written, not run.
"""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from fpga.timing import open_flow_env, parse_fmax  # noqa: F401  (re-exported: the flow environment and the nextpnr log parsers live in fpga.timing)
from isa import make_config
from isa.config import HwConfig

BOARDS = {"ulx3s": "ecp5-85f", "pynq-z1": "pynq-z1"}  # board -> default config


def parse_utilisation(text: str) -> dict[str, str]:
    """nextpnr's ``Device utilisation`` block: ``{cell: "used/available"}``."""
    out = {}
    block = text[text.rfind("Device utilisation"):] if "Device utilisation" in text else ""
    for m in re.finditer(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)", block, re.M):
        out.setdefault(m.group(1), f"{m.group(2)}/{m.group(3)}")
    return out


ULX3S_PART = "LFE5U-85F-6BG381C"
#: what ``vta hw timing`` leaves in its run directory that a board build reports
_FLOW_FILES = ("top.bit", "top.svf", "top.tim", "top.rpt", "top.lpf", "top.ys", "top.il", "build_top.sh")


def _timing_run_for(cfg: HwConfig, case: str, out: Path) -> dict | None:
    """The board build of ``cfg``'s default self-test IS the system ``vta hw timing`` places and routes for a config
    on the ULX3S's part (:func:`fpga.timing.timing_record`, same design, clock constrained to max(config clock,
    25 MHz)): reuse that run (cached by design hash, run now if absent) and copy its files into ``out``. A miss of
    the 25 MHz board clock raises :class:`fpga.timing.PlaceRouteError`. None for any other program or part."""
    from fpga.timing import ULX3S_CLOCK_MHZ, PlaceRouteError, place_route_message, timing_record

    if case != "relu" or cfg.fpga_part.strip().lower() != ULX3S_PART.lower():
        return None
    rec = timing_record(cfg)
    src = Path(rec["dir"])
    if not (src / "top.bit").exists():  # a cached record whose run directory was cleaned: place and route again
        rec = timing_record(cfg, use_cache=False)
        src = Path(rec["dir"])
    for name in _FLOW_FILES:
        if (src / name).exists():
            shutil.copy(src / name, out / name)
    rec = dict(rec, placed_by=f"vta hw timing's run ({src}, clock constrained to {rec['target_mhz']:g} MHz)")
    if not (rec["fmax_mhz"] or 0) >= ULX3S_CLOCK_MHZ:
        raise PlaceRouteError(place_route_message(rec, ULX3S_CLOCK_MHZ, out), rec)
    return rec


def build_board(board: str, out_dir: str | Path, cfg: HwConfig | None = None, case: str = "relu") -> dict:
    """Build (ulx3s) or plan (pynq-z1) the self-test system; returns a report dict (also ``report.json``)."""
    from fpga.soc import BoardTop, self_test_for

    if board not in BOARDS:
        raise ValueError(f"unknown board {board!r}; boards: {', '.join(BOARDS)}")
    cfg = cfg or make_config(BOARDS[board])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    test = self_test_for(cfg, case)
    t0 = time.time()
    rep: dict = {"board": board, "config": cfg.name, "program": case, "dir": str(out)}
    if board == "ulx3s":
        from fpga.timing import ULX3S_CLOCK_MHZ, run_ecp5_flow, ulx3s_platform

        plat = ulx3s_platform(ULX3S_PART)
        res = _timing_run_for(cfg, case, out)
        if res is None:
            # timing must be met at the board clock: a miss raises PlaceRouteError with nextpnr's Fmax and path
            res = run_ecp5_flow(BoardTop(cfg, test, button="button_fire"), plat, out, allow_fail=False)
        rep["placed_by"] = res.get("placed_by", "this build (nextpnr-ecp5, clock constrained to 25 MHz)")
        assert plat.default_clk_frequency / 1e6 == ULX3S_CLOCK_MHZ
        log = "\n".join(p.read_text(errors="replace") for p in sorted(out.glob("*.tim")) + sorted(out.glob("*.log"))
                        if p.is_file())
        bit = out / "top.bit"
        rep.update(bitstream=str(bit), bitstream_bytes=bit.stat().st_size if bit.exists() else 0,
                   fmax_mhz=res["fmax_by_clock_mhz"], utilisation=parse_utilisation(log),
                   clock_mhz=plat.default_clk_frequency / 1e6, critical_path=res["critical_path"],
                   meets=res["fmax_mhz"] is not None and res["fmax_mhz"] >= plat.default_clk_frequency / 1e6)
    else:
        from amaranth_boards.arty_z7 import ArtyZ720Platform

        plat = ArtyZ720Platform(toolchain="Vivado")
        plan = plat.build(BoardTop(cfg, test, button="button"), name="top", do_build=False)
        plan.extract(str(out))
        rep.update(files=sorted(p.name for p in out.iterdir() if p.is_file()), part="xc7z020clg400-1",
                   clock_mhz=plat.default_clk_frequency / 1e6,
                   note="Vivado build plan (not run): `sh build_top.sh` in this directory with Vivado on PATH")
    rep["seconds"] = round(time.time() - t0, 1)
    (out / "report.json").write_text(json.dumps(rep, indent=1))
    return rep
