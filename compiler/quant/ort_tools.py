"""onnxruntime helpers: make QDQ int8 models with ``quantize_static`` and run reference sessions."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx


def ort_session(model: onnx.ModelProto | str | Path, *, basic: bool = False):
    """An onnxruntime CPU session; ``basic``: ORT_ENABLE_BASIC, where QDQ models run as DQ -> float op -> Q
    (the reference semantics; the fused int8 kernels of the default level may saturate)."""
    import onnxruntime as ort

    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    so = ort.SessionOptions()
    if basic:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def ort_run(model, feeds: dict[str, np.ndarray], *, basic: bool = False) -> list[np.ndarray]:
    return ort_session(model, basic=basic).run(None, feeds)


def ort_quantize_static(model: onnx.ModelProto | str | Path, calibration: list[dict[str, np.ndarray]], *,
                        per_channel: bool = True, symmetric_activations: bool = True,
                        preprocess: bool = True, reduce_range: bool = False, defaults: bool = False) -> onnx.ModelProto:
    """QDQ int8 model (int8 activations and weights) from onnxruntime's static quantizer.

    ``preprocess`` runs ORT's ``quant_pre_process`` first (folds BatchNorm into Conv). ``defaults``: call
    ``quantize_static`` with its DEFAULT arguments (only ``per_channel`` given: uint8 asymmetric activations),
    as a user does; ``symmetric_activations`` and ``reduce_range`` are then not used.
    """
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(calibration)

        def get_next(self):
            return next(self._it, None)

    with tempfile.TemporaryDirectory() as d:
        src, pre, dst = Path(d) / "float.onnx", Path(d) / "pre.onnx", Path(d) / "qdq.onnx"
        onnx.save(model if isinstance(model, onnx.ModelProto) else onnx.load(str(model)), str(src))
        if preprocess:
            quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
            src = pre
        if defaults:
            quantize_static(str(src), str(dst), _Reader(), per_channel=per_channel)
        else:
            quantize_static(str(src), str(dst), _Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=per_channel,
                            reduce_range=reduce_range, extra_options={"ActivationSymmetric": symmetric_activations})
        return onnx.load(str(dst))
