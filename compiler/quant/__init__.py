"""int8 quantization: QDQ lowering to integer ops, built-in calibration, Requant parameter choice."""
from compiler.quant.calibrate import Calibration, insert_qdq
from compiler.quant.qdq_lower import lower_qdq
from compiler.quant.requant_params import acc_bound, choose_requant

__all__ = ["Calibration", "insert_qdq", "lower_qdq", "choose_requant", "acc_bound"]
