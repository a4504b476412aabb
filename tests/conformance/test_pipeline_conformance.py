"""mirrorlab.tf.data against TensorFlow 2.21's recorded pipeline results (``golden/pipelines.json``), without
TensorFlow: the same random pipelines (pipeline_cases.py) give the same elements, in the same order, on every
iteration (seeded shuffles included), and the same cardinality. Re-record with record_pipeline_golden.py."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from mirrorlab.tf import data

from .harness import differences, load_golden
from .pipeline_cases import all_specs, run_spec

SPECS = all_specs()


@functools.cache
def golden() -> dict[str, list[dict[str, Any]]]:
    return load_golden("pipelines")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_pipeline_matches_tensorflow(name: str) -> None:
    """Every element of every iteration, and the cardinality, equal TF's."""
    expected = golden()[name][0]
    actual = run_spec(data, SPECS[name], lambda ds: ds.cardinality())
    problems = differences(expected, actual)
    assert not problems, f"{name} {SPECS[name]} differs from TF 2.21:\n" + "\n".join(problems[:5])


def test_golden_file_holds_every_case() -> None:
    """The golden file was recorded from the current case table."""
    assert set(golden()) == set(SPECS), "golden/pipelines.json is stale: run record_pipeline_golden.py"
