"""Environment fingerprints: collected without importing CuPy where it is absent; compared into findings."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import pytest

import fake_cupy
from mirrorlab.diagnostics import fingerprint as fingerprint_module
from mirrorlab.diagnostics.environment_checks import check_fingerprint, compare_fingerprints
from mirrorlab.diagnostics.findings import EXIT_FAILED, EXIT_INVALID_CONFIG, Severity, exit_code, registered_codes
from mirrorlab.diagnostics.fingerprint import FINGERPRINT_SCHEMA, collect_fingerprint, is_fingerprint


@pytest.fixture(scope="module")
def here() -> dict[str, Any]:
    return collect_fingerprint()


def test_fingerprint_is_plain_json_with_the_basics(here: dict[str, Any]) -> None:
    assert is_fingerprint(json.loads(json.dumps(here)))
    assert here["python"] == ".".join(map(str, sys.version_info[:3]))
    assert here["packages"]["numpy"] and here["packages"]["mirrorlab"]
    assert {"LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"} <= set(here["env"])
    assert any(b["user_api"] == "blas" and b["num_threads"] >= 1 for b in here["blas"])


def test_no_cupy_is_never_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(fingerprint_module.importlib.util, "find_spec", lambda name, *a: None)
    cuda = collect_fingerprint()["cuda"]
    assert "cupy" not in sys.modules
    assert cuda == {"cupy": None, "driver": None, "runtime": None, "nccl": None, "device_count": 0, "error": None}


def test_cupy_without_driver_versions_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cupy.install(monkeypatch)  # counts devices but has no driverGetVersion / NCCL
    cuda = collect_fingerprint()["cuda"]
    assert cuda["device_count"] == fake_cupy.DEVICE_COUNT
    assert cuda["driver"] is None and "driver" in cuda["error"]


def _variant(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    fp = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        target = fp
        for key in parents:
            target = target[key]
        target[leaf] = value
    return fp


# code -> (changes to one of three fingerprints that trigger it)
SKEW_CASES = {
    "ML-ENV-002": {"packages__numpy": "1.24.0"},
    "ML-ENV-003": {"python": "3.9.1"},
    "ML-ENV-004": {"cuda__driver": 12020},
    "ML-ENV-005": {"cuda__device_count": 7},
    "ML-ENV-006": {"env__LD_LIBRARY_PATH": "/opt/old-cuda/lib64"},
    "ML-ENV-007": {"blas": [{"user_api": "blas", "internal_api": "mkl", "version": "2024", "num_threads": 2,
                             "filepath": "/x/libmkl_rt.so"}]},
}


@pytest.mark.parametrize("code", sorted(SKEW_CASES))
def test_each_difference_names_the_odd_worker_out(here: dict[str, Any], code: str) -> None:
    odd = _variant(here, **SKEW_CASES[code])
    findings = compare_fingerprints([("w0", here), ("w1", here), ("w2", odd)])
    assert [(f.code, f.workers) for f in findings] == [(code, ("w2",))]
    assert compare_fingerprints([("w0", here), ("w1", copy.deepcopy(here))]) == []


def test_a_tie_blames_nobody_in_particular(here: dict[str, Any]) -> None:
    [finding] = compare_fingerprints([("w0", here), ("w1", _variant(here, packages__numpy="1.0"))])
    assert finding.workers == ("w0", "w1") and "split evenly" in finding.message


def test_version_skew_fails_the_check(here: dict[str, Any]) -> None:
    findings = compare_fingerprints([("a", here), ("b", here), ("c", _variant(here, packages__mirrorlab="0.0.1"))])
    assert exit_code(findings) == EXIT_FAILED


def test_malformed_fingerprints(here: dict[str, Any]) -> None:
    assert [f.code for f in check_fingerprint("x", {"schema": "other"})] == ["ML-ENV-008"]
    assert exit_code(compare_fingerprints([("a", here), ("b", [1, 2])])) == EXIT_INVALID_CONFIG
    odd = {"schema": FINGERPRINT_SCHEMA, "packages": [], "cuda": "none", "blas": {"a": 1}, "env": None}
    assert {f.code for f in check_fingerprint("odd", odd)} == {"ML-ENV-001"}
    compare_fingerprints([("a", here), ("odd", odd)])  # compares, never raises


def test_single_host_traps(here: dict[str, Any]) -> None:
    loopback = _variant(here, addresses=["127.0.1.1"])
    assert "ML-ENV-009" in {f.code for f in check_fingerprint("h", loopback)}
    assert "ML-ENV-009" not in {f.code for f in check_fingerprint("h", _variant(here, addresses=["192.0.2.13"]))}
    broken = _variant(here, cuda={"cupy": "13.6.0", "error": "driverGetVersion: CUDARuntimeError: no driver",
                                  "driver": None, "runtime": None, "nccl": None, "device_count": 0})
    assert "ML-ENV-010" in {f.code for f in check_fingerprint("h", broken)}
    assert "ML-ENV-010" not in {f.code for f in check_fingerprint("h", _variant(here, cuda={"cupy": None}))}
    [summary] = [f for f in check_fingerprint("h", here) if f.code == "ML-ENV-001"]
    assert summary.severity is Severity.INFO and "numpy" in summary.evidence


def test_every_env_code_has_a_test() -> None:
    tested = set(SKEW_CASES) | {"ML-ENV-001", "ML-ENV-008", "ML-ENV-009", "ML-ENV-010"}
    assert {c.code for c in registered_codes() if c.code.startswith("ML-ENV-")} == tested
