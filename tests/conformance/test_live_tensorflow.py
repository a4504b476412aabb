"""The A and B cases run live on TensorFlow 2.21 and on mirrorlab, compared directly (no golden files).

Skipped unless ``import tensorflow`` works. TF gets 2 logical CPUs when this module's fixture first runs,
so no other TF code may have initialized the TF runtime in this process before.
"""

from __future__ import annotations

import pytest

from .adapters import MirrorlabApi, TfApi
from .cases import CASES, recorded_cases
from .fuzz_against_tf import AREAS
from .harness import load_golden, worker_differences
from .known_differences import case_params

pytest.importorskip("tensorflow")

pytestmark = pytest.mark.tensorflow

LOCAL_SETUPS = ("A", "B")


@pytest.fixture(scope="module")
def tf_api() -> TfApi:
    """TensorFlow with 2 logical CPUs; its strategies are shared by every case, as when recording."""
    return TfApi(logical_cpus=2)


@pytest.mark.parametrize(("setup", "name"), case_params(LOCAL_SETUPS))
def test_mirrorlab_matches_live_tensorflow(tf_api: TfApi, setup: str, name: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """mirrorlab's result of the case equals the one TF computes now."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    expected = tf_api.run_setup(CASES[name], setup)
    problems = worker_differences(expected, MirrorlabApi().run_setup(CASES[name], setup), CASES[name])
    assert not problems, f"{setup} {name} differs from live TF {tf_api.version}:\n" + "\n".join(problems)


@pytest.mark.parametrize("setup", LOCAL_SETUPS)
def test_golden_files_match_live_tensorflow(tf_api: TfApi, setup: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded golden results are what TF returns now (else re-record them)."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    golden = load_golden(setup)
    problems = [f"{name}: {problem}" for name in recorded_cases(setup)
                for problem in worker_differences(golden[name], tf_api.run_setup(CASES[name], setup), CASES[name])]
    assert not problems, f"golden/{setup}.json is stale, run record_golden.py:\n" + "\n".join(problems)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_pipelines_match_live_tensorflow(tf_api: TfApi, seed: int) -> None:
    """Fresh random pipelines (other seeds than the recorded ones) give TF's elements and cardinalities."""
    import tensorflow as tf

    from mirrorlab.tf import data

    from .harness import differences
    from .pipeline_cases import pipeline_specs, run_spec

    problems = []
    for name, spec in pipeline_specs(count=150, seed=seed).items():
        expected = run_spec(tf.data, spec, lambda ds: ds.cardinality().numpy())
        found = differences(expected, run_spec(data, spec, lambda ds: ds.cardinality()))
        problems += [f"{name} {spec}: {p}" for p in found[:2]]
    assert not problems, "pipelines differ from live TF:\n" + "\n".join(problems[:20])


@pytest.mark.parametrize("area", sorted(AREAS))
def test_fuzzed_cases_match_live_tensorflow(tf_api: TfApi, area: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few cases of the differential fuzzer (fuzz_against_tf.py, which runs thousands by hand) agree with TF."""
    import random

    from .fuzz_against_tf import Fuzzer

    monkeypatch.delenv("TF_CONFIG", raising=False)
    fuzzer = Fuzzer(tf_api)
    problems = []
    for i in range(15):
        spec = AREAS[area].generate(random.Random(f"live:{area}:{i}"))
        for setup in ("A", "B"):
            problems += [f"[{setup}] {spec}: {p}" for p in fuzzer.compare(spec, setup)[:2]]
    assert not problems, "fuzzed cases differ from live TF:\n" + "\n".join(problems[:10])
