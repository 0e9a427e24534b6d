"""The slim runtime: a clean venv of the oldest Python here with only the base install (numpy) loads and runs a
module exported by the full stack, bit-exact with the simulator, through the Python API and through `vta run`.

The venv (numpy, setuptools, wheel) is cached in build/runtime-venv/; each run reinstalls the package from a copy of
the sources without the network (--no-index --no-deps). PYNQ 3.x images ship Python 3.10: that is the oldest
version the runtime declares (requires-python) and the one used here when present.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.executor import build
from compiler.zoo.builder import OnnxBuilder

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("isa", "simulator", "jit_runtime", "compiler", "hw", "fpga", "vta")
HEAVY = ("compiler", "onnx", "onnxruntime", "amaranth", "llvmlite", "rich", "tqdm", "matplotlib", "sklearn", "cocotb")
pytestmark = pytest.mark.xdist_group("runtime-venv")


def oldest_python() -> str:
    """The oldest CPython >= 3.10 on this machine (PATH or pyenv), else this interpreter."""
    cands = [shutil.which(f"python3.{m}") for m in (10, 11)]
    cands += sorted(str(p) for p in Path("/root/.pyenv/versions").glob("3.1[01].*/bin/python"))
    found = []
    for c in filter(None, cands):
        try:
            v = subprocess.run([c, "-c", "import sys; print(sys.version_info[:2] >= (3, 10), *sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=30).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if v and v[0] == "True":
            found.append(((int(v[1]), int(v[2])), c))
    return min(found)[1] if found else sys.executable


def runtime_venv() -> Path:
    """build/runtime-venv/<python>: a venv with numpy, setuptools and wheel only (cached)."""
    py = oldest_python()
    ver = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                         text=True, check=True).stdout.strip()
    venv = ROOT / "build" / "runtime-venv" / f"py{ver}"
    stamp = venv / ".ready"
    if not stamp.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([py, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "numpy>=1.26",
                        "setuptools>=68", "wheel"], check=True)
        stamp.write_text(ver)
    return venv


def install_runtime(venv: Path, tmp: Path) -> None:
    """Install vta-stack (base install: numpy only) from a copy of the sources, offline."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--no-build-isolation", "--force-reinstall", str(src)], check=True, cwd=tmp)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], check=True, cwd=tmp)


def _model():
    b = OnnxBuilder(11)
    y = b.conv_bn("input", 3, 16, 3)
    y = b.op("Relu", [b.op("Add", [y, b.conv_bn(y, 16, 16, 3, act=None, gamma_scale=0.5)])])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [b.conv_bn(y, 16, 16, 3, stride=2)])])
    return b.model("runtime_install", "input", (2, 3, 8, 8), b.gemm(y, 16, 10))


SCRIPT = """
import json, sys
import numpy as np
import jit_runtime
m = jit_runtime.load_module(sys.argv[1])
out = m.run({"input": np.load(sys.argv[2])})[0]
np.save(sys.argv[3], out)
heavy = sorted({k.split(".")[0] for k in sys.modules} & set(sys.argv[4].split(",")))
print(json.dumps({"python": list(sys.version_info[:3]), "numpy": np.__version__, "heavy": heavy,
                  "cycles": [r["cycles"] for r in m.profile() if r["target"] == "accel"]}))
"""


def test_exported_module_runs_with_only_the_runtime_installed(tmp_path):
    venv = runtime_venv()
    install_runtime(venv, tmp_path)
    rng = np.random.default_rng(3)
    mod = build(_model(), "tiny", target="sim", calibration=rng.standard_normal((4, 3, 8, 8)).astype(np.float32),
                progress=False)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = mod(input=x)
    cycles = [r["cycles"] for r in mod.profile() if r["target"] == "accel"]
    path = mod.export(tmp_path / "m.vtamod")
    np.save(tmp_path / "x.npy", x)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    py = str(venv / "bin" / "python")
    # nothing heavy is importable in the venv: it really is the runtime alone
    probe = subprocess.run([py, "-c", "import importlib.util as u; print([m for m in ('onnx', 'amaranth', 'llvmlite', "
                            "'rich', 'tqdm', 'onnxruntime') if u.find_spec(m)])"], capture_output=True, text=True,
                           cwd=tmp_path, env=env, check=True)
    assert probe.stdout.strip() == "[]"
    res = subprocess.run([py, "-c", SCRIPT, str(path), str(tmp_path / "x.npy"), str(tmp_path / "y.npy"),
                          ",".join(HEAVY)], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"runtime venv: Python {'.'.join(map(str, info['python']))}, numpy {info['numpy']}")
    assert info["heavy"] == []
    assert info["cycles"] == cycles
    got = np.load(tmp_path / "y.npy")
    np.testing.assert_array_equal(got, want)
    # the command line on the same install: plain-text profile (no rich), outputs saved, JSON last line
    cli = subprocess.run([str(venv / "bin" / "vta"), "run", str(path), "--input", str(tmp_path / "x.npy"), "--outputs",
                          str(tmp_path / "o.npz"), "--json"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert cli.returncode == 0, cli.stderr
    last = json.loads(cli.stdout.strip().splitlines()[-1])
    assert last["exported"] and last["summary"]["accel_cycles"] == sum(cycles)
    assert "total" in cli.stdout and "accel:sim" in cli.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["logits" if "logits" in mod.output_names
                                                                 else mod.output_names[0]], want)
