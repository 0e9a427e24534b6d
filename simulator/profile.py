"""Profile of a run: per-unit busy/stall cycles, bytes per memory type, op counts, utilization."""
from __future__ import annotations

from typing import Any

from isa.config import HwConfig
from isa.intrinsics import intrinsics
from isa.instructions import Alu, Gemm, Load, MemType, Store, n_iterations
from isa.timing import pad_elements
from simulator.program import INSN_BYTES, UNITS, InsnInfo
from simulator.timing_engine import Timeline


def counters(cfg: HwConfig, infos: list[InsnInfo]) -> dict[str, Any]:
    """Bytes moved and operations done; independent of timing."""
    nbytes = {m: 0 for m in ("inp", "wgt", "acc", "uop", "out")}
    nbytes["insn"] = INSN_BYTES * len(infos)
    gemm_uops = alu_uops = macs = pads = 0
    per_uop = {n: i.macs_per_uop for n, i in intrinsics(cfg).items() if i.decl is not None}
    for info in infos:
        insn = info.insn
        if isinstance(insn, (Load, Store)):
            mem = MemType(insn.mem).name.lower()
            nbytes[mem] += insn.y_size * insn.x_size * cfg.elem_bytes(mem)
            if isinstance(insn, Load) and not info.nop:
                pads += pad_elements(insn)
        elif isinstance(insn, Gemm):
            k = n_iterations(insn)
            gemm_uops += k
            if not insn.reset:
                macs += k * per_uop[insn.intrinsic]  # the declaration's MACs per micro-op
        elif isinstance(insn, Alu):
            alu_uops += n_iterations(insn)
    return {"bytes": nbytes, "pad_elements": pads, "gemm_uops": gemm_uops, "alu_uops": alu_uops, "macs": macs}


def build_profile(cfg: HwConfig, infos: list[InsnInfo], tl: Timeline | None) -> dict[str, Any]:
    """The JSON-serializable profile of a run (``tl`` is None in functional mode: all cycle figures 0)."""
    cnt = counters(cfg, infos)
    cycles = tl.cycles if tl else 0
    units = {u: {"busy": 0, "stall_token": 0, "stall_port": 0, "stall_queue": 0, "insns": 0, "idle": 0}
             for u in ("fetch",) + UNITS}
    port_busy = port_tx = 0
    if tl:
        for i, info in enumerate(infos):
            st = units[UNITS[info.unit]]
            st["insns"] += 1
            st["stall_token"] += tl.start[i] - tl.take[i]
            if info.port:
                st["stall_port"] += tl.grant[i] - tl.start[i]
                st["busy"] += tl.end[i] - tl.grant[i]
                port_busy += tl.end[i] - tl.grant[i]
                port_tx += 1
            else:
                st["busy"] += tl.end[i] - tl.start[i]
        f = units["fetch"]
        for _first, count, req, grant, end in tl.bursts:
            f["insns"] += count
            f["busy"] += end - grant
            f["stall_port"] += grant - req
            port_busy += end - grant
            port_tx += 1
        f["stall_queue"] = tl.fetch_stall_queue
        for st in units.values():
            st["idle"] = cycles - st["busy"] - st["stall_token"] - st["stall_port"] - st["stall_queue"]
    else:
        for info in infos:
            units[UNITS[info.unit]]["insns"] += 1
        units["fetch"]["insns"] = len(infos)
    peak = cfg.macs_per_cycle
    return {
        "config": cfg.name,
        "clock_mhz": cfg.clock_mhz,
        "timing": tl is not None,
        "cycles": cycles,
        "instructions": len(infos),
        "units": units,
        "dram_port": {"busy": port_busy, "transactions": port_tx,
                      "utilization": port_busy / cycles if cycles else 0.0},
        **cnt,
        "peak_macs_per_cycle": peak,
        "macs_per_cycle": cnt["macs"] / cycles if cycles else 0.0,
        "utilization": cnt["macs"] / (peak * cycles) if cycles else 0.0,
        "time_us": cycles / cfg.clock_mhz,
    }
