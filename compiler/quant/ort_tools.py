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

    ``preprocess`` runs ORT's ``quant_pre_process`` first (folds BatchNorm into Conv). Per-channel weights
    need opset 13 (DequantizeLinear's ``axis``): older models are converted to opset 13 first (onnxruntime
    would otherwise write an invalid model). ``defaults``: call
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
        proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
        opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
        if per_channel and opset is not None and opset < 13:
            from onnx import version_converter

            proto = version_converter.convert_version(proto, 13)
            proto.ir_version = max(proto.ir_version, 7)
        onnx.save(proto, str(src))
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
