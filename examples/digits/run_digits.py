"""Run the digits CNN as int8 on an accelerator backend and compare with onnxruntime.

    python examples/digits/run_digits.py [--target ref|sim] [--builtin]
"""
from __future__ import annotations

import argparse
import json
import logging


from compiler.executor import build
from compiler.quant.ort_tools import ort_quantize_static, ort_run
from compiler.zoo.digits import digits_model_path, load_digits_split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="ref")
    ap.add_argument("--builtin", action="store_true", help="use the built-in quantizer instead of onnxruntime's")
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    xtr, _, xte, yte = load_digits_split()
    path = digits_model_path()
    if args.builtin:
        model, calib = path, xtr[:256]
    else:
        model, calib = ort_quantize_static(path, [{"input": xtr[i:i + 1]} for i in range(0, 400, 4)], reduce_range=True), None
    m = build(model, target=args.target, calibration=calib, input_shapes={"input": xte.shape})
    ours = m(input=xte).argmax(1)
    res = {"target": args.target, "int8_accuracy": float((ours == yte).mean()),
           "float_onnxruntime_accuracy": float((ort_run(path, {"input": xte})[0].argmax(1) == yte).mean())}
    if not args.builtin:
        theirs = ort_run(model, {"input": xte})[0].argmax(1)
        res.update(ort_int8_accuracy=float((theirs == yte).mean()), identical_predictions=float((ours == theirs).mean()))
    res["profile"] = m.profile_summary()
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
