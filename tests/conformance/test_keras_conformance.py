"""mirrorlab.tf.keras against Keras 3 on TensorFlow 2.21's recorded results (``golden/keras.json``), without
TensorFlow: losses (reductions, weights, dtypes, distribution scaling), metrics and ``fit`` on 2 replicas give
TF's values, shapes and errors. Re-record with record_keras_golden.py."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import mirrorlab.tf as ml

from .harness import PYTHON_FLOAT_RTOL, RTOL, differences, load_golden
from .keras_cases import KERAS_CASES, KerasEnv, run_case

# Deliberate differences (skipped): case name -> why mirrorlab differs from TF on purpose.
DELIBERATE_DIFFERENCES: dict[str, str] = {}
# Unfixed differences (strict xfail): case name -> the difference (mirrorlab vs TF).
KNOWN_DIFFERENCES: dict[str, str] = {}
# Cases whose recorded Python floats (``evaluate(return_dict=True)``: float32 metrics as Python floats) sit at the
# last bit of float32: case name -> why, compared to float32's relative 1e-6 instead of Python floats' 1e-12.
FLOAT32_LAST_BIT: dict[str, str] = {
    "fit_sample_weight": "evaluate_unweighted: TF's own loss and ce, the same mean, differ by one float32 ulp "
                         "(1.5465789 vs 1.546579); mirrorlab's CPU-independent exp/log give 1.5465788 for both, "
                         "NumPy's AVX-512 float32 exp/log happened to give TF's loss",
}


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
    python_rtol = RTOL["float32"] if name in FLOAT32_LAST_BIT else PYTHON_FLOAT_RTOL
    problems = differences(golden()[name][0], run_case(name, env), python_rtol=python_rtol)
    assert not problems, f"{name} differs from TF 2.21:\n" + "\n".join(problems[:8])


def test_golden_file_holds_every_case() -> None:
    """The golden file was recorded from the current case table."""
    assert set(golden()) == set(KERAS_CASES), "golden/keras.json is stale: run record_keras_golden.py"
