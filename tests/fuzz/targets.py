"""Fuzz targets shared by the property tests (tests/fuzz) and ``benchmarks/fuzz.py``.

Each target turns a byte string into one case and runs it: ``run_<target>(data)`` returns
normally (the input was fine) or raises one of ``ALLOWED[target]``, the project's documented
errors for that input; anything else is a *foreign* exception, a bug. The bytes drive every
choice through :class:`Choices`, so a coverage-guided fuzzer (atheris) and hypothesis
(``st.binary()``) share the targets.

* ``onnx``: a small valid model (Conv, Relu, MaxPool, Flatten, Gemm; its onnxruntime-quantized
  QDQ form; Conv, BatchNormalization, pools, Reshape, MatMul, Add, Softmax; or a transformer block with
  LayerNormalization, attention masks, GELU and ConvTranspose, also quantized by onnxruntime's quantize_static
  defaults (zero-point attention MatMuls) and quantize_dynamic (MatMulInteger/ConvInteger)) with one mutation:
  an attribute, an input dimension, an initializer, a node input, an op type or the opset;
  compiled for the simulator (float models with calibration data) and run.
* ``vtaprog``: a saved program with damaged bytes (flips, truncation, insertion) or a damaged
  member (header fields, member dtypes/shapes), loaded and run with a small cycle budget.
* ``decode``: one 128-bit instruction word, decoded, then run before a FINISH.
* ``config``: a config JSON file with one field set to an arbitrary JSON value, removed or
  added, the top level replaced, or the text damaged.
* ``vtamod``: an exported module (``Module.export`` of the base model on tiny) with damaged bytes or a damaged
  member (header fields, a step's field, a program member, a missing member), loaded by the runtime alone and
  run with a small cycle budget.
* ``tunelog``: a tuning log (``vta tune``) of valid records with one record field set to an arbitrary
  JSON value or removed, or the text damaged; applied to its tasks: bad lines are warnings
  (``TuningLogWarning``), never an exception.
* ``llvmlog``: the same for an llvm tuning log (``vta tune --target llvm``): timed records and in-model choices
  of two conv tasks, a GEMM and a max pool, read and chosen from as a build does (no timing): warnings, never an
  exception.
* ``cudalog``: the same for a cuda tuning log (``vta tune --target cuda``, recorded on the emulated device):
  timed records of a conv, a product, a depthwise conv and a pool task, read and chosen from as a build does.
"""
from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend.errors import ModelError, ModelInputError, UnsupportedOperatorError
from compiler.frontend.support import SUPPORTED_OPS
from isa.config import HwConfig, make_config
from isa.errors import ConfigError, EncodingError
from jit_runtime.errors import ProgramFileError
from jit_runtime.exported import ModuleRunError
from simulator.errors import SimulatorError

#: Simulator budget of fuzzed programs: enough for the base program, small enough to stay fast.
FUZZ_MAX_CYCLES = 2_000_000

ALLOWED: dict[str, tuple[type[BaseException], ...]] = {
    "onnx": (ModelError, UnsupportedOperatorError, ModelInputError),
    "vtaprog": (ProgramFileError, SimulatorError),
    "vtamod": (ProgramFileError, SimulatorError, ModuleRunError),  # ModuleFileError is a ProgramFileError
    "decode": (EncodingError, SimulatorError),
    "config": (ConfigError,),
    "tunelog": (),  # every bad line is a TuningLogWarning naming FILE:LINE; nothing may raise
    "llvmlog": (),  # the same for llvm logs
    "cudalog": (),  # and for cuda logs
    "declaration": (ConfigError,),  # register_intrinsic refuses a declaration with a ConfigError naming why
}


