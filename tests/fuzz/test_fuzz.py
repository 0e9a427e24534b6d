"""Property: every fuzzed input ends fine or in one of the project's documented errors; never anything else, never a hang.

Bounded so the suite stays fast; ``benchmarks/fuzz.py --seconds N`` runs the same targets for longer.
The hypothesis deadline is the hang detector: one case taking longer fails the test.
"""
from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import ALLOWED, MUTATIONS, TARGETS, mutated_model, run_model

CASES = {"onnx": 80, "vtaprog": 150, "vtamod": 120, "decode": 300, "config": 200, "tunelog": 300, "llvmlog": 300,
         "cudalog": 300, "declaration": 300}
HANG_SECONDS = {"onnx": 20, "vtaprog": 10, "vtamod": 20, "decode": 10, "config": 5, "tunelog": 5, "llvmlog": 5,
                "cudalog": 5, "declaration": 5}


def _property(target: str):
    fn, allowed = TARGETS[target], ALLOWED[target]

    @settings(max_examples=CASES[target], deadline=timedelta(seconds=HANG_SECONDS[target]), derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], database=None)
    @given(st.binary(min_size=8, max_size=96))
    def check(data: bytes) -> None:
        try:
            fn(data)
        except allowed:
            pass
    return check


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target_raises_only_documented_errors(target):
    _property(target)()


@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_each_mutation_class_raises_only_documented_errors(kind):
    @settings(max_examples=8, deadline=timedelta(seconds=HANG_SECONDS["onnx"]), derandomize=True,
              suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(st.binary(min_size=8, max_size=64))
    def check(data: bytes) -> None:
        model, _ = mutated_model(data, kind)
        try:
            run_model(model)
        except ALLOWED["onnx"]:
            pass
    check()
