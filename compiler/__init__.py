"""vta-stack compiler: tensor expressions, schedules, lowering, codegen, graph IR, ONNX frontend."""
