"""Auto-tuning of the accelerator kernels and the llvm target's conv schedules (:mod:`.llvm_conv`): search spaces, measurement, tuners, cost model, records.

Nothing below this package imports it; ``compiler.executor.build(..., tuning_log=FILE)`` applies a log.
"""
from compiler.autotune.apply import apply_tuning_log, tuned_knobs
from compiler.autotune.llvm_conv import CpuConvSpace, LlvmConvTask, LlvmMeasurer, logged_faster, use_knobs
from compiler.autotune.measure import LocalMeasurer, RayMeasurer, Result, measure
from compiler.autotune.network import TUNERS, make_tuner, progress_printer, tune_tasks
from compiler.autotune.records import Record, TuningLog, TuningLogWarning, best_records, load_records
from compiler.autotune.space import ConvSpace
from compiler.autotune.task import Task, extract_tasks
from compiler.autotune.tuners import GridTuner, RandomTuner, Tuner

__all__ = ["apply_tuning_log", "tuned_knobs", "LocalMeasurer", "RayMeasurer", "Result", "measure", "TUNERS",
           "make_tuner", "progress_printer", "tune_tasks", "Record", "TuningLog", "TuningLogWarning", "best_records",
           "load_records", "ConvSpace", "Task", "extract_tasks", "GridTuner", "RandomTuner", "Tuner",
           "CpuConvSpace", "LlvmConvTask", "LlvmMeasurer", "logged_faster", "use_knobs"]
