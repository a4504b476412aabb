"""mirrorlab.keras against Keras 3 on TensorFlow 2.21's recorded results (``golden/keras.json``), without
TensorFlow: losses (reductions, weights, dtypes, distribution scaling), metrics and ``fit`` on 2 replicas give
TF's values, shapes and errors. Re-record with record_keras_golden.py."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import mirrorlab.tf as ml

from .harness import differences, load_golden
from .keras_cases import KERAS_CASES, KerasEnv, run_case

# Deliberate differences (skipped): case name -> why mirrorlab differs from TF on purpose.
DELIBERATE_DIFFERENCES: dict[str, str] = {}
# Unfixed differences (strict xfail): case name -> the difference (mirrorlab vs TF).
KNOWN_DIFFERENCES: dict[str, str] = {}


@functools.cache
def golden() -> dict[str, list[dict[str, Any]]]:
    return load_golden("keras")


def _params() -> list:
    marks = {**{name: pytest.mark.skip(reason=why) for name, why in DELIBERATE_DIFFERENCES.items()},
             **{name: pytest.mark.xfail(strict=True, reason=why) for name, why in KNOWN_DIFFERENCES.items()}}
    return [pytest.param(name, marks=marks[name]) if name in marks else name for name in KERAS_CASES]


@pytest.mark.parametrize("name", _params())
def test_keras_case_matches_tensorflow(name: str) -> None:
    """The case's values, dtypes, shapes and errors equal TF's."""
    env = KerasEnv(ml.keras, ml.data, ml.MirroredStrategy(["/cpu:0", "/cpu:1"]), ml.get_replica_context, ml.train, ml)
    problems = differences(golden()[name][0], run_case(name, env))
    assert not problems, f"{name} differs from TF 2.21:\n" + "\n".join(problems[:8])


def test_golden_file_holds_every_case() -> None:
    """The golden file was recorded from the current case table."""
    assert set(golden()) == set(KERAS_CASES), "golden/keras.json is stale: run record_keras_golden.py"
