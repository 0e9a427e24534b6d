"""Whole models on CPU/GPU targets from the operator library: ``build(model, target="llvm" | "cuda")``."""
from compiler.targets.build import MODEL_TARGETS, build_for_target

__all__ = ["MODEL_TARGETS", "build_for_target"]
