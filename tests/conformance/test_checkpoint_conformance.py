"""mirrorlab's checkpoints against TensorFlow 2.21's recorded results (``golden/checkpoints_<setup>.json``),
without TensorFlow: every case of ``checkpoint_cases.py``, per worker.

A = ``ml.MirroredStrategy`` over 2 CPUs (the cross-strategy cases also use the default strategy and one CPU);
B = ``ml.MultiWorkerMirroredStrategy()`` without a cluster; C = the same case program on ``SimCluster(workers=2)``, both simulated workers sharing the case's directory.
Re-record the golden files with ``record_checkpoint_golden.py`` when a case changes. Differences are listed in
``checkpoint_known_differences.py``. The live test (marked ``tensorflow``, skipped without TF) runs TF 2.21 now, in
the record script's child processes, and compares it with the golden files and with mirrorlab.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from mirrorlab.sim import SimCluster

from .adapters import MirrorlabApi, error_json
from .cases import Case
from .checkpoint_cases import (CHECKPOINT_CASES, CHECKPOINT_SETUPS, golden_name,
                               recorded_checkpoint_cases, run_checkpoint_case)
from .checkpoint_known_differences import checkpoint_case_params
from .harness import golden_path, load_golden, worker_differences

API = MirrorlabApi()

Result = dict[str, Any]


@functools.cache
def golden(setup: str) -> dict[str, list[Result]]:
    """The recorded TF results of ``setup`` (read once)."""
    return load_golden(golden_name(setup))


def run_mirrorlab(api: MirrorlabApi, case: Case, setup: str, base: Path) -> list[Result]:
    """mirrorlab's result of ``case`` on every worker of ``setup``, in ``base/<case>``."""
    if setup in ("A", "B"):
        return [run_checkpoint_case(api, case, api.strategy_for(setup), base)]
    results = SimCluster(workers=2, check_mirrors=False).run(  # as TF, whose mirrored copies may differ
        lambda: run_checkpoint_case(api, case, api.mwms(), base)).values()
    return [{"program": error_json(r)} if isinstance(r, BaseException) else r for r in results]


@pytest.mark.parametrize(("setup", "name"), checkpoint_case_params())
def test_checkpoint_case_matches_tensorflow(setup: str, name: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """mirrorlab's paths, files, state file, values, statuses and errors equal TF's on every worker."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    case = CHECKPOINT_CASES[name]
    problems = worker_differences(golden(setup)[name], run_mirrorlab(API, case, setup, tmp_path), case)
    assert not problems, f"{setup} {name} differs from TF 2.21:\n" + "\n".join(problems)


@pytest.mark.parametrize("setup", CHECKPOINT_SETUPS)
def test_golden_file_holds_every_case(setup: str) -> None:
    """The golden file was recorded by TF 2.21 from the current case table (no missing or stale cases), per worker."""
    assert json.loads(golden_path(golden_name(setup)).read_text())["tensorflow"].startswith("2.21.")
    assert set(golden(setup)) == set(recorded_checkpoint_cases(setup)), "stale: run record_checkpoint_golden.py"
    assert all(len(results) == (2 if setup == "C" else 1) for results in golden(setup).values())


@pytest.mark.tensorflow
@pytest.mark.parametrize("setup", CHECKPOINT_SETUPS)
def test_mirrorlab_and_golden_files_match_live_tensorflow(setup: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """TF 2.21 run now (in record_checkpoint_golden.py's children, so this process's TF runtime stays untouched)
    gives the recorded results, and mirrorlab matches it wherever no difference is listed."""
    pytest.importorskip("tensorflow")
    if setup == "C" and (os.geteuid() != 0 or shutil.which("unshare") is None):
        pytest.skip("setup C runs TF's workers in a private network namespace (unshare -n needs root)")
    from .record_checkpoint_golden import tf_results

    monkeypatch.delenv("TF_CONFIG", raising=False)
    _, live = tf_results(setup, tmp_path / "tf")
    stale = [f"{name}: {p}" for name in recorded_checkpoint_cases(setup)
             for p in worker_differences(golden(setup)[name], live[name], CHECKPOINT_CASES[name])]
    assert not stale, f"golden/{golden_name(setup)}.json is stale (run record_checkpoint_golden.py):\n" + "\n".join(
        stale)
    compared = [p.values[1] for p in checkpoint_case_params((setup,)) if not p.marks]
    problems = [f"{name}: {p}" for name in compared
                for p in worker_differences(live[name], run_mirrorlab(API, CHECKPOINT_CASES[name], setup,
                                                                      tmp_path / "ml"), CHECKPOINT_CASES[name])]
    assert not problems, f"{setup} differs from live TF:\n" + "\n".join(problems)
