"""mirrorlab against TensorFlow 2.21's recorded results (``golden/*.json``): every case of ``cases.py`` in
every setup, without TensorFlow.

A = ``ml.MirroredStrategy`` over 2 CPUs, B = ``ml.MultiWorkerMirroredStrategy()`` without a cluster,
C = the same case program on ``SimCluster(workers=2)``, Cchief = ``SimCluster(workers=2, chief=True)``.
Re-record the golden files with ``record_golden.py`` when a case changes.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from .adapters import MirrorlabApi
from .cases import CASES, SETUPS, recorded_cases
from .harness import differences, load_golden, worker_differences
from .known_differences import case_params

API = MirrorlabApi()


@functools.cache
def golden(setup: str) -> dict[str, list[dict[str, Any]]]:
    """The recorded TF results of ``setup`` (read once)."""
    return load_golden(setup)


@pytest.mark.parametrize(("setup", "name"), case_params(SETUPS))
def test_case_matches_tensorflow(setup: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """mirrorlab's result of the case equals TF's recorded one on every worker."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert name in golden(setup), f"no TF result for {name} in golden/{setup}.json: run record_golden.py"
    problems = worker_differences(golden(setup)[name], API.run_setup(CASES[name], setup), CASES[name])
    assert not problems, f"{setup} {name} differs from TF 2.21:\n" + "\n".join(problems)


@pytest.mark.parametrize(("expected", "actual", "found"), [
    ({"dtype": "float32", "shape": [], "value": 1.0}, {"dtype": "float32", "shape": [], "value": 1.0000005}, False),
    ({"dtype": "float32", "shape": [], "value": 1.0}, {"dtype": "float32", "shape": [], "value": 1.00001}, True),
    ({"dtype": "int32", "shape": [1], "value": [3]}, {"dtype": "int64", "shape": [1], "value": [3]}, True),
    ({"dtype": "float32", "shape": [], "value": "nan"}, {"dtype": "float32", "shape": [], "value": "nan"}, False),
    ({"tuple": [1, 2]}, [1, 2], True),
    (3.0, 3, True),
    ({"error": "ValueError", "message": "a"}, {"error": "ValueError", "message": "b"}, True),
    ({"error": "ValueError", "message": "in user code:"}, {"error": "ValueError", "message": "b"}, False),
    ({"error": "ValueError", "message": "a"}, {"error": "TypeError", "message": "a"}, True),
])
def test_comparison_rules(expected: Any, actual: Any, found: bool) -> None:
    """Floats within rtol match; dtypes, containers, Python types, error classes and messages must match."""
    assert bool(differences(expected, actual)) == found


@pytest.mark.parametrize("setup", SETUPS)
def test_golden_file_holds_every_recorded_case(setup: str) -> None:
    """The golden file was recorded from the current case table (no missing or stale cases)."""
    assert set(golden(setup)) == set(recorded_cases(setup)), "golden files are stale: run record_golden.py"
