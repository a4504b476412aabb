"""`mirrorlab diagnose`, run in-process: exit codes, JSON, files and directories, this host, fingerprints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mirrorlab.cli import main
from test_diagnostics_properties import json_paths, mutate, valid_tf_configs

GOOD = {"cluster": {"worker": ["h0:2222", "h1:2222"]}, "task": {"type": "worker", "index": 0}}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["diagnose", *argv])
    return code, capsys.readouterr().out


def _write(path: Path, value: Any) -> str:
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def test_no_argument_checks_this_host_and_its_tf_config(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    code, out = _run(capsys, "--json")
    document = json.loads(out)
    assert code == 0 and document["exit_code"] == 0
    assert {"ML-ENV-001", "ML-CFG-017"} <= {f["code"] for f in document["findings"]}
    assert document["fingerprint"]["schema"] == "mirrorlab.fingerprint/1"
    monkeypatch.setenv("TF_CONFIG", json.dumps({**GOOD, "task": {"type": "worker", "index": 5}}))
    code, out = _run(capsys)
    assert code == 2 and "ML-CFG-010" in out and "INVALID CONFIGURATION" in out


def test_files_and_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    _write(folder / "w0.json", GOOD)
    _write(folder / "w1.json", {"cluster": {"worker": ["h0:2222", "h9:2222"]}, "task": {"type": "worker", "index": 1}})
    code, out = _run(capsys, str(folder), "--json")
    assert code == 2
    [finding] = json.loads(out)["findings"]
    assert finding["code"] == "ML-CFG-030" and "w1.json" in finding["evidence"]
    code, out = _run(capsys, str(folder / "w0.json"))
    assert code == 0 and out.startswith("PASS")


def test_unreadable_inputs_are_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    code, out = _run(capsys, str(tmp_path / "missing.json"), str(tmp_path / "bin.json"), "--json")
    codes = [f["code"] for f in json.loads(out)["findings"]]
    assert code == 2 and codes == ["ML-CLI-001", "ML-CLI-001"]


def test_fingerprints_written_then_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.fp.json"
    code, _ = _run(capsys, "--write-fingerprint", str(path))
    fingerprint = json.loads(path.read_text())
    fingerprint["packages"]["grpcio"] = "1.0.0"
    _write(tmp_path / "b.fp.json", fingerprint)
    code, out = _run(capsys, str(path), str(tmp_path / "b.fp.json"), "--json")
    [skew] = [f for f in json.loads(out)["findings"] if f["code"] == "ML-ENV-002"]
    assert code == 1 and "grpcio" in skew["message"]


def test_unwritable_fingerprint_path_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--write-fingerprint", str(tmp_path / "no" / "such" / "dir.json")]) == 2
    assert "--write-fingerprint" in capsys.readouterr().err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["cluster", "task", "type", "index", "worker", "chief", "x"]), inner,
                        max_size=4), max_leaves=12))
def test_any_json_gives_a_report_never_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   value: Any) -> None:
    code, out = _run(capsys, _write(tmp_path / "tf_config.json", value), "--json")
    document = json.loads(out)
    assert code == document["exit_code"] in (0, 2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(valid_tf_configs(), st.data())
def test_mutated_tf_configs_give_a_report_never_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            config: dict, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(1, 3))):
        if isinstance(config, (dict, list)) and json_paths(config)[1:]:
            config = mutate(config, data)
    code, out = _run(capsys, _write(tmp_path / "tf_config.json", config), "--json")
    assert code == json.loads(out)["exit_code"] in (0, 2)
