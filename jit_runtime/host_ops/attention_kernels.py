"""Numpy kernels of ONNX's fused transformer operators (opset 23+): Attention (MHA, GQA, MQA; KV cache; causal,
windowed and padded masks; softcap) and RotaryEmbedding. Computed in float32 (float64 for double inputs), results
in the inputs' type. Registered into :data:`jit_runtime.host_ops.registry.KERNELS`.
"""
from __future__ import annotations

import numpy as np

from jit_runtime.host_ops.registry import kernel

_PRECISION = {1: np.float32, 10: np.float16, 11: np.float64}  # softmax_precision -> numpy type (16: bfloat16)


def _softmax_type(code: int) -> np.dtype:
    if code == 16:
        import ml_dtypes  # onnx's dependency: numpy's bfloat16

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_PRECISION[code])


def _work_type(*xs) -> np.dtype:
    return np.dtype(np.float64) if any(np.asarray(x).dtype == np.float64 for x in xs) else np.dtype(np.float32)


def _heads(x: np.ndarray, n: int) -> np.ndarray:
    """(batch, seq, n * size) -> (batch, n, seq, size)."""
    b, s, h = x.shape
    return x.reshape(b, s, n, h // n).transpose(0, 2, 1, 3)


def allowed_keys(a: dict, b: int, sq: int, skv: int, past: int, nonpad) -> np.ndarray:
    """(batch, 1, sq, skv) keys each query may attend: causal (bottom-right, offset-aware), the left/right windows
    around the query's absolute position and the non-padding keys."""
    if nonpad is not None and past == 0:
        offset = np.asarray(nonpad, np.int64).reshape(b, 1, 1, 1) - sq
    else:
        offset = np.full((b, 1, 1, 1), past, np.int64)
    pos = np.arange(sq).reshape(1, 1, sq, 1) + offset  # the query's absolute position
    key = np.arange(skv).reshape(1, 1, 1, skv)
    ok = np.ones((b, 1, sq, skv), bool)
    if a.get("is_causal", 0):
        ok &= key <= pos
    left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    if left >= 0:
        ok &= key >= pos - left
    if right >= 0:
        ok &= key <= pos + right
    if nonpad is not None:
        ok &= key < np.asarray(nonpad, np.int64).reshape(b, 1, 1, 1)
    return ok


@kernel("Attention", n_outputs=True)
def attention(a, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, n_outputs: int = 1):
    """``softmax(softcap(Q K^T * scale) + bias) V`` with ONNX's masking rules; outputs Y, present key/value (the
    past cache with the new keys/values appended) and the mode's QK tensor. A query row with no allowed key gives
    zeros (Y and the mode-3 probabilities), not NaN."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    out_type = q.dtype
    three_d = q.ndim == 3
    if three_d:
        hq, hkv = int(a["q_num_heads"]), int(a["kv_num_heads"])
        q, k, v = _heads(q, hq), _heads(k, hkv), _heads(v, hkv)
    if past_key is not None:
        k = np.concatenate([np.asarray(past_key).astype(k.dtype), k], axis=2)
        v = np.concatenate([np.asarray(past_value).astype(v.dtype), v], axis=2)
    present_k, present_v = k, v
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    past = 0 if past_key is None else np.asarray(past_key).shape[2]
    wt = _work_type(q, k, v)
    scale = a.get("scale")
    root = np.sqrt(wt.type(1.0 / np.sqrt(d) if scale is None else scale))
    qf = q.astype(wt) * root
    kf = np.repeat(k.astype(wt) * root, hq // hkv, axis=1)
    vf = np.repeat(v.astype(wt), hq // hkv, axis=1)
    qk = qf @ kf.transpose(0, 1, 3, 2)
    logits = qk
    cap = float(a.get("softcap", 0.0))
    if cap > 0:
        logits = cap * np.tanh(logits / cap)
    capped = logits
    ok = allowed_keys(a, b, sq, skv, past, nonpad_kv_seqlen)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.shape[-1] < skv:  # padded to the total length with -inf (bool: not allowed)
            width = [(0, 0)] * (m.ndim - 1) + [(0, skv - m.shape[-1])]
            m = np.pad(m, width, constant_values=False if m.dtype == bool else -np.inf)
        if m.dtype == bool:
            ok = ok & m
        else:
            logits = logits + m.astype(wt)
    logits = np.where(ok, logits, -np.inf).astype(wt)
    biased = logits
    sp = a.get("softmax_precision")
    if sp is not None:
        logits = logits.astype(_softmax_type(int(sp))).astype(wt)
    top = logits.max(axis=-1, keepdims=True)
    dead = ~np.isfinite(top)  # a row with no allowed key (or all -inf)
    e = np.exp(logits - np.where(dead, 0, top))
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        probs = np.where(dead, 0, e / np.where(total > 0, total, 1))
    y = probs @ vf
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    mode = int(a.get("qk_matmul_output_mode", 0))
    qk_out = (qk, capped, biased, probs)[mode]
    outs = (y.astype(out_type), present_k.astype(out_type), present_v.astype(out_type), qk_out.astype(out_type))
    return outs[:max(n_outputs, 1)] if n_outputs > 1 else outs[0]


@kernel("RotaryEmbedding")
def rotary_embedding(a, x, cos_cache, sin_cache, position_ids=None):
    """Rotate the first ``rotary_embedding_dim`` (default: all) features of each head by the cached angles of each
    token's position: pairs (i, i + dim/2), or adjacent pairs with ``interleaved=1``. ``x`` is (batch, heads, seq,
    size) or (batch, seq, hidden) with ``num_heads``; caches (max_pos, dim/2) indexed by ``position_ids``, or
    (batch, seq, dim/2) without them."""
    x = np.asarray(x)
    out_type = x.dtype
    wt = _work_type(x)
    three_d = x.ndim == 3
    xs = (_heads(x, int(a["num_heads"])) if three_d else x).astype(wt)  # (batch, heads, seq, size)
    size = xs.shape[-1]
    rot = int(a.get("rotary_embedding_dim", 0)) or size
    cos, sin = np.asarray(cos_cache).astype(wt), np.asarray(sin_cache).astype(wt)
    if position_ids is not None:
        pid = np.asarray(position_ids, np.int64)
        cos, sin = cos[pid], sin[pid]  # (b, s, rot/2)
    cos, sin = cos[:, None, :, : rot // 2], sin[:, None, :, : rot // 2]
    part, rest = xs[..., :rot], xs[..., rot:]
    if a.get("interleaved", 0):
        x1, x2 = part[..., 0::2], part[..., 1::2]
    else:
        x1, x2 = part[..., : rot // 2], part[..., rot // 2:]
    r1, r2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    if a.get("interleaved", 0):
        part = np.stack([r1, r2], axis=-1).reshape(part.shape)
    else:
        part = np.concatenate([r1, r2], axis=-1)
    y = np.concatenate([part, rest], axis=-1)
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(x.shape)
    return y.astype(out_type)