class Choices:
    """Decisions drawn from a byte string (zeros once it runs out), deterministic for a given input."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (``lo`` when the range is empty)."""
        if hi <= lo:
            return lo
        span = hi - lo + 1
        nbytes = max(1, (span.bit_length() + 7) // 8)
        chunk = self.data[self.pos:self.pos + nbytes]
        self.pos += nbytes
        return lo + int.from_bytes(chunk.ljust(nbytes, b"\0"), "little") % span

    def pick(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def bool(self) -> bool:
        return self.int(0, 1) == 1

    def rest(self) -> bytes:
        return self.data[self.pos:]


# ------------------------------------------------------------------------------------ onnx
IN_SHAPE = (1, 1, 6, 6)


def base_model(seed: int = 0) -> onnx.ModelProto:
    """Conv(3x3, pad 1) -> Relu -> MaxPool(2x2/2) -> Flatten -> Gemm(72 -> 10), seeded weights."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((8, 1, 3, 3)) * 0.5).astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((10, 72)) * 0.1).astype(np.float32), "fw"),
             numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "fb")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flat", axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(IN_SHAPE))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def second_model(seed: int = 1) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> AveragePool -> GlobalAveragePool -> Reshape -> MatMul -> Add -> Softmax."""
    rng = np.random.default_rng(seed)
    f = lambda *shape: (rng.standard_normal(shape) * 0.3).astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(f(4, 1, 3, 3), "w"), numpy_helper.from_array(1 + f(4), "g"),
             numpy_helper.from_array(f(4), "beta"), numpy_helper.from_array(f(4), "mean"),
             numpy_helper.from_array(1 + np.abs(f(4)), "var"), numpy_helper.from_array(f(4, 5), "mw"),
             numpy_helper.from_array(f(5), "mb")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
             helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["n"], name="bn", epsilon=1e-5),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("AveragePool", ["r"], ["a"], name="avg", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["a"], ["gp"], name="gap"),
             helper.make_node("Constant", [], ["shape"], name="shape_const",
                              value=numpy_helper.from_array(np.array([1, 4], np.int64))),
             helper.make_node("Reshape", ["gp", "shape"], ["v"], name="reshape"),
             helper.make_node("MatMul", ["v", "mw"], ["mm"], name="matmul"),
             helper.make_node("Add", ["mm", "mb"], ["logits"], name="add"),
             helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, "fuzz2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(IN_SHAPE))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def transformer_model(seed: int = 3) -> onnx.ModelProto:
    """The newer operators: Conv -> tokens (Reshape, Transpose) -> LayerNormalization -> attention (MatMul of two
    activations, a Where/IsNaN/Equal/And mask, Softmax) -> GELU (Erf) and Tanh -> GatherElements -> Expand-ed
    Range positions from Shape -> back to a plane -> ConvTranspose; opset 17."""
    rng = np.random.default_rng(seed)
    f = lambda *shape: (rng.standard_normal(shape) * 0.3).astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(f(4, 1, 3, 3), "w"), numpy_helper.from_array(1 + f(4), "ln_g"),
             numpy_helper.from_array(f(4), "ln_b"), numpy_helper.from_array(f(4, 4), "wq"),
             numpy_helper.from_array(np.array([1, 4, 36], np.int64), "tok_shape"),
             numpy_helper.from_array(np.array([1, 4, 6, 6], np.int64), "plane_shape"),
             numpy_helper.from_array(np.float32(-1e4), "neg"), numpy_helper.from_array(np.float32(0.7071), "rsq2"),
             numpy_helper.from_array(np.float32(1), "one"), numpy_helper.from_array(np.int64(0), "i0"),
             numpy_helper.from_array(np.int64(1), "i1"), numpy_helper.from_array(np.array([1], np.int64), "ax1"),
             numpy_helper.from_array(rng.integers(0, 36, (1, 36, 4)).astype(np.int64), "perm_idx"),
             numpy_helper.from_array(f(4, 2, 2, 2), "wt")]
    mk = helper.make_node
    nodes = [mk("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             mk("Reshape", ["c", "tok_shape"], ["ct"], name="to_tokens"),
             mk("Transpose", ["ct"], ["t"], name="tokens", perm=[0, 2, 1]),
             mk("LayerNormalization", ["t", "ln_g", "ln_b"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
             mk("MatMul", ["ln", "wq"], ["q"], name="q"),
             mk("Transpose", ["ln"], ["kt"], name="kt", perm=[0, 2, 1]),
             mk("MatMul", ["q", "kt"], ["s"], name="scores"),
             mk("Shape", ["s"], ["ss"], name="shape"), mk("Gather", ["ss", "i1"], ["n"], name="n_tokens"),
             mk("Range", ["i0", "n", "i1"], ["pos"], name="positions"),
             mk("Unsqueeze", ["pos", "ax1"], ["pos_col"], name="pos_col"),
             mk("Equal", ["pos_col", "pos"], ["diag"], name="diag"), mk("IsNaN", ["s"], ["nan"], name="isnan"),
             mk("Expand", ["diag", "ss"], ["diag3"], name="expand"), mk("And", ["diag3", "nan"], ["bad"], name="and"),
             mk("Where", ["bad", "neg", "s"], ["sm"], name="where"),
             mk("Softmax", ["sm"], ["p"], name="softmax", axis=-1),
             mk("MatMul", ["p", "ln"], ["o"], name="pv"),
             mk("Mul", ["o", "rsq2"], ["o1"], name="gelu_div"), mk("Erf", ["o1"], ["o2"], name="erf"),
             mk("Add", ["o2", "one"], ["o3"], name="gelu_add"), mk("Mul", ["o", "o3"], ["g"], name="gelu_mul"),
             mk("Tanh", ["g"], ["th"], name="tanh"),
             mk("GatherElements", ["th", "perm_idx"], ["ge"], name="gather_elements", axis=1),
             mk("Transpose", ["ge"], ["gt"], name="to_channels", perm=[0, 2, 1]),
             mk("Reshape", ["gt", "plane_shape"], ["plane"], name="to_plane"),
             mk("ConvTranspose", ["plane", "wt"], ["y"], name="up", strides=[2, 2], pads=[0, 0, 1, 1],
                output_padding=[1, 1])]
    graph = helper.make_graph(nodes, "fuzz3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(IN_SHAPE))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 12, 12])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


_QDQ: bytes | None = None


def qdq_model() -> onnx.ModelProto:
    """:func:`base_model` quantized by onnxruntime's static quantizer (QDQ, as real int8 models come)."""
    global _QDQ
    if _QDQ is None:
        from compiler.quant.ort_tools import ort_quantize_static

        rng = np.random.default_rng(2)
        cal = [{"x": rng.standard_normal(IN_SHAPE).astype(np.float32)} for _ in range(4)]
        _QDQ = ort_quantize_static(base_model(), cal).SerializeToString()
    return onnx.ModelProto.FromString(_QDQ)


_ORT_TRANSFORMER: dict[str, bytes] = {}


def ort_transformer_model(kind: str) -> onnx.ModelProto:
    """:func:`transformer_model` quantized by onnxruntime: ``"static"`` (quantize_static defaults: uint8 asymmetric
    activations, so the attention MatMuls have zero points) or ``"dynamic"`` (quantize_dynamic: MatMulInteger,
    ConvInteger, DynamicQuantizeLinear)."""
    if kind not in _ORT_TRANSFORMER:
        import warnings

        from compiler.quant.ort_tools import ort_quantize_static

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "static":
                rng = np.random.default_rng(4)
                cal = [{"x": rng.standard_normal(IN_SHAPE).astype(np.float32)} for _ in range(4)]
                q = ort_quantize_static(transformer_model(), cal, defaults=True)
            else:
                from onnxruntime.quantization import quantize_dynamic

                with tempfile.TemporaryDirectory() as d:
                    onnx.save(transformer_model(), f"{d}/f.onnx")
                    quantize_dynamic(f"{d}/f.onnx", f"{d}/q.onnx")
                    q = onnx.load(f"{d}/q.onnx")
        _ORT_TRANSFORMER[kind] = q.SerializeToString()
    return onnx.ModelProto.FromString(_ORT_TRANSFORMER[kind])


BASE_MODELS = {"cnn": base_model, "cnn2": second_model, "qdq": qdq_model, "transformer": transformer_model,
               "transformer_qdq": lambda: ort_transformer_model("static"),
               "transformer_dynamic": lambda: ort_transformer_model("dynamic")}

_ATTR_NAMES = ("kernel_shape", "strides", "pads", "dilations", "group", "axis", "transA", "transB", "alpha", "beta",
               "ceil_mode", "auto_pad", "perm", "storage_order", "count_include_pad", "epsilon", "to",
               "output_padding", "output_shape", "batch_dims", "stash_type")
_ODD_OPS = ("Round", "Hardmax", "LSTM", "Foo")


def _random_value(c: Choices):
    kind = c.int(0, 7)
    if kind == 0:
        return c.int(-3, 9)
    if kind == 1:
        return [c.int(-2, 8) for _ in range(c.int(0, 5))]
    if kind == 2:
        return c.pick([0.0, -1.5, 2.5, float("nan"), float("inf"), 1e30])
    if kind == 3:
        return c.pick(["", "NOTSET", "SAME_UPPER", "VALID", "linear", "bogus"])
    if kind == 4:
        return [c.pick([0.5, -1.0, float("nan")]) for _ in range(c.int(0, 3))]
    if kind == 5:
        return c.int(-(1 << 40), 1 << 40)
    if kind == 6:
        return [c.int(0, 3)] * c.int(1, 4)
    return c.int(0, 1)


def _mutate_attribute(m: onnx.ModelProto, c: Choices) -> None:
    node = c.pick(m.graph.node)
    action = c.int(0, 2)
    if action == 0 and node.attribute:
        del node.attribute[c.int(0, len(node.attribute) - 1)]
        return
    if action == 1 and node.attribute:
        name = node.attribute[c.int(0, len(node.attribute) - 1)].name
    else:
        name = c.pick(_ATTR_NAMES)
    value = _random_value(c)
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    try:
        node.attribute.append(helper.make_attribute(name, value))
    except (ValueError, TypeError):  # a value make_attribute cannot encode (empty list): leave the attribute out
        pass


def _mutate_input_dim(m: onnx.ModelProto, c: Choices) -> None:
    dims = m.graph.input[0].type.tensor_type.shape.dim
    action = c.int(0, 3)
    if action == 0:
        dims[c.int(0, len(dims) - 1)].dim_value = c.int(0, 12)
    elif action == 1:
        d = dims[c.int(0, len(dims) - 1)]
        d.Clear()
        d.dim_param = "n"
    elif action == 2 and len(dims) > 1:
        del dims[c.int(0, len(dims) - 1)]
    else:
        dims.add().dim_value = c.int(1, 4)


def _mutate_initializer(m: onnx.ModelProto, c: Choices) -> None:
    inits = m.graph.initializer
    k = c.int(0, len(inits) - 1)
    t = inits[k]
    a = numpy_helper.to_array(t)
    action = c.int(0, 6)
    if action == 0:  # another shape, same rank
        a = np.ones(tuple(c.int(0, 12) for _ in a.shape), np.float32)
    elif action == 1:  # another rank
        a = np.ones(tuple(c.int(1, 8) for _ in range(c.int(0, 5))), np.float32)
    elif action == 2:
        a = a.astype(c.pick([np.int64, np.int8, np.float64, np.int32, np.bool_]))
    elif action == 3 and a.size:
        a = a.astype(np.float32)
        a.reshape(-1)[c.int(0, a.size - 1)] = c.pick([np.nan, np.inf, -np.inf])
    elif action == 4:
        del inits[k]
        return
    elif action == 5:  # raw bytes that do not match the dims
        t.raw_data = t.raw_data[:c.int(0, max(0, len(t.raw_data) - 1))]
        return
    else:
        a = a.reshape(-1)[:c.int(0, a.size)].copy()
    inits[k].CopyFrom(numpy_helper.from_array(a, t.name))


def _mutate_node_input(m: onnx.ModelProto, c: Choices) -> None:
    node = c.pick(m.graph.node)
    names = [i.name for i in m.graph.input] + [t.name for t in m.graph.initializer] + \
            [o for n in m.graph.node for o in n.output]
    action = c.int(0, 3)
    if action == 0 and node.input:
        node.input[c.int(0, len(node.input) - 1)] = c.pick(["dangling", ""] + names)
    elif action == 1 and node.input:
        del node.input[c.int(0, len(node.input) - 1)]
    elif action == 2:
        node.input.append(c.pick(names + ["dangling"]))
    else:
        node.output[0] = c.pick(names + ["y2"])


def _mutate_op_type(m: onnx.ModelProto, c: Choices) -> None:
    node = c.pick(m.graph.node)
    node.op_type = c.pick(sorted(SUPPORTED_OPS) + list(_ODD_OPS))


def _mutate_opset(m: onnx.ModelProto, c: Choices) -> None:
    m.opset_import[0].version = c.pick([1, 6, 7, 11, 12, 17, 21, 99])


MUTATIONS = {"attribute": _mutate_attribute, "input_dim": _mutate_input_dim, "initializer": _mutate_initializer,
             "node_input": _mutate_node_input, "op_type": _mutate_op_type, "opset": _mutate_opset}


def mutated_model(data: bytes, kind: str | None = None) -> tuple[onnx.ModelProto, str]:
    """A base model with one mutation chosen by ``data`` (of class ``kind`` if given); returns it and the class."""
    c = Choices(data)
    m = BASE_MODELS[c.pick(sorted(BASE_MODELS))]()
    kind = c.pick(sorted(MUTATIONS)) if kind is None else kind
    MUTATIONS[kind](m, c)
    return m, kind


def run_model(model: onnx.ModelProto, target: str = "sim") -> None:
    """Compile ``model`` for the tiny config with calibration data, then run it on a seeded input."""
    from compiler.executor import build

    rng = np.random.default_rng(0)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in dims)
    calibration = rng.standard_normal((2 * shape[0],) + shape[1:]).astype(np.float32) if shape else None
    mod = build(model, "tiny", target=target, calibration=calibration, progress=False)
    feeds = {}
    for name in mod.graph.inputs:
        info = mod.graph.tensors[name]
        feeds[name] = rng.standard_normal(info.shape).astype(info.dtype)
    mod(**feeds)


def run_onnx(data: bytes) -> None:
    model, _ = mutated_model(data)
    run_model(model)


# --------------------------------------------------------------------------------- vtaprog
_BASE_PROGRAM: bytes | None = None


def base_program() -> bytes:
    """The bytes of a saved program (the runtime suite's ReLU case on the tiny config)."""
    global _BASE_PROGRAM
    if _BASE_PROGRAM is None:
        from jit_runtime import suite

        program, _ = suite.relu(make_config("tiny"))
        with tempfile.TemporaryDirectory() as d:
            _BASE_PROGRAM = program.save(Path(d) / "p.vtaprog").read_bytes()
    return _BASE_PROGRAM


_HEADER_KEYS = ("format", "version", "name", "config", "insn_addr", "n_insns", "dram_bytes", "buffers", "expected",
                "runtime")


def _json_value(c: Choices):
    return c.pick([None, True, -1, 0, 7, 1 << 62, 2.5, "x", "O", [], [1, 2], {}, {"a": 1}, [[0]], "int8"])


def _mutate_members(raw: bytes, c: Choices) -> bytes:
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(arrays["header"].tobytes().decode())
    action = c.int(0, 5)
    if action == 0:
        header[c.pick(_HEADER_KEYS)] = _json_value(c)
    elif action == 1:
        header.pop(c.pick(_HEADER_KEYS), None)
    elif action == 2:  # a buffer's addr/shape/dtype
        b = header["buffers"][c.pick(sorted(header["buffers"]))]
        b[c.pick(["addr", "shape", "dtype"])] = _json_value(c)
    elif action == 3:  # a member's dtype or shape
        key = c.pick(sorted(arrays))
        a = arrays[key]
        arrays[key] = c.pick([a.astype(np.float32), a.reshape(1, -1), a[: c.int(0, a.size)], a.astype(np.int64)])
    elif action == 4:
        arrays.pop(c.pick(sorted(arrays)))
    else:  # the whole header replaced by another JSON value
        header = _json_value(c)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def mutated_program(data: bytes) -> bytes:
    """The base program file damaged as ``data`` chooses (bytes or members)."""
    c = Choices(data)
    raw = bytearray(base_program())
    action = c.int(0, 4)
    if action == 0:  # flip bytes
        for _ in range(c.int(1, 8)):
            raw[c.int(0, len(raw) - 1)] ^= c.int(1, 255)
    elif action == 1:
        del raw[c.int(0, len(raw) - 1):]
    elif action == 2:
        i = c.int(0, len(raw))
        raw[i:i] = c.rest()[:64] or b"\x00"
    elif action == 3:
        i = c.int(0, len(raw) - 1)
        del raw[i:i + c.int(1, 64)]
    else:
        return _mutate_members(bytes(raw), c)
    return bytes(raw)


def run_program_file(path: Path) -> None:
    from jit_runtime.program import load_program
    from simulator import Simulator

    prog = load_program(path)
    prog.run(Simulator(prog.cfg, max_cycles=FUZZ_MAX_CYCLES))


def run_vtaprog(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.vtaprog"
        path.write_bytes(mutated_program(data))
        run_program_file(path)


# ---------------------------------------------------------------------------------- vtamod
_BASE_MODULE: bytes | None = None
_MODULE_KEYS = ("format", "version", "name", "config", "signature", "inputs", "outputs", "constants", "programs",
                "steps", "producer")
_STEP_KEYS = ("kind", "name", "op", "inputs", "outputs", "attrs", "output", "shape", "dtype", "calls", "out_index",
              "input_sizes", "macs")


def base_module() -> bytes:
    """The bytes of an exported module: the base model quantized and compiled for tiny."""
    global _BASE_MODULE
    if _BASE_MODULE is None:
        from compiler.executor import build

        calib = np.random.default_rng(0).standard_normal((2,) + IN_SHAPE[1:]).astype(np.float32)
        mod = build(base_model(), "tiny", calibration=calib, progress=False)
        with tempfile.TemporaryDirectory() as d:
            _BASE_MODULE = mod.export(Path(d) / "m.vtamod").read_bytes()
    return _BASE_MODULE


def _mutate_module_members(raw: bytes, c: Choices) -> bytes:
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(arrays["header"].tobytes().decode())
    action = c.int(0, 5)
    if action == 0:
        header[c.pick(_MODULE_KEYS)] = _json_value(c)
    elif action == 1:
        header.pop(c.pick(_MODULE_KEYS), None)
    elif action == 2:  # one field of one step (a call's slot included)
        step = c.pick(header["steps"])
        if step.get("calls") and c.bool():
            slot = c.pick(step["calls"])
            target = c.pick(slot["slots"]) if slot["slots"] and c.bool() else slot
            target[c.pick(sorted(target))] = _json_value(c)
        else:
            step[c.pick(_STEP_KEYS)] = _json_value(c)
    elif action == 3:  # a member's dtype or shape
        key = c.pick(sorted(arrays))
        a = arrays[key]
        arrays[key] = c.pick([a.astype(np.float32), a.reshape(1, -1), a.reshape(-1)[: c.int(0, a.size)], a.astype(np.int64)])
    elif action == 4:
        arrays.pop(c.pick(sorted(arrays)))
    else:
        header = _json_value(c)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def mutated_module(data: bytes) -> bytes:
    """The base module file damaged as ``data`` chooses (bytes or members)."""
    c = Choices(data)
    raw = bytearray(base_module())
    action = c.int(0, 3)
    if action == 0:
        for _ in range(c.int(1, 8)):
            raw[c.int(0, len(raw) - 1)] ^= c.int(1, 255)
    elif action == 1:
        del raw[c.int(0, len(raw) - 1):]
    elif action == 2:
        i = c.int(0, len(raw) - 1)
        del raw[i:i + c.int(1, 64)]
    else:
        return _mutate_module_members(bytes(raw), c)
    return bytes(raw)


def run_vtamod(data: bytes) -> None:
    from jit_runtime.exported import load_module
    from simulator import Simulator

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.vtamod"
        path.write_bytes(mutated_module(data))
        m = load_module(path, device=Simulator(make_config("tiny"), max_cycles=FUZZ_MAX_CYCLES))
        m.run({name: np.zeros(s["shape"], s["dtype"]) for name, s in m.inputs.items()})


# ---------------------------------------------------------------------------------- decode
_TINY: HwConfig | None = None


def run_decode(data: bytes) -> None:
    """Decode one 128-bit word; if it decodes, run it before a FINISH on a 64 KiB zero DRAM image."""
    global _TINY
    from isa import Finish, decode, encode
    from simulator import Simulator

    cfg = _TINY = _TINY or make_config("tiny")
    word = int.from_bytes(data[:16].ljust(16, b"\0"), "little")
    decode(word, cfg)
    dram = np.zeros(1 << 16, np.uint8)
    dram[:16] = np.frombuffer(word.to_bytes(16, "little"), np.uint8)
    dram[16:32] = np.frombuffer(encode(Finish(), cfg).to_bytes(16, "little"), np.uint8)
    Simulator(cfg, max_cycles=FUZZ_MAX_CYCLES).run(dram, 0, 2)


# ---------------------------------------------------------------------------------- config
def mutated_config_text(data: bytes) -> str:
    c = Choices(data)
    cfg = json.loads(make_config("tiny").to_json())
    action = c.int(0, 5)
    if action == 0:
        cfg[c.pick(sorted(cfg))] = c.pick([None, True, 8.0, "8", -1, 0, 3, 1 << 40, float("inf"), float("nan"),
                                            [], {}, 1e-9, 5])
    elif action == 1:
        cfg.pop(c.pick(sorted(cfg)))
    elif action == 2:
        cfg[c.pick(["base", "extra", "Name"])] = c.pick(["pynq-z1", "tiny", "nope", 3, None])
    elif action == 3:
        return json.dumps(c.pick([None, [], 3, "pynq-z1", [cfg]]))
    elif action == 4:
        text = bytearray(json.dumps(cfg).encode())
        for _ in range(c.int(1, 4)):
            text[c.int(0, len(text) - 1)] = c.int(0, 255)
        return text.decode("utf-8", errors="replace")
    else:
        key = c.pick([k for k in sorted(cfg) if isinstance(cfg[k], int) and not isinstance(cfg[k], bool)])
        cfg[key] = c.int(-4, 1 << 20)
    return json.dumps(cfg)


def run_config(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.json"
        path.write_text(mutated_config_text(data))
        make_config(path)


# --------------------------------------------------------------------------------- tunelog
def _tunelog_tasks():
    from compiler.autotune import Task
    from jit_runtime.host_ops.requant import Requant
    from compiler.topi.conv2d import ConvShape

    cfg = make_config("pynq-z1")
    return cfg, [Task(cfg, ConvShape(1, 1, 2, 2, 8, 8, 3, 3, (1, 1), (1, 1, 1, 1)), None, Requant(shift=8)),
                 Task(cfg, ConvShape(1, 1, 4, 2, 4, 4, 1, 1, (1, 1), (0, 0, 0, 0)), None, Requant(shift=6))]


def mutated_tuning_log(data: bytes) -> str:
    """Valid records of two tasks, then one damage drawn from ``data``."""
    from compiler.autotune.measure import Result
    from compiler.autotune.records import record_line
    from compiler.topi.knobs import ConvKnobs

    c = Choices(data)
    _, tasks = _tunelog_tasks()
    lines = [json.loads(record_line(t, ConvKnobs(1, 1, 1, 1), Result(1000 + i, None, 0.1)))
             for i, t in enumerate(tasks)]
    return _damaged_log(c, lines, ("hw", "task", "config"))


def _damaged_log(c: Choices, lines: list[dict], nested: tuple[str, ...]) -> str:
    """The JSON lines of ``lines`` after one damage drawn from ``c``: a field of a record (top level or one of its
    ``nested`` objects) set to an arbitrary value, a top-level field removed, or the text damaged (flips,
    truncation or inserted bytes)."""
    kind = c.int(0, 2)
    rec = lines[c.int(0, len(lines) - 1)]
    if kind == 0:
        target = rec if c.bool() else rec[c.pick(k for k in nested if isinstance(rec.get(k), dict))]
        target[c.pick(sorted(target))] = _json_value(c)
    elif kind == 1:
        rec.pop(c.pick(sorted(rec)))
    text = "\n".join(json.dumps(r) for r in lines) + "\n"
    if kind == 2:
        raw = bytearray(text.encode())
        for _ in range(c.int(1, 4)):
            raw[c.int(0, len(raw) - 1)] = c.int(0, 255)
        text = bytes(raw[:c.int(1, len(raw))]).decode("utf-8", errors="replace") + c.rest().decode("latin-1")
    return text


def _read_log(text: str, name: str, read) -> None:
    """Write ``text`` to a log file ``name`` in a fresh folder and call ``read(path)`` with warnings silenced (bad
    lines are warnings; only an exception is a finding)."""
    import warnings

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_text(text, encoding="utf-8", errors="replace")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read(path)


def run_tunelog(data: bytes) -> None:
    from compiler.autotune.apply import tuned_knobs

    cfg, tasks = _tunelog_tasks()
    _read_log(mutated_tuning_log(data), "tune.log", lambda path: tuned_knobs(tasks, path, cfg))


def _llvmlog_tasks():
    from compiler.autotune.llvm_conv import LlvmConvTask
    from compiler.autotune.llvm_gemm import LlvmGemmTask
    from compiler.autotune.llvm_pool import LlvmPoolTask
    from compiler.topi.conv2d_direct import Conv2dSpec
    from compiler.topi.pool import PoolSpec

    return [LlvmConvTask(Conv2dSpec(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1)), True, False, "relu", (), "a"),
            LlvmConvTask(Conv2dSpec(1, 16, 8, 8, 32, 1, 1), True, True, None, (), "b"),
            LlvmGemmTask((32, 64), (64, 48), True, "gelu", (), "c"),
            LlvmPoolTask(PoolSpec(1, 16, 40, 40, 3, 3, (2, 2), (1, 1, 1, 1), 20, 20), "d")]


def mutated_llvm_log(data: bytes) -> str:
    """Per task a timed record of its default and of another setting (and of the other layout's, for a conv of both
    layouts), and an in-model choice; then one damage drawn from ``data`` (:func:`_damaged_log`)."""
    from compiler.autotune.measure import Result

    c = Choices(data)
    lines = []
    for t in _llvmlog_tasks():
        sp, d = t.make_space(), t.default_knobs()
        other = next(k for k in map(sp.knobs, sp.candidates()) if k != d)
        layouts = {getattr(k, "algo", None) == "pixels": k for k in map(sp.knobs, sp.candidates())}
        lines += [json.loads(t.record_line(d, Result(900, None, 0.1), "xgb")),
                  json.loads(t.record_line(other, Result(800, None, 0.1), "xgb")),
                  *(json.loads(t.record_line(k, Result(850, None, 0.1), "xgb")) for k in layouts.values()
                    if k not in (d, other)),
                  json.loads(t.record_line(other, Result(None, None, 0.0), "in_model", {"ms": 0.8, "default_ms": 1.0}))]
    return _damaged_log(c, lines, ("cpu", "task", "config", "result", "in_model"))


def run_llvmlog(data: bytes) -> None:
    from compiler.autotune.llvm_conv import in_model_choices, load_llvm_log, logged_knobs

    tasks = _llvmlog_tasks()

    def read(path) -> None:
        log = load_llvm_log(path)
        logged_knobs(tasks, path, log, frozenset(in_model_choices(tasks, log)))
    _read_log(mutated_llvm_log(data), "cpu.log", read)


def _cudalog_tasks():
    from compiler.autotune.cuda_conv import CudaConvTask, CudaGemmTask
    from compiler.autotune.cuda_direct import CudaDepthwiseTask, CudaPoolTask
    from compiler.topi.conv2d_direct import Conv2dSpec
    from compiler.topi.pool import PoolSpec

    return [CudaConvTask(Conv2dSpec(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1)), True, False, "relu", (), "a"),
            CudaGemmTask((32, 64), (64, 48), True, "gelu", (), "b"),
            CudaDepthwiseTask(Conv2dSpec(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1), groups=16), True, False, "clip",
                              (0.0, 6.0), "c"),
            CudaPoolTask("AveragePool", PoolSpec(1, 16, 8, 8, 3, 3, (2, 2), (1, 1, 1, 1), 4, 4), True, "d")]


def _emulated(fn):
    """Run ``fn()`` with ``VTA_CUDA_DEVICE=emulate`` (records name their device; no GPU here)."""
    import os

    old = os.environ.get("VTA_CUDA_DEVICE")
    os.environ["VTA_CUDA_DEVICE"] = "emulate"
    try:
        return fn()
    finally:
        if old is None:
            os.environ.pop("VTA_CUDA_DEVICE", None)
        else:
            os.environ["VTA_CUDA_DEVICE"] = old


def mutated_cuda_log(data: bytes) -> str:
    """Per task a timed record of its default and of another setting; then one damage drawn from ``data``
    (:func:`_damaged_log`)."""
    from compiler.autotune.measure import Result

    c = Choices(data)
    lines = []
    for t in _cudalog_tasks():
        sp = t.make_space()
        other = next(k for k in map(sp.knobs, sp.candidates()) if k != t.default_knobs())
        lines += [json.loads(_emulated(lambda: t.record_line(t.default_knobs(), Result(900, None, 0.1), "xgb"))),
                  json.loads(_emulated(lambda: t.record_line(other, Result(800, None, 0.1), "xgb")))]
    return _damaged_log(c, lines, ("gpu", "task", "config", "result"))


def run_cudalog(data: bytes) -> None:
    from compiler.autotune.cuda_conv import logged_knobs

    tasks = _cudalog_tasks()
    _read_log(mutated_cuda_log(data), "gpu.log", lambda path: _emulated(lambda: logged_knobs(tasks, path)))


# ------------------------------------------------------------------------------------ declarations
_AXES = ("p", "q", "r", "s")


def mutated_declaration(data: bytes):
    """A tensor-intrinsic declaration drawn from ``data``: names, opcodes, axis extents (0 and non-divisors
    too), operand scopes and axes (undeclared ones too), semantics (valid sums of products, three-way products,
    terms skipping an axis, non-expressions, functions that raise), timing and extra fields of any width."""
    from isa.intrinsics import InsnField, IntrinsicDecl, OperandDecl, Timing
    from isa.texpr import reduce_sum

    c = Choices(data)
    # extents: mostly the config's block sizes (what a working declaration uses), else small constants or 0
    sizes = {a: c.pick(("block_out", "block_out", "block_in", "batch", 1, 2, 3, 0)) for a in _AXES[:c.int(1, 4)]}
    names = list(sizes) + ["z"]
    out = tuple(a for a in sizes if c.bool()) or (next(iter(sizes)),)
    red = tuple(a for a in sizes if a not in out)
    scopes = ("inp", "wgt", "acc", "uop", "out")
    # (each choice falls back to the working option when the input runs out: Choices then gives zeros)
    ops = tuple(OperandDecl(n, c.pick(scopes) if c.int(0, 5) == 5 else ("inp", "wgt")[i],
                            tuple(dict.fromkeys(c.pick(names if c.int(0, 5) == 5 else names[:-1])
                                                for _ in range(c.int(1, 3)))))
                for i, n in enumerate(("x", "y")[:c.int(1, 2) if c.int(0, 3) == 3 else 2]))
    kind = c.int(0, 6) if c.bool() else 0

    def semantics(**kw):
        x, y = kw["x"], kw.get("y", kw["x"])
        xi, yi = (tuple(kw.get(a, 0) for a in o.axes) for o in (ops[0], ops[-1]))
        if kind == 5:
            return 42  # not a tensor expression
        if kind == 6:
            raise RuntimeError("semantics that raise")
        e = x[xi] * y[yi]
        if kind == 3:
            e = e * x[xi]  # three operands in one product
        elif kind == 4:
            e = e + x[xi]  # a term of one operand
        return reduce_sum(e, [kw[a] for a in red if a in kw]) if red and kind != 2 else e

    fields = tuple(InsnField(c.pick(("f", "g", "dst_factor_out", "opcode")), c.int(0, 70), c.bool())
                   for _ in range(c.int(0, 2) if c.bool() else 0))
    timing = Timing(c.int(0, 2), c.int(-1, 70)) if c.int(0, 3) == 3 else Timing(1, c.int(1, 8))
    name = c.pick(("gemm", "Bad", "fz2", "")) if c.int(0, 3) == 3 else "fz"
    opcode = c.int(0, 9) if c.int(0, 3) == 3 else c.pick((6, 7))
    return IntrinsicDecl(name=name, opcode=opcode, axes=lambda cfg: {a: v if isinstance(v, int) else getattr(cfg, v)
                                                                     for a, v in sizes.items()},
                         operands=ops, out_axes=out, semantics=semantics, timing=timing, fields=fields)


def run_declaration(data: bytes) -> None:
    """Register a fuzzed declaration on every preset that supports it; when accepted, an instruction of it must
    encode, decode and disassemble to itself and cost iterations + pipeline cycles, then it is removed again."""
    import isa
    from isa.encoding import decode, encode
    from isa.declare import register_intrinsic, unregister_intrinsic
    from isa.intrinsics import insn_class, intrinsics
    from isa.timing import exec_cycles

    decl = register_intrinsic(mutated_declaration(data), check_configs=("tiny", "pynq-z1"))
    try:
        cfg = make_config("tiny")
        if decl.name not in intrinsics(cfg):
            return
        insn = insn_class(decl)(reset=False, uop_bgn=0, uop_end=2, iter_out=3, iter_in=2)
        if decode(encode(insn, cfg), cfg) != insn or isa.assemble(isa.disassemble([insn])) != [insn]:
            raise AssertionError(f"{decl.name}: instruction does not round-trip: {insn}")
        if exec_cycles(cfg, insn) != 12 + decl.timing.depth(cfg):
            raise AssertionError(f"{decl.name}: {exec_cycles(cfg, insn)} cycles for 12 iterations")
    finally:
        unregister_intrinsic(decl.name)


TARGETS = {"onnx": run_onnx, "vtaprog": run_vtaprog, "vtamod": run_vtamod, "decode": run_decode, "config": run_config,
           "tunelog": run_tunelog, "llvmlog": run_llvmlog, "cudalog": run_cudalog,
           "declaration": run_declaration}
