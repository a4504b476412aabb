"""mirrorlab's dataset distribution against TensorFlow 2.21's recorded results (``golden/datasets_A.json`` and
``golden/datasets_C.json``), without TensorFlow: every case of ``dataset_cases.py``, per worker.

A = ``ml.MirroredStrategy`` over 2 CPUs; C = the same case program on ``SimCluster(workers=2)`` (each simulated
worker creates its ``MultiWorkerMirroredStrategy()`` and runs the case). Re-record the golden files with
``record_dataset_golden.py`` when a case changes.

Error messages: TF prefixes kernel errors with ``{{function_node ...}} ``, which is dropped before comparing, and
prints protobufs (a NodeDef) in a form that varies by run, recorded as ``<proto>``: only the text before it must
match. A peer's aborted collective (``ABORTED_PEER_CASES``): TF's text after "Collective ops is aborted by: " names the
transport's symptom and depends on timing, mirrorlab's names the cause; only the class and the prefix must match.
Differences are listed in ``dataset_known_differences.py`` (deliberate ones: not compared; unfixed ones:
``xfail(strict=True)`` with the difference as the reason).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pytest
from mirrorlab.sim import SimCluster

from .adapters import MirrorlabApi, error_json
from .dataset_cases import DATASET_CASES, DATASET_SETUPS, DatasetCase, golden_name, recorded_dataset_cases, text_files
from .dataset_known_differences import ABORTED_PEER_CASES, dataset_case_params
from .harness import differences, golden_path, load_golden

API = MirrorlabApi()
text_files()  # create the input files now, before any simulated worker reads them

FUNCTION_NODE = re.compile(r"^\{\{function_node [^}]*\}\} ")
PROTO = "<proto>"
ABORTED = "Collective ops is aborted by: "

Result = dict[str, Any]


@functools.cache
def golden(setup: str) -> dict[str, list[Result]]:
    """The recorded TF results of ``setup`` (read once)."""
    return load_golden(golden_name(setup))


def run_mirrorlab(case: DatasetCase, setup: str) -> list[Result]:
    """mirrorlab's result of ``case`` on every worker of ``setup``. In C a worker whose strategy creation fails
    (another worker's pipeline error aborted the group first) gives ``{"strategy_creation": error}``."""
    if setup == "A":
        return [API.run_case(case, API.mirrored(2))]

    def program() -> Result:
        """One simulated worker: create the MWMS, then run the case."""
        try:
            strategy = API.mwms()
        except Exception as error:
            return {"strategy_creation": error_json(error)}
        return API.run_case(case, strategy)

    return [{"program": error_json(r)} if isinstance(r, BaseException) else r
            for r in SimCluster(workers=2, check_mirrors=False).run(program)]


def _is_error(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"error", "message"}


def aligned(expected: Any, actual: Any) -> tuple[Any, Any]:
    """``expected`` (TF) and ``actual`` (mirrorlab) with TF's message decorations handled (module docstring): an
    error, or the errors among the values of a case result (the only place where results hold errors)."""
    if _is_error(expected) and _is_error(actual):
        message = FUNCTION_NODE.sub("", expected["message"])
        actual_message = actual["message"]
        if message.endswith(PROTO) and actual_message.startswith(message[:-len(PROTO)]):
            actual_message = message
        return dict(expected, message=message), dict(actual, message=actual_message)
    if isinstance(expected, dict) and isinstance(actual, dict):
        expected, actual = dict(expected), dict(actual)
        for key in expected.keys() & actual.keys():
            if _is_error(expected[key]) and _is_error(actual[key]):
                expected[key], actual[key] = aligned(expected[key], actual[key])
    return expected, actual


def case_differences(setup: str, name: str) -> list[str]:
    """The differences between TF's recorded and mirrorlab's result of case ``name``, per compared worker."""
    expected = golden(setup)[name]
    actual = run_mirrorlab(DATASET_CASES[name], setup)
    if len(expected) != len(actual):
        return [f"TF ran {len(expected)} workers, mirrorlab {len(actual)}"]
    aborted = ABORTED_PEER_CASES.get((setup, name), ())
    return [f"worker {w}: {d}" for w, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in differences(*aligned(e, abort_text_as_tf(e, a) if w in aborted else a))]


def abort_text_as_tf(expected: Result, actual: Result) -> Result:
    """``actual`` with the text after ``ABORTED`` in its error replaced by TF's (timing-dependent, see
    ONE_FILE_REASON), when both errors are aborted collectives; otherwise unchanged, so a difference shows."""
    tf_error, ml_error = expected.get("error"), actual.get("error")
    if not (_is_error(tf_error) and _is_error(ml_error) and ABORTED in tf_error["message"]
            and ml_error["message"].startswith(ABORTED)):
        return actual
    return dict(actual, error=dict(ml_error, message=FUNCTION_NODE.sub("", tf_error["message"])))


@pytest.mark.parametrize(("setup", "name"), dataset_case_params())
def test_dataset_case_matches_tensorflow(setup: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """mirrorlab's steps, per-replica values, reductions and errors equal TF's on every worker."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    problems = case_differences(setup, name)
    assert not problems, f"{setup} {name} differs from TF 2.21:\n" + "\n".join(problems)


@pytest.mark.parametrize(("setup", "name"), sorted(ABORTED_PEER_CASES))
def test_aborted_peers_are_told_the_cause(setup: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One file for 2 workers under FILE/AUTO (ONE_FILE_REASON): TF's worker 1 fails in its has-data collective with
    UnavailableError and a timing-dependent text; mirrorlab's worker 1 gets the same class, in the same phase, with
    worker 0's error as the text."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    tf_results, ml_results = golden(setup)[name], run_mirrorlab(DATASET_CASES[name], setup)
    for w in ABORTED_PEER_CASES[(setup, name)]:
        assert tf_results[w]["steps"] == [] and tf_results[w]["error_phase"] == "iterate"
        assert tf_results[w]["error"]["error"] == "UnavailableError"
        assert "}} " + ABORTED in tf_results[w]["error"]["message"]
        result = ml_results[w]
        assert result["steps"] == [] and result["error_phase"] == "iterate"
        assert result["error"] == {
            "error": "UnavailableError", "message": ABORTED + FUNCTION_NODE.sub("", tf_results[0]["error"]["message"])}


@pytest.mark.parametrize("setup", DATASET_SETUPS)
def test_golden_file_holds_every_case(setup: str) -> None:
    """The golden file was recorded by TF 2.21 from the current case table (no missing or stale cases), per worker."""
    assert json.loads(golden_path(golden_name(setup)).read_text())["tensorflow"].startswith("2.21.")
    assert set(golden(setup)) == set(recorded_dataset_cases(setup)), "stale: run record_dataset_golden.py"
    assert all(len(results) == (1 if setup == "A" else 2) for results in golden(setup).values())


@pytest.mark.parametrize(("expected", "actual", "found"), [
    ({"error": "E", "message": "{{function_node __wrapped__X_device_/job:w}} text"}, {"error": "E", "message": "text"},
     False),
    ({"error": "E", "message": "{{function_node f}} Found a source: <proto>"},
     {"error": "E", "message": "Found a source: RangeDataset(0, 8, 1)"}, False),
    ({"error": "E", "message": "{{function_node f}} Found a source: <proto>"},
     {"error": "E", "message": "Found another source: RangeDataset"}, True),
    ({"error": "E", "message": "a"}, {"error": "E", "message": "b"}, True),
])
def test_message_alignment(expected: Any, actual: Any, found: bool) -> None:
    """TF's function-node prefix is dropped and its proto dumps match any text; the rest must be equal."""
    assert bool(differences(*aligned({"error": expected}, {"error": actual}))) == found
