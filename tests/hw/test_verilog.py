"""``vta hw verilog`` writes Verilog that passes ``verilator --lint-only`` with no errors."""
from __future__ import annotations

import os
import subprocess

from hw.cosim.runner import verilator_bin
from vta.cli import main

#: Warnings Amaranth's Verilog is allowed to trip (demoted with -Wno-fatal).
ALLOWED = {"WIDTHEXPAND", "WIDTHTRUNC", "UNUSEDSIGNAL", "CASEINCOMPLETE", "PROCASSINIT", "DECLFILENAME",
           "UNDRIVEN", "UNOPTFLAT", "CMPCONST", "UNUSEDPARAM", "SYNCASYNCNET"}


def test_verilog_cli_and_lint(tmp_path):
    assert main(["hw", "verilog", "--config", "tiny", "-o", str(tmp_path)]) == 0
    v = tmp_path / "vta_top.v"
    assert "module vta_top" in v.read_text()
    env = dict(os.environ, PATH=str(verilator_bin()) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", "-Wno-fatal", str(v)], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "%Error" not in proc.stderr
    kinds = {line.split(":")[0].split("-", 1)[1] for line in proc.stderr.splitlines() if line.startswith("%Warning-")}
    assert kinds <= ALLOWED, kinds - ALLOWED
