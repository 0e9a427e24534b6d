import json

import numpy as np
import pytest

from isa import make_config
from jit_runtime import Program, ProgramFileError, load_program
from jit_runtime.blocked_gemm import blocked_gemm
from jit_runtime import suite

CFG = make_config("tiny")


def test_saved_program_replays_to_identical_results_and_cycles(tmp_path):
    program, expected = blocked_gemm(CFG, virtual_threads=2)
    path = program.save(tmp_path / "gemm.vtaprog")
    loaded = Program.load(path)
    assert loaded.cfg == program.cfg and loaded.n_insns == program.n_insns and loaded.insn_addr == program.insn_addr
    assert np.array_equal(loaded.insn_bytes, program.insn_bytes) and np.array_equal(loaded.dram, program.dram)
    assert loaded.buffers == program.buffers and loaded.runtime == program.runtime
    a, b = program.run("sim"), loaded.run("sim")
    assert a.cycles == b.cycles > 0
    assert a.profile == b.profile
    for name in program.buffers:
        np.testing.assert_array_equal(a.outputs[name], b.outputs[name])
    np.testing.assert_array_equal(b.outputs["c"], loaded.expected["c"])
    assert loaded.input("a").dtype == np.int8 and loaded.input("a").any()


def test_run_leaves_the_program_image_untouched():
    program, _ = suite.relu(CFG)
    before = program.dram.copy()
    first = program.run("sim")
    assert np.array_equal(program.dram, before)
    assert program.run("sim").cycles == first.cycles


def test_header_documents_the_format(tmp_path):
    program, _ = suite.relu(CFG)
    path = program.save(tmp_path / "relu.vtaprog")
    with np.load(path) as data:
        header = json.loads(bytes(data["header"]).decode())
        assert set(data.files) == {"header", "insns", "dram", "expected.y"}
    assert header["format"] == "vta-program" and header["version"] == 1
    assert header["config"]["name"] == "tiny" and header["n_insns"] == program.n_insns
    assert header["buffers"]["y"]["shape"] == [16, 1, 4]


def test_bad_files_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_program(tmp_path / "missing.vtaprog")
    text = tmp_path / "text.vtaprog"
    text.write_text("hello")
    with pytest.raises(ProgramFileError, match="not a vta program file"):
        load_program(text)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(ProgramFileError, match="no 'header'"):
        load_program(other)
    program, _ = suite.relu(CFG)
    path = program.save(tmp_path / "p.vtaprog")
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(bytes(arrays["header"]).decode())
    header["version"] = 99
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    np.savez(tmp_path / "v99.npz", **arrays)
    with pytest.raises(ProgramFileError, match="version 99"):
        load_program(tmp_path / "v99.npz")
    header["version"] = 1
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    arrays["insns"] = arrays["insns"].copy()
    arrays["insns"][0] ^= 1
    np.savez(tmp_path / "corrupt.npz", **arrays)
    with pytest.raises(ProgramFileError, match="corrupt"):
        load_program(tmp_path / "corrupt.npz")
