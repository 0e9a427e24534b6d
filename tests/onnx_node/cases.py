"""The onnx backend node tests of the operators we support, generated from the installed onnx package.

``load_cases`` runs onnx's own test generators (``onnx.backend.test.loader.load_node_model_tests``:
single-operator models with inputs and expected outputs computed by onnx's reference code) and
keeps every case whose nodes all use operators listed in ``compiler.frontend.support.SUPPORTED_OPS``.
``run_case`` compiles one with ``compiler.build`` for a target and compares every output as onnx's
backend runner does (shape, dtype, ``rtol``/``atol`` of the case). ``SKIPS`` is the only way a case
is not run; each entry says why.
"""
from __future__ import annotations

import os
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

# name pattern -> reason. Only element types no target holds (float8/float4 and 4-/2-bit integers, the
# `TENSOR_TYPES` of compiler.frontend.support), random outputs, and non-tensor values. Skipped cases are
# still compiled: `check_skipped` checks that unsupported ones are rejected up front with
# UnsupportedOperatorError and that random ones run with the expected output shapes and dtypes.
_NARROW = "(FLOAT8E4M3FNUZ|FLOAT8E4M3FN|FLOAT8E5M2FNUZ|FLOAT8E5M2|FLOAT8E8M0|FLOAT4E2M1|UINT4|INT4|UINT2|INT2)"
RANDOM = "random mask (onnxruntime excludes it too)"
OLD_OPSET = "opset 1 model (the frontend reads opsets 7..28)"
SKIPS: dict[str, str] = {
    # Cast / CastLike to or from 8-, 4- and 2-bit types: no hardware, numpy or accelerator arithmetic for them
    rf"^test_cast(like)?_(no_saturate_|e8m0_)?\w*{_NARROW}\w*": "8/4/2-bit float or 4/2-bit integer type",
    r"^test_(de)?quantizelinear_(e4m3fn|e5m2|e4m3fn_float16|e4m3fn_zero_point|float4e2m1|u?int4|u?int2)$":
        "8/4/2-bit float or 4/2-bit integer type",
    # training-mode Dropout with ratio > 0 draws a random mask: no backend reproduces onnx's numpy draws
    # (onnxruntime excludes these cases from its node-test run for the same reason)
    r"^test_training_dropout(_default|_default_mask|_mask)?$": RANDOM,
    # string tensors: no target holds them (refused up front as "tensor type STRING")
    r"^test_equal_string": "string tensors",
    # optional / sequence values: the graph IR and the accelerator hold tensors only
    r"^test_identity_(opt|sequence)$": "optional/sequence value, not a tensor",
    # opset-1 models: the frontend reads opsets 7..28 (refused up front, the opset named)
    r"^test_not_[234]d$": OLD_OPSET,
}


def skip_reason(name: str) -> str | None:
    for pat, why in SKIPS.items():
        if re.match(pat, name):
            return why
    return None


def _supported(model: onnx.ModelProto) -> bool:
    from compiler.frontend.support import SUPPORTED_OPS

    return all(n.domain in ("", "ai.onnx") and n.op_type in SUPPORTED_OPS for n in model.graph.node)


def load_cases(cache_dir: Path | None = None) -> list:
    """Node test cases of supported operators (sorted by name); pickled in ``cache_dir`` per onnx version."""
    import hashlib

    from compiler.frontend.support import SUPPORTED_OPS

    ops = hashlib.sha1(",".join(sorted(SUPPORTED_OPS)).encode()).hexdigest()[:8]  # a new operator selects anew
    cache = None if cache_dir is None else Path(cache_dir) / f"node_cases_onnx{onnx.__version__}_{ops}.pkl"
    if cache is not None and cache.is_file():
        try:
            return pickle.loads(cache.read_bytes())
        except Exception:  # a stale or damaged cache is rebuilt
            pass
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = sorted((c for c in load_node_model_tests() if _supported(c.model)), key=lambda c: c.name)
    if cache is not None:  # written atomically: parallel test workers may build it at the same time
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(cases))
        os.replace(tmp, cache)
    return cases


def _array(v):
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def run_case(case, target: str, *, values: bool = True) -> None:
    """Compile ``case.model`` (float, no quantization) for ``target`` and check every data set; raises on mismatch.
    ``values=False`` checks output count, shapes and dtypes only."""
    from compiler import build

    module = build(case.model, target=target, quantize=False, progress=False)
    names = [i.name for i in case.model.graph.input]
    for inputs, expected in case.data_sets:
        feeds = {n: _array(v) for n, v in zip(names, inputs) if n in module.input_names}
        got = module.run(feeds)
        assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            e = _array(e)
            assert g.shape == e.shape, f"output {i}: shape {g.shape}, expected {e.shape}"
            assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype}, expected {e.dtype}"
            if not values:
                continue
            if e.dtype == object or e.dtype == bool:
                np.testing.assert_array_equal(g, e)
            else:
                np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=_rtol(case, e.dtype),
                                           atol=case.atol, err_msg=f"output {i}")


def _rtol(case, dtype: np.dtype) -> float:
    """The case's rtol; for float16/bfloat16 outputs at least two units of the format's last place (2 eps): a
    chain of ops rounded to the narrow type after each (ours compute each in float32) may land one rounding
    away from onnx's reference in the last place (its fp16/bf16 attention cases ask 1e-3, below bfloat16's
    7.8e-3 eps)."""
    if dtype == np.float16:
        return max(case.rtol, 2 * float(np.finfo(np.float16).eps))
    if dtype.name == "bfloat16":
        return max(case.rtol, 2 * 2.0 ** -7)
    return case.rtol


def check_skipped(case, target: str) -> None:
    """A skipped case with random outputs must still run (shapes and dtypes checked); any other skipped
    case must be refused before any work, with the unsupported feature named."""
    from compiler import build
    from compiler.frontend.errors import ModelError, UnsupportedOperatorError

    if skip_reason(case.name) == RANDOM:
        run_case(case, target, values=False)
        return
    refusal = ModelError if skip_reason(case.name) == OLD_OPSET else UnsupportedOperatorError
    try:
        build(case.model, target=target, quantize=False, progress=False)
    except refusal:
        return
    raise AssertionError(f"{case.name} is in the skip list but compiles: take it out of SKIPS")
