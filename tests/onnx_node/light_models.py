"""The onnx package's sample CNN architectures (``onnx/backend/test/data/light/light_*.onnx``) with seeded weights.

The files ship without weights: every parameter is a ``ConstantOfShape`` node. ``seeded_model``
replaces each by an initializer of the same shape drawn from a seeded generator, scaled for its
role (He-normal conv weights, unit-variance-preserving dense weights, BatchNorm statistics near
identity), so activations keep a sane range through the depth of the network.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT_MODELS = ("resnet50", "squeezenet", "shufflenet", "vgg19", "bvlc_alexnet", "inception_v1", "densenet121",
                "inception_v2")


def light_model_path(name: str) -> Path:
    p = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    if not p.is_file():
        raise FileNotFoundError(f"{p} is not in the installed onnx package; available: {LIGHT_MODELS}")
    return p


def _param(rng: np.random.Generator, shape: tuple[int, ...], users: list[tuple[onnx.NodeProto, int]]) -> np.ndarray:
    op, idx = (users[0][0].op_type, users[0][1]) if users else ("", 0)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    if op == "Conv" and idx == 1:
        return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    if op == "Gemm" and idx == 1:
        trans_b = any(a.name == "transB" and a.i for a in users[0][0].attribute)
        k = shape[1] if trans_b else shape[0]
        return rng.standard_normal(shape) * np.sqrt(1.0 / k)
    if op == "BatchNormalization":
        if idx in (1, 4):  # scale, variance
            return rng.uniform(0.5, 1.5, shape)
        return rng.standard_normal(shape) * 0.1  # bias, mean
    if op == "Mul":
        return rng.uniform(0.5, 1.5, shape)
    return rng.standard_normal(shape) * 0.1  # biases, Add operands


def seeded_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """The sample CNN ``name`` with every ``ConstantOfShape`` parameter replaced by seeded random values."""
    model = onnx.load(str(light_model_path(name)))
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    users: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for n in g.node:
        for i, x in enumerate(n.input):
            users.setdefault(x, []).append((n, i))
    rng = np.random.default_rng(seed)
    kept, new_inits = [], []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in consts:
            shape = tuple(int(d) for d in consts[n.input[0]])
            value = _param(rng, shape, users.get(n.output[0], [])).astype(np.float32)
            new_inits.append(numpy_helper.from_array(value, n.output[0]))
        else:
            kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(new_inits)
    init_names = {t.name for t in g.initializer}
    # the IR-3 files list parameters as graph inputs too: keep only the data input (IR 4 lets initializers
    # stand alone; nothing else about the graph changes)
    used = {x for n in kept for x in n.input}
    real = [i for i in g.input if i.name not in init_names and i.name in used]
    del g.input[:]
    g.input.extend(real)
    keep_inits = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep_inits)
    model.ir_version = max(model.ir_version, 4)
    return model


def input_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    (inp,) = model.graph.input
    return tuple(d.dim_value or 1 for d in inp.type.tensor_type.shape.dim)
