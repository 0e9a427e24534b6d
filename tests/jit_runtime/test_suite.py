"""The instruction-level suite on the simulator, bit-exact against numpy (pynq-z1 and tiny)."""
import numpy as np
import pytest

from isa import alu_ops, make_config
from jit_runtime import suite

CONFIGS = {name: make_config(name) for name in ("pynq-z1", "tiny")}
CASES = [(cfg_name, case) for cfg_name, cfg in CONFIGS.items() for case in suite.suite_cases(cfg)]


@pytest.mark.parametrize("cfg_name,case", CASES, ids=[f"{c}-{n}" for c, n in CASES])
def test_case_is_bit_exact_on_the_simulator(cfg_name, case):
    program, expected = suite.suite_cases(CONFIGS[cfg_name])[case]()
    assert expected and set(expected) == set(program.expected)
    assert any(np.any(v != 0) for v in expected.values()), "a reference that is all zeros proves little"
    result = program.run("sim")
    assert result.cycles > 0
    for name, want in expected.items():
        got = result.outputs[name]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"{case}: buffer {name}")


def test_every_registered_alu_op_has_imm_and_tensor_cases():
    for cfg in CONFIGS.values():
        names = set(suite.suite_cases(cfg))
        for op in alu_ops(cfg):
            want = {f"alu_{op.name.lower()}"} if op.operand == "wgt" else \
                {f"alu_{op.name.lower()}_imm", f"alu_{op.name.lower()}_tensor"}
            assert want <= names
    assert "alu_requant" in suite.suite_cases(CONFIGS["pynq-z1"])


def test_a_wrong_reference_is_detected():
    program, expected = suite.relu(CONFIGS["tiny"])
    outputs = program.run("sim").outputs
    assert program.mismatches(outputs) == []
    outputs["y"] = outputs["y"].copy()
    outputs["y"].reshape(-1)[3] += 1
    assert program.mismatches(outputs) == ["y"]


def test_padded_load_places_zeros_where_the_pads_are():
    program, expected = suite.padded_load(CONFIGS["pynq-z1"], "x_pad0")
    y = program.run("sim").outputs["y"]
    assert not y[:, :2].any() and y[:, 2:].any()


def test_functional_simulator_gives_the_same_outputs():
    program, expected = suite.gemm(CONFIGS["tiny"], virtual_threads=2)
    res = program.run("sim-functional")
    np.testing.assert_array_equal(res.outputs["c"], expected["c"])


def test_pad_value_fills_every_lane_of_the_pads():
    cfg = CONFIGS["tiny"]
    y = suite.padded_load_inp(cfg, pad_value=-7)[0].run("sim").outputs["y"].reshape(4, 5, cfg.batch, cfg.block_out)
    y0 = suite.padded_load_inp(cfg)[0].run("sim").outputs["y"].reshape(y.shape)
    # every pad pixel is -7 in every lane, so all border outputs are the same (non-zero) row; with 0 they are 0
    border = np.concatenate([y[0], y[-1], y[:, 0], y[:, -1]]).reshape(-1, cfg.block_out)
    assert np.all(border == border[0]) and border[0].any()
    assert not np.concatenate([y0[0], y0[-1], y0[:, 0], y0[:, -1]]).any()
    np.testing.assert_array_equal(y[1:-1, 1:-1], y0[1:-1, 1:-1])


def test_load_2d_pad_value_errors():
    from jit_runtime import RuntimeApiError
    from jit_runtime.command_queue import CommandQueue

    cfg = CONFIGS["tiny"]
    q = CommandQueue(cfg)
    xb = q.alloc((4, cfg.batch, cfg.block_in), np.int8, name="x")
    wb = q.alloc((4, cfg.block_out, cfg.block_in), np.int8, name="w")
    with pytest.raises(RuntimeApiError, match="pad_value=3 is only allowed for mem='inp'"):
        q.load_2d("wgt", 0, wb, 0, x_size=1, y_size=1, x_stride=1, x_pad0=1, pad_value=3)
    with pytest.raises(RuntimeApiError, match=r"pad_value=200 does not fit the 8-bit signed pad_value field \(allowed -128..127\)"):
        q.load_2d("inp", 0, xb, 0, x_size=1, y_size=1, x_stride=1, x_pad0=1, pad_value=200)
    ld = q.load_2d("inp", 0, xb, 0, x_size=1, y_size=1, x_stride=1, x_pad0=1, pad_value=-128)
    assert ld.pad_value == -128
