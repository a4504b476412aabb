"""mirrorlab's tensor functions (``tf.identity``, ``tf.reshape``, ``tf.reduce_mean``...) against TensorFlow 2.21's
recorded results (``golden/ops.json``), without TensorFlow: values, dtypes, shapes, error classes and texts.
Re-record with record_ops_golden.py."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

import mirrorlab.tf as ml

from .harness import load_golden
from .ops_cases import OPS_EXPRESSIONS, evaluate

# Deliberate differences (skipped): expression -> why mirrorlab differs from TF on purpose.
DELIBERATE_DIFFERENCES: dict[str, str] = {
    "tf.stack([np.array([1]), np.array([1.])])": "TF stacks NumPy int64 and float64 arrays into float32; mirrorlab "
                                                  "keeps NumPy's common dtype (float64)",
    "tf.is_tensor(np.array(1.))": "mirrorlab's tensors are NumPy arrays, so is_tensor cannot tell a NumPy array from a "
                                  "tensor: it says True for both (TF: False for NumPy arrays)",
}
# Results of TF's floating-point approximations (Eigen's fast tanh, erf and erfc, also in their gradients), which
# mirrorlab computes exactly (rounded to the dtype): compared to a relative 1e-6, and where a difference of ones cancels
# (1 + tanh near -1 in the approximate gelu) to an absolute 1e-6.
APPROXIMATE = {
    **dict.fromkeys(("tf.tanh(0.5)", "gradient(tf, 'tf.reduce_sum(tf.tanh(v) - tf.nn.relu(v))', [0.5, -2.0])"), 0.0),
    **dict.fromkeys((e for e in OPS_EXPRESSIONS if re.search(r"\b(erfc?|gelu|log_sigmoid)\(", e)), 1e-6)}


@functools.cache
def golden() -> dict[str, list[dict[str, Any]]]:
    return load_golden("ops")


def _params() -> list:
    return [pytest.param(e, marks=pytest.mark.skip(reason=DELIBERATE_DIFFERENCES[e])) if e in DELIBERATE_DIFFERENCES
            else e for e in OPS_EXPRESSIONS]


@pytest.fixture(autouse=True)
def _no_global_seed_afterwards() -> Any:
    """Some expressions set TF's global seed (each sets its own); the tests after them expect none."""
    yield
    ml.random.set_seed(None)


@pytest.mark.parametrize("expression", _params())
def test_tensor_function_matches_tensorflow(expression: str) -> None:
    expected, actual = golden()[expression][0], evaluate(ml, expression)
    if expression in APPROXIMATE and "dtype" in expected:
        assert (actual["dtype"], actual["shape"]) == (expected["dtype"], expected["shape"])
        assert np.allclose(actual["value"], expected["value"], rtol=1e-6, atol=APPROXIMATE[expression])
        return
    assert actual == expected


def test_every_expression_is_recorded() -> None:
    assert set(golden()) == set(OPS_EXPRESSIONS)
