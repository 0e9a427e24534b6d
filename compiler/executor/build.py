"""``build``: compile a model for a config and an accelerator target."""
from __future__ import annotations

from pathlib import Path

import onnx

from compiler.graph.cpu_backend import CpuBackend
from compiler.executor.config import resolve_config
from compiler.executor.module import Module
from compiler.executor.pipeline import compile_model
from compiler.executor.registry import available_accel_backends, create_accel_backend, create_cpu_backend
from compiler.frontend.onnx_import import check_model_support, load_model
from compiler.graph.offload import warn_host_fallbacks, warn_lossy_weights


def build(model: str | Path | onnx.ModelProto, config=None, target: str = "sim", *, calibration=None,
          quantize: bool | None = None, input_shapes: dict[str, tuple[int, ...]] | None = None,
          cpu: CpuBackend | str | None = None, progress: bool | None = None, fuse_residual: bool = True,
          target_options: dict | None = None, tuning_log: str | Path | None = None) -> Module:
    """Compile ``model`` and bind it to accelerator backend ``target`` ("ref", "sim", ...), or compile the
    whole model for a CPU/GPU target (``"llvm"``, ``"cuda"``: :mod:`compiler.executor.targets`; float models run
    in float32 unless ``calibration`` is given, QDQ models in int8; ``cpu``/``target_options`` do not apply there,
    ``tuning_log`` does: a log of ``vta tune --target llvm|cuda``).

    ``config``: an ``isa.HwConfig``, a preset name or None (batch 1, 16x16 blocks).
    ``calibration``: data for quantizing float models (array or list of feed dicts).
    ``input_shapes``: fixes symbolic/override input shapes, e.g. ``{"input": (32, 1, 8, 8)}``.
    ``cpu``: the backend of non-accelerator ops: ``"numpy"`` (default), ``"llvm"`` or a CpuBackend object.
    ``fuse_residual``: run quantized residual Adds (+ Relu) in the producing conv's accelerator epilogue
    (``compiler.graph.residual_fuse``); False keeps them as host ``QAdd`` ops.
    ``target_options``: passed to the target's backend, e.g. ``{"bitstream": "vta.bit"}`` for ``target="pynq"``
    (on the board; ``"pynq": PynqShim(...)`` runs the same driver on the RTL).
    ``tuning_log``: a log written by ``vta tune`` / ``compiler.autotune``: each task uses its best record's
    knobs; tasks without a usable record use the analytic choice (a ``TuningLogWarning`` says which). On
    ``target="llvm"`` the float convs' schedule knobs, each kept only where it times faster than the library's
    default at build time, alone and then in the model (:mod:`compiler.executor.llvm_log`); on ``target="cuda"``
    the float convs' GPU schedule knobs, each kept only where it runs faster than the default on this device at
    build time (:mod:`compiler.autotune.cuda_conv`).
    """
    if tuning_log is not None and not Path(tuning_log).is_file():
        raise FileNotFoundError(f"tuning log {tuning_log} does not exist")
    # shapes folded, then unsupported operators rejected before any work (once: the pipeline is told so)
    model = check_model_support(load_model(model), input_shapes)
    cfg = resolve_config(config)
    from compiler.executor.targets import MODEL_TARGETS, build_for_target

    if target in MODEL_TARGETS:
        extra = [k for k, v in (("cpu", cpu), ("target_options", target_options)) if v]
        if extra:
            raise ValueError(f"target {target!r} compiles the whole model with the operator library; {extra} apply "
                             f"only to accelerator targets ({', '.join(available_accel_backends())})")
        return build_for_target(model, cfg, target, calibration=calibration, quantize=quantize,
                                input_shapes=input_shapes, progress=progress, checked=True, tuning_log=tuning_log)
    backend = create_accel_backend(target, cfg, **(target_options or {}))  # fail fast on unknown targets
    cpu = create_cpu_backend(cpu)
    compiled = compile_model(model, cfg, calibration=calibration, quantize=quantize, input_shapes=input_shapes,
                             progress=progress, fuse_residual=fuse_residual, checked=True)
    if tuning_log is not None:
        from compiler.autotune.apply import apply_tuning_log

        apply_tuning_log(backend, compiled, tuning_log)
    if quantize is not False:  # one warning naming the layers that fall back to the host, and why
        warn_host_fallbacks(compiled.graph)
        warn_lossy_weights(compiled.graph)
    return Module(compiled, backend, cpu, progress)
