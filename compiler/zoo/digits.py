"""The digits demo: deterministic scikit-learn ``load_digits`` split and the shipped CNN path."""
from __future__ import annotations

from pathlib import Path

import numpy as np

DIGITS_SEED = 0
DIGITS_TEST_FRACTION = 0.25


def load_digits_split(seed: int = DIGITS_SEED, test_fraction: float = DIGITS_TEST_FRACTION):
    """Return ``(x_train, y_train, x_test, y_test)``; x is float32 (N, 1, 8, 8) in [0, 1], y int64.

    The split is a fixed-seed stratified shuffle, so every call returns the same arrays.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)
    return xtr, ytr, xte, yte


def digits_model_path() -> Path:
    """Path of the shipped ``digits_cnn.onnx`` (examples/digits/ in a source checkout)."""
    here = Path(__file__).resolve()
    for cand in (here.parents[2] / "examples" / "digits" / "digits_cnn.onnx", here.parent / "digits_cnn.onnx"):
        if cand.is_file():
            return cand
    raise FileNotFoundError("digits_cnn.onnx not found; run examples/digits/train_digits.py to create it")
