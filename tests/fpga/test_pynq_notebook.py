"""The example notebook (examples/pynq_vta.ipynb: build the digits CNN for the board, load the overlay, run it,
compare with the simulator) executed headless with nbclient against the RTL shim, so the example cannot rot."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "pynq_vta.ipynb"
pytestmark = pytest.mark.xdist_group("pynq-shim")


def test_example_notebook_runs_against_the_shim(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.delenv("VTA_BITSTREAM", raising=False)
    monkeypatch.setenv("VTA_CONFIG", "tiny")  # the board default (pynq-z1) works too; tiny keeps it seconds
    monkeypatch.setenv("VTA_IMAGES", "2")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "RTL shim" in text and "outputs identical to the simulator's: True" in text
    assert "accuracy" in text
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
