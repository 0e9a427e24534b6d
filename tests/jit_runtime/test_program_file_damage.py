"""Every way a .vtaprog can be damaged raises ProgramFileError naming what is wrong; the file is left untouched."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from isa import make_config
from jit_runtime import ProgramFileError, load_program, suite


@pytest.fixture(scope="module")
def good_bytes(tmp_path_factory) -> bytes:
    program, _ = suite.relu(make_config("tiny"))
    return program.save(tmp_path_factory.mktemp("p") / "relu.vtaprog").read_bytes()


def _members(raw: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _pack(arrays: dict, header: dict | list | None = None) -> bytes:
    arrays = dict(arrays)
    if header is not None:
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _header(raw: bytes) -> dict:
    return json.loads(_members(raw)["header"].tobytes().decode())


def _expect(tmp_path, raw: bytes, *words: str) -> None:
    path = tmp_path / "damaged.vtaprog"
    path.write_bytes(raw)
    with pytest.raises(ProgramFileError) as ei:
        load_program(path)
    assert ei.type is ProgramFileError
    for w in words:
        assert w in str(ei.value), (w, str(ei.value))
    assert path.read_bytes() == raw  # the input file is untouched


def test_good_file_loads(tmp_path, good_bytes):
    path = tmp_path / "ok.vtaprog"
    path.write_bytes(good_bytes)
    assert load_program(path).n_insns > 1


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated(tmp_path, good_bytes, keep):
    _expect(tmp_path, good_bytes[:int(len(good_bytes) * keep)], "damaged.vtaprog")


def test_corrupt_compression(tmp_path, good_bytes):
    zf = zipfile.ZipFile(io.BytesIO(good_bytes))
    info = zf.getinfo("dram.npy")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw = bytearray(good_bytes)
    for k in range(start + 2, start + min(info.compress_size, 40)):
        raw[k] ^= 0x5A  # deflate stream garbage: zlib.error or a CRC mismatch inside zipfile
    _expect(tmp_path, bytes(raw), "not a readable vta program file")


def test_unsupported_compression_method(tmp_path, good_bytes):
    raw = bytearray(good_bytes)
    pos = good_bytes.index(b"PK\x01\x02")
    while good_bytes[pos + 46:pos + 46 + len(b"insns.npy")] != b"insns.npy":  # central directory entry
        pos = good_bytes.index(b"PK\x01\x02", pos + 4)
    raw[pos + 10] = 99  # compression method 99: zipfile raises NotImplementedError
    _expect(tmp_path, bytes(raw), "not a readable vta program file")


@pytest.mark.parametrize("member", ["insns", "dram", "header"])
def test_member_with_wrong_dtype(tmp_path, good_bytes, member):
    arrays = _members(good_bytes)
    arrays[member] = arrays[member].astype(np.float32)
    _expect(tmp_path, _pack(arrays), repr(member), "uint8")


def test_member_with_wrong_shape(tmp_path, good_bytes):
    arrays = _members(good_bytes)
    arrays["dram"] = arrays["dram"].reshape(1, -1)
    _expect(tmp_path, _pack(arrays), "'dram'", "shape")


def test_header_that_is_a_list(tmp_path, good_bytes):
    _expect(tmp_path, _pack(_members(good_bytes), [1, 2, 3]), "header", "JSON object", "list")


def test_buffer_dtype_object(tmp_path, good_bytes):
    h = _header(good_bytes)
    h["buffers"]["y"]["dtype"] = "O"
    _expect(tmp_path, _pack(_members(good_bytes), h), "buffer 'y'", "'O'", "numeric")


@pytest.mark.parametrize("field,value,words", [
    ("n_insns", 3, ["instruction bytes"]),
    ("n_insns", -1, ["'n_insns'", ">= 1"]),
    ("insn_addr", "0", ["'insn_addr'", "integer"]),
    ("insn_addr", 8, ["insn_addr=8", "multiple of 16"]),
    ("dram_bytes", 5, ["5 DRAM bytes"]),
    ("config", None, ["'config'", "JSON object"]),
    ("buffers", [], ["'buffers'"]),
    ("expected", "y", ["'expected'"]),
    ("runtime", 3, ["'runtime'"]),
])
def test_inconsistent_header_fields(tmp_path, good_bytes, field, value, words):
    h = _header(good_bytes)
    h[field] = value
    _expect(tmp_path, _pack(_members(good_bytes), h), *words)


def test_buffer_outside_the_image(tmp_path, good_bytes):
    h = _header(good_bytes)
    h["buffers"]["y"]["addr"] = 1 << 30
    _expect(tmp_path, _pack(_members(good_bytes), h), "buffer 'y'", "outside the DRAM image")


def test_expected_output_of_the_wrong_shape(tmp_path, good_bytes):
    arrays = _members(good_bytes)
    arrays["expected.y"] = arrays["expected.y"].reshape(-1)
    _expect(tmp_path, _pack(arrays), "expected output 'y'")


def test_expected_output_without_its_array(tmp_path, good_bytes):
    arrays = _members(good_bytes)
    del arrays["expected.y"]
    _expect(tmp_path, _pack(arrays), "expected output 'y'", "no array")


def test_bad_config_field_type(tmp_path, good_bytes):
    h = _header(good_bytes)
    h["config"]["inp_width"] = 8.0
    _expect(tmp_path, _pack(_members(good_bytes), h), "bad config", "inp_width")


def test_single_npy_is_not_a_program(tmp_path):
    buf = io.BytesIO()
    np.save(buf, np.zeros(4, np.uint8))
    path = tmp_path / "x.vtaprog"
    path.write_bytes(buf.getvalue())
    with pytest.raises(ProgramFileError, match="not an .npz archive"):
        load_program(path)


def test_buffer_shape_that_overflows_int64(tmp_path, good_bytes):
    h = _header(good_bytes)
    h["buffers"]["y"]["shape"] = [1 << 62, 1 << 62]
    _expect(tmp_path, _pack(_members(good_bytes), h), "buffer 'y'", "outside the DRAM image")
