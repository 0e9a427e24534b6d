"""ONNX tensor element types as numpy dtypes, without importing onnx (the runtime runs on numpy alone)."""
from __future__ import annotations

import numpy as np

#: ``onnx.TensorProto.DataType`` values with a numpy equivalent (the table onnx.helper uses)
ONNX_NP_DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
    14: np.dtype(np.complex64), 15: np.dtype(np.complex128),
}


def onnx_np_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype of ONNX element type ``elem_type``. The table covers numpy's own types; the others (bfloat16,
    float8, int4, ...: ml_dtypes types) are onnx's own answer where onnx is installed, else a ValueError."""
    dt = ONNX_NP_DTYPES.get(int(elem_type))
    if dt is not None:
        return dt
    try:
        from onnx import helper  # with the compiler's install: exactly onnx's mapping (ml_dtypes types)
    except ImportError:
        raise ValueError(f"ONNX element type {elem_type} needs onnx/ml_dtypes; numpy types here: "
                         f"{sorted(ONNX_NP_DTYPES)}") from None
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(elem_type)))
