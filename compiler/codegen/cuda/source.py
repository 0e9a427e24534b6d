"""CUDA C source for the CPU-side elementwise, quantization and pooling kernels (static shapes).

Each generator returns ``(source, kernel_name)``; one thread per output element, launched
with any 1-D grid covering ``n`` threads (grid-stride loop). The arithmetic mirrors the LLVM
kernels (round-half-even quantization, int32 wrap-around, -inf/int-min padded max pooling).
No GPU exists on the build machines: these are compiled (nvcc -ptx) and assembled (ptxas), never run.
"""
from __future__ import annotations

import itertools

import numpy as np

_IDS = itertools.count()
CTYPES = {"int8": "signed char", "uint8": "unsigned char", "int32": "int", "float32": "float"}


def _ctype(dtype) -> str:
    name = np.dtype(dtype).name
    if name not in CTYPES:
        raise TypeError(f"CUDA codegen: unsupported dtype {name!r}; supported: {sorted(CTYPES)}")
    return CTYPES[name]


def _kernel(base: str, params: str, n: int, body: str) -> tuple[str, str]:
    name = f"vta_{base}_{next(_IDS)}"
    src = (f'extern "C" __global__ void {name}({params}) {{\n'
           f"  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {n}LL;"
           f" i += (long long)gridDim.x * blockDim.x) {{\n{body}\n  }}\n}}\n")
    return src, name


def relu_clip(dtype, n: int, lo: float | None = 0, hi: float | None = None) -> tuple[str, str]:
    """y = min(max(x, lo), hi) with absent bounds skipped (Relu is lo=0)."""
    t = _ctype(dtype)
    body = f"    {t} v = x[i];\n"
    if lo is not None:
        body += f"    if (v < ({t})({lo!r})) v = ({t})({lo!r});\n"
    if hi is not None:
        body += f"    if (v > ({t})({hi!r})) v = ({t})({hi!r});\n"
    return _kernel("clip", f"const {t}* __restrict__ x, {t}* __restrict__ y", n, body + "    y[i] = v;")


def binary(op: str, dtype, n: int) -> tuple[str, str]:
    """Same-shape Add/Sub/Mul (integers wrap: computed in unsigned arithmetic) or float Div."""
    sym = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}[op]
    t = _ctype(dtype)
    if t == "float":
        expr = f"x[i] {sym} y[i]"
    elif op == "Div":
        raise TypeError("CUDA codegen: integer Div (floor division) is not generated")
    else:
        expr = f"({t})((unsigned int)x[i] {sym} (unsigned int)y[i])"
    return _kernel(op.lower(), f"const {t}* __restrict__ x, const {t}* __restrict__ y, {t}* __restrict__ z", n,
                   f"    z[i] = {expr};")


def quantize(n: int, out_dtype="int8") -> tuple[str, str]:
    """Per-tensor QuantizeLinear: clamp(rint(x / scale) + zp) in float32 (rintf = round half even)."""
    t = _ctype(out_dtype)
    info = np.iinfo(out_dtype)
    body = (f"    float q = rintf(__fdiv_rn(x[i], scale[0])) + (float)zp[0];\n"
            f"    q = fminf(fmaxf(q, {float(info.min)!r}f), {float(info.max)!r}f);\n    y[i] = ({t})(int)q;")
    return _kernel("quantize", f"const float* __restrict__ x, const float* scale, const {t}* zp, {t}* __restrict__ y", n, body)


def dequantize(n: int, in_dtype="int8") -> tuple[str, str]:
    """Per-tensor DequantizeLinear: (float)(x - zp) * scale."""
    t = _ctype(in_dtype)
    body = "    y[i] = __fmul_rn((float)((long long)x[i] - (long long)zp[0]), scale[0]);"
    return _kernel("dequantize", f"const {t}* __restrict__ x, const float* scale, const {t}* zp, float* __restrict__ y",
                   n, body)


def maxpool(dtype, shape: tuple[int, int, int, int], kernel: tuple[int, int], strides: tuple[int, int],
            pads: tuple[int, int], out_hw: tuple[int, int]) -> tuple[str, str]:
    """NCHW max pooling; windows clipped to the input (padding never wins: it is the type's minimum)."""
    t = _ctype(dtype)
    n, c, h, w = shape
    oh, ow = out_hw
    low = "-__int_as_float(0x7f800000)" if t == "float" else str(np.iinfo(dtype).min)
    body = (f"    long long ox = i % {ow}, oy = (i / {ow}) % {oh}, nc = i / {oh * ow};\n"
            f"    {t} m = ({t})({low});\n"
            f"    for (int ky = 0; ky < {kernel[0]}; ++ky) {{\n"
            f"      long long iy = oy * {strides[0]} - {pads[0]} + ky;\n"
            f"      if (iy < 0 || iy >= {h}) continue;\n"
            f"      for (int kx = 0; kx < {kernel[1]}; ++kx) {{\n"
            f"        long long ix = ox * {strides[1]} - {pads[1]} + kx;\n"
            f"        if (ix < 0 || ix >= {w}) continue;\n"
            f"        {t} v = x[(nc * {h} + iy) * {w} + ix];\n"
            f"        if (v > m || v != v) m = v;\n      }}\n    }}\n    y[i] = m;")
    return _kernel("maxpool", f"const {t}* __restrict__ x, {t}* __restrict__ y", n * c * oh * ow, body)


def global_avg_pool(dtype, nc: int, spatial: int) -> tuple[str, str]:
    """Mean over ``spatial`` elements per (n, c), accumulated in double, divided in float32."""
    t = _ctype(dtype)
    body = (f"    double s = 0.0;\n    for (long long j = 0; j < {spatial}; ++j) s += (double)x[i * {spatial} + j];\n"
            f"    y[i] = __fdiv_rn((float)s, {float(spatial)!r}f);")
    return _kernel("gap", f"const {t}* __restrict__ x, float* __restrict__ y", nc, body)
