"""The ``rtl`` runtime device: ``vta sim --device rtl FILE`` on a saved program (tiny)."""
from __future__ import annotations

import json

import pytest

from isa import make_config


@pytest.mark.slow
def test_vta_sim_device_rtl(tmp_path, capsys):
    import jit_runtime.devices_rtl  # noqa: F401
    from jit_runtime.suite import suite_cases
    from vta.cli import main

    cfg = make_config("tiny")
    prog, _ = suite_cases(cfg)["relu"]()
    path = prog.save(tmp_path / "relu.vtaprog")
    sim_cycles = prog.run("sim").cycles
    assert main(["sim", "--device", "rtl", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["cycles"] == sim_cycles
