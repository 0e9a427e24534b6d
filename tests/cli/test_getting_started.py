"""docs/getting-started.md runs as written: every ``sh`` and ``python`` block, in order, in an empty folder."""
from __future__ import annotations

import logging
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

from vta.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
logging.getLogger().setLevel(logging.ERROR)


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return re.findall(r"^```(\w+)\n(.*?)^```", text, flags=re.S | re.M)


def test_getting_started_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = {"sh": 0, "python": 0}
    for lang, body in blocks(DOC.read_text()):
        if lang == "python":
            exec(compile(body, f"{DOC.name} python block", "exec"), {})
            ran["python"] += 1
        elif lang == "sh":
            for line in body.strip().splitlines():
                argv = shlex.split(line)
                if argv[0] == "vta":
                    assert main(argv[1:]) == 0, (line, capsys.readouterr())
                else:
                    assert argv[0] == "python", line
                    subprocess.run([sys.executable] + argv[1:], check=True, cwd=tmp_path)
                ran["sh"] += 1
    assert ran["sh"] >= 8 and ran["python"] == 1
    # what the walk-through promises: the exported module's outputs equal the ONNX run's, bit for bit
    a, b = np.load(tmp_path / "out.npz"), np.load(tmp_path / "exported.npz")
    assert a.files == b.files == ["logits"]
    np.testing.assert_array_equal(a["logits"], b["logits"])
    assert a["logits"].shape == (8, 10)
