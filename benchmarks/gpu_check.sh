#!/usr/bin/env bash
# The cuda target's checks for a session that is lent a GPU machine, as one prepared command (docs/compiler.md):
# the GPU's name and driver, benchmarks/bench_gpu_target.py on ResNet-18 and MobileNetV2 first (device, fp32
# error, int8 mismatches, cuda_ms next to onnxruntime's CPU provider, the device's time per node), then the cuda
# tests (JOBS pytest workers, default 8; the GPU-only ones run for real there; the others check the loop IR on the
# CPU and the emulated device). Each step has its own time limit (BENCH_S, TEST_S, TUNE_S seconds) so one that
# hangs leaves the others' results under $OUT. Run from
# the repository root:
#     bash benchmarks/gpu_check.sh            # results also under $OUT (default /tmp/gpu_check)
# PYTHON picks the interpreter (default python3: on the lent machines, the image's, which has numpy, onnx,
# onnxruntime, llvmlite and cuda-bindings); REPEAT the timed runs per model (default 20). Last, a short
# `vta tune --target cuda` of the full ResNet-18 (its 17 conv and pool tasks timed on the GPU, TRIALS a task,
# default 8; 0 skips it; the tool prints the model's time before and after) with TUNER (default xgb where xgboost
# imports, else random: the H200 image has no xgboost; carry the xgboost-cpu wheel for Python 3.12 as the device
# README describes), then bench_gpu_target.py --fp32-only with that log (bench_tuned.txt): the acceptance figure.
set -u
OUT=${OUT:-/tmp/gpu_check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "no nvidia-smi") | tee "$OUT/gpu.txt"
timeout "${BENCH_S:-200}" $PY benchmarks/bench_gpu_target.py --models resnet18,mobilenet_v2 --repeat "${REPEAT:-20}" 2>&1 \
    | tee "$OUT/bench.txt"
timeout "${TEST_S:-150}" $PY -m pytest -q -p no:cacheprovider -n "${JOBS:-8}" \
    tests/compiler/backend/test_build_op_cuda.py tests/compiler/backend/test_cuda_*.py \
    tests/compiler/topi/test_conv2d_gpu.py tests/compiler/topi/test_gemm_gpu.py tests/compiler/topi/test_direct_pool_gpu.py \
    tests/compiler/plans/test_model_targets.py tests/compiler/plans/test_gpu_schedules.py 2>&1 \
    | tee "$OUT/tests.txt" | tail -25
TUNER=${TUNER:-$($PY -c "import xgboost" > /dev/null 2>&1 && echo xgb || echo random)}
if [ "${TRIALS:-8}" != 0 ]; then
    echo "tuner: $TUNER" | tee "$OUT/tuner.txt"
    MODEL_DIR=$(mktemp -d)  # the float model is ~47 MB: kept out of $OUT
    $PY -c "import onnx; from compiler.zoo import get_model; onnx.save(get_model('resnet18'), '$MODEL_DIR/resnet18.onnx')"
    timeout "${TUNE_S:-200}" $PY -c "from vta.cli import main; raise SystemExit(main())" tune "$MODEL_DIR/resnet18.onnx" \
        --target cuda --trials "${TRIALS:-8}" --tuner "$TUNER" --log "$OUT/cuda_tune.log" --json 2>&1 | tee "$OUT/tune.txt" | tail -6
    timeout "${BENCH_S:-200}" $PY benchmarks/bench_gpu_target.py --models resnet18 --fp32-only \
        --tuning-log "$OUT/cuda_tune.log" --repeat "${REPEAT:-20}" 2>&1 | tee "$OUT/bench_tuned.txt"
    rm -rf "$MODEL_DIR"
fi
