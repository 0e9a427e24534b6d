"""``vta demo``: the digits CNN quantized and run on the simulator (``make demo``)."""
from __future__ import annotations

import argparse
import importlib.util
import sys
from types import ModuleType


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the demo: the digits CNN, int8, on the simulator, beside onnxruntime")
    p.add_argument("--config", default="pynq-z1", help="hardware preset or JSON file (default pynq-z1)")
    p.add_argument("--target", default=None, help="accelerator backend (default: sim when registered, else ref)")
    p.add_argument("--images", type=int, default=None, metavar="N",
                   help="run only the first N test images (default: the whole 450-image test split)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=run)


def load_demo_module() -> ModuleType:
    """Import examples/digits/demo.py (it sits beside the shipped digits_cnn.onnx)."""
    from compiler.zoo.digits import digits_model_path

    path = digits_model_path().with_name("demo.py")
    if not path.is_file():
        raise FileNotFoundError(f"demo script not found: {path} (run vta demo from a source checkout)")
    if "vta_digits_demo" in sys.modules:
        return sys.modules["vta_digits_demo"]
    spec = importlib.util.spec_from_file_location("vta_digits_demo", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vta_digits_demo"] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod


def run(args: argparse.Namespace) -> int:
    demo = load_demo_module()
    demo.report(demo.run_demo(args.config, args.target, progress=not args.no_progress, images=args.images))
    return 0
