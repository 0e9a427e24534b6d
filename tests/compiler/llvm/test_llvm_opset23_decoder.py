"""An opset-23 decoder block (RMSNormalization, grouped-query Attention with a KV cache and RotaryEmbedding by
position ids, a SiLU-gated MLP) runs whole on llvm (the import rewrites; no host kernel) and equals
onnxruntime's outputs, the present KV cache included; calibrated to int8 it runs on the accelerator targets."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

B, S, PAST, HID, HEADS, KV_HEADS = 2, 5, 7, 64, 4, 2
D = HID // HEADS


def _decoder():
    rng = np.random.default_rng(0)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)
    inits = {"wq": w(HID, HID), "wk": w(HID, KV_HEADS * D), "wv": w(HID, KV_HEADS * D), "wo": w(HID, HID),
             "g1": 1 + w(HID), "g2": 1 + w(HID), "w1": w(HID, 128), "w3": w(HID, 128), "w2": w(128, HID)}
    angle = np.arange(64)[:, None] * (1.0 / 10000 ** (np.arange(0, D, 2) / D))[None]
    inits["cos"], inits["sin"] = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    n = h.make_node
    nodes = [n("RMSNormalization", ["x", "g1"], ["n1"], axis=-1, epsilon=1e-5),
             n("MatMul", ["n1", "wq"], ["q"]), n("MatMul", ["n1", "wk"], ["k"]), n("MatMul", ["n1", "wv"], ["v"]),
             n("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], num_heads=HEADS),
             n("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["kr"], num_heads=KV_HEADS),
             n("Attention", ["qr", "kr", "v", "", "past_k", "past_v"], ["att", "present_k", "present_v"],
               q_num_heads=HEADS, kv_num_heads=KV_HEADS, is_causal=1),
             n("MatMul", ["att", "wo"], ["o"]), n("Add", ["x", "o"], ["h1"]),
             n("RMSNormalization", ["h1", "g2"], ["n2"], axis=-1, epsilon=1e-5),
             n("MatMul", ["n2", "w1"], ["a1"]), n("Sigmoid", ["a1"], ["sg"]), n("Mul", ["a1", "sg"], ["silu"]),
             n("MatMul", ["n2", "w3"], ["a3"]), n("Mul", ["silu", "a3"], ["gated"]),
             n("MatMul", ["gated", "w2"], ["mlp"]), n("Add", ["h1", "mlp"], ["y"])]
    f = T.FLOAT
    ins = [h.make_tensor_value_info("x", f, [B, S, HID]), h.make_tensor_value_info("pos", T.INT64, [B, S]),
           h.make_tensor_value_info("past_k", f, [B, KV_HEADS, PAST, D]),
           h.make_tensor_value_info("past_v", f, [B, KV_HEADS, PAST, D])]
    outs = [h.make_tensor_value_info(o, f, None) for o in ("y", "present_k", "present_v")]
    g = h.make_graph(nodes, "decoder", ins, outs, [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 23)], ir_version=11)
    m.ir_version = 10
    feeds = {"x": rng.standard_normal((B, S, HID)).astype(np.float32),
             "pos": np.tile(np.arange(PAST, PAST + S), (B, 1)).astype(np.int64),
             "past_k": rng.standard_normal((B, KV_HEADS, PAST, D)).astype(np.float32),
             "past_v": rng.standard_normal((B, KV_HEADS, PAST, D)).astype(np.float32)}
    return m, feeds


def test_opset23_decoder_block_runs_whole_on_llvm_and_equals_onnxruntime():
    import onnxruntime as ort

    from compiler.executor import build

    m, feeds = _decoder()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    mod = build(m, target="llvm", progress=False)
    got = mod.run(feeds)
    for name, a, r in zip(("y", "present_k", "present_v"), got, want):
        assert a.shape == r.shape, name
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5 * float(np.abs(r).max()), err_msg=name)
    ops = {r["op"]: r.get("cpu_backend") for r in mod.profile()}
    assert not {"Attention", "RotaryEmbedding"} & set(ops)
    assert ops["SafeSoftmax"] == ops["RMSNormalization"] == ops["MatMul"] == "llvm"


def test_opset23_decoder_block_quantized_on_sim_equals_ref():
    """Calibrated to int8 for the accelerator: its dense layers offload, the rewritten attention (SafeSoftmax) and
    rotation stay float around them; sim equals ref bit for bit and stays within int8 accuracy of onnxruntime."""
    import onnxruntime as ort

    from compiler.executor import build

    m, feeds = _decoder()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    rng = np.random.default_rng(1)
    calib = [dict(feeds, x=rng.standard_normal(feeds["x"].shape).astype(np.float32)) for _ in range(4)]
    sim = build(m, target="sim", calibration=calib, progress=False)
    got = sim.run(feeds)[0]
    np.testing.assert_array_equal(got, build(m, target="ref", calibration=calib, progress=False).run(feeds)[0])
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.08
    ops = {r["op"]: r["target"] for r in sim.profile()}
    assert ops["AccelDense"] == "accel" and ops["SafeSoftmax"] == "cpu"
