"""Helpers shared by the compiler tests."""
from __future__ import annotations

import numpy as np


def cosine(a, b) -> float:
    """Cosine similarity of two arrays (flattened, in float64)."""
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
