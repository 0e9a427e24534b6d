"""The ``rtl`` runtime device: ``vta sim --device rtl FILE`` on a saved program (tiny)."""
from __future__ import annotations

import json

import pytest

from isa import make_config


@pytest.mark.slow
def test_vta_sim_device_rtl(tmp_path, capsys):
    from jit_runtime.suite import suite_cases
    from vta.cli import main

    cfg = make_config("tiny")
    prog, _ = suite_cases(cfg)["relu"]()
    path = prog.save(tmp_path / "relu.vtaprog")
    sim_cycles = prog.run("sim").cycles
    assert main(["sim", "--device", "rtl", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["cycles"] == sim_cycles


def test_rtl_device_registers_lazily(monkeypatch):
    """``make_device("rtl")`` / ``Program.run("rtl")`` need no manual ``import hw.register_devices``."""
    import sys

    from hw.device import RtlDevice
    from jit_runtime import device as devmod

    monkeypatch.delitem(devmod._REGISTRY, "rtl", raising=False)
    monkeypatch.delitem(sys.modules, "hw.register_devices", raising=False)
    assert "rtl" in devmod.device_names()  # listed before it is imported
    dev = devmod.make_device("rtl", make_config("tiny"))
    assert isinstance(dev, RtlDevice) and "rtl" in devmod._REGISTRY


@pytest.mark.slow
def test_program_run_rtl_without_import(monkeypatch):
    import sys

    from jit_runtime import device as devmod
    from jit_runtime.suite import suite_cases

    monkeypatch.delitem(devmod._REGISTRY, "rtl", raising=False)
    monkeypatch.delitem(sys.modules, "hw.register_devices", raising=False)
    prog, _ = suite_cases(make_config("tiny"))["relu"]()
    rtl, sim = prog.run("rtl"), prog.run("sim")
    assert rtl.cycles == sim.cycles
    assert not prog.mismatches(rtl.outputs)
