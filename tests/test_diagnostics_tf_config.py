"""Static TF_CONFIG checks: every ML-CFG code has a config that triggers it and a close one that must not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mirrorlab.diagnostics.findings import EXIT_INVALID_CONFIG, EXIT_PASS, Severity, exit_code, registered_codes
from mirrorlab.diagnostics.tf_config_lint import check_tf_config, check_tf_config_set

W2 = {"worker": ["h0:2222", "h1:2222"]}
TASK0 = {"type": "worker", "index": 0}


def cfg(cluster: Any = W2, task: Any = TASK0, **extra: Any) -> str:
    """A TF_CONFIG text; pass ``...`` to leave a section out."""
    config = {key: value for key, value in (("cluster", cluster), ("task", task)) if value is not ...}
    config.update(extra)
    return json.dumps(config)


# code -> (a TF_CONFIG that triggers it, a close one that must not)
SINGLE_CASES: dict[str, tuple[str, str]] = {
    "ML-CFG-001": (cfg()[:-1], cfg()),
    "ML-CFG-002": (cfg(task=None), cfg()),
    "ML-CFG-003": ('{"cluster": {"worker": ["h0:2222"]}, "cluster": {"worker": ["h1:2222"]}, "task": '
                   '{"type": "worker", "index": 0}}', cfg()),
    "ML-CFG-004": (cfg(cluster=..., clsuter=W2), cfg()),
    "ML-CFG-005": (cfg(owner="me"), cfg(environment="cloud")),
    "ML-CFG-006": (cfg(cluster=...), cfg()),
    "ML-CFG-007": (cfg(task=...), cfg()),
    "ML-CFG-008": (cfg(task={"type": "Worker", "index": 0}), cfg()),
    "ML-CFG-009": (cfg(task={"type": "worker", "index": 1.7}), cfg(task={"type": "worker", "index": 1})),
    "ML-CFG-010": (cfg(task={"type": "worker", "index": 2}), cfg(task={"type": "worker", "index": 1})),
    "ML-CFG-011": (cfg(task={"type": "chief", "index": 0}),
                   cfg(cluster={"chief": ["c:2222"], **W2}, task={"type": "chief", "index": 0})),
    "ML-CFG-012": (cfg(cluster={"chief": [], **W2}), cfg(cluster={"chief": ["c:2222"], **W2})),
    "ML-CFG-013": (cfg(cluster={"chief": ["c0:2222", "c1:2222"], **W2}), cfg(cluster={"chief": ["c0:2222"], **W2})),
    "ML-CFG-014": (cfg(task={"type": "evaluator", "index": 0}),
                   cfg(cluster={"evaluator": ["e:2222"], **W2}, task={"type": "evaluator", "index": 0})),
    "ML-CFG-015": (cfg(cluster={"ps": ["p:2222"], **W2}), cfg(cluster={"evaluator": ["p:2222"], **W2})),
    "ML-CFG-016": (cfg(cluster={"evaluator": ["e:2222"]}, task={"type": "worker", "index": 0}),
                   cfg(cluster={"evaluator": ["e:2222"]}, task={"type": "evaluator", "index": 0})),
    "ML-CFG-017": ("{}", cfg()),
    "ML-CFG-018": (cfg(cluster={"worker": {"0": "h0:2222", "3": "h3:2222"}}),
                   cfg(cluster={"worker": {"1": "h1:2222", "0": "h0:2222"}})),
    "ML-CFG-020": (cfg(cluster={"worker": ["h0", "h1:2222"]}), cfg()),
    "ML-CFG-021": (cfg(cluster={"worker": ["grpc://h0:2222", "h1:2222"]}), cfg()),
    "ML-CFG-022": (cfg(cluster={"worker": ["h0:70000", "h1:2222"]}), cfg(cluster={"worker": ["h0:65535", "h1:2222"]})),
    "ML-CFG-023": (cfg(cluster={"worker": ["h0:80", "h1:2222"]}), cfg(cluster={"worker": ["h0:1024", "h1:2222"]})),
    "ML-CFG-024": (cfg(cluster={"worker": ["h 0:2222", "h1:2222"]}), cfg()),
    "ML-CFG-025": (cfg(cluster={"worker": ["0.0.0.0:2222", "h1:2222"]}), cfg()),
    "ML-CFG-026": (cfg(cluster={"worker": ["h0:2222", "h0:2222"]}), cfg(cluster={"worker": ["h0:2222", "h0:2223"]})),
    "ML-CFG-027": (cfg(cluster={"chief": ["h0:2222"], "worker": ["h0:2222", "h1:2222"]}),
                   cfg(cluster={"chief": ["h0:2222"], "worker": ["h1:2222"]})),
    "ML-CFG-028": (cfg(cluster={"worker": ["localhost:2222", "h1:2222"]}),
                   cfg(cluster={"worker": ["localhost:2222", "127.0.0.1:2223"]})),
    "ML-CFG-029": (cfg(cluster={"worker": ["h0:2222", "192.0.2.11:2222"]}),
                   cfg(cluster={"worker": ["192.0.2.12:2222", "192.0.2.11:2222"]})),
}


def _set(*tasks: tuple[str, dict, dict]) -> list[tuple[str, str]]:
    return [(name, cfg(cluster, task)) for name, cluster, task in tasks]


# code -> (a set of TF_CONFIGs that triggers it, one that must not)
SET_CASES: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {
    "ML-CFG-030": (_set(("a", W2, TASK0), ("b", {"worker": ["h0:2222", "h9:2222"]}, {"type": "worker", "index": 1})),
                   _set(("a", W2, TASK0), ("b", W2, {"type": "worker", "index": 1}))),
    "ML-CFG-031": (_set(("a", W2, TASK0), ("b", W2, TASK0)),
                   _set(("a", W2, TASK0), ("b", W2, {"type": "worker", "index": 1}))),
    "ML-CFG-032": (_set(("a", {"worker": ["h0:2222", "h1:2222", "h2:2222"]}, TASK0),
                        ("b", {"worker": ["h0:2222", "h1:2222", "h2:2222"]}, {"type": "worker", "index": 1})),
                   _set(("a", W2, TASK0), ("b", W2, {"type": "worker", "index": 1}))),
}


def _codes(findings: list) -> set[str]:
    return {f.code for f in findings}


@pytest.mark.parametrize("code", sorted(SINGLE_CASES))
def test_single_config_code_triggers_and_not(code: str) -> None:
    bad, good = SINGLE_CASES[code]
    assert code in _codes(check_tf_config(bad)), bad
    assert code not in _codes(check_tf_config(good)), good


@pytest.mark.parametrize("code", sorted(SET_CASES))
def test_config_set_code_triggers_and_not(code: str) -> None:
    bad, good = SET_CASES[code]
    assert code in _codes(check_tf_config_set(bad))
    assert code not in _codes(check_tf_config_set(good))


def test_every_cfg_code_has_a_case() -> None:
    cfg_codes = {c.code for c in registered_codes() if c.code.startswith("ML-CFG-")}
    assert cfg_codes == set(SINGLE_CASES) | set(SET_CASES)


def test_the_good_configs_pass() -> None:
    for _, good in SINGLE_CASES.values():
        assert exit_code(check_tf_config(good)) == EXIT_PASS, good


def test_invalid_json_names_line_and_column() -> None:
    [finding] = check_tf_config('{\n  "cluster": {"worker": ["h0:2222",]},\n}', source="w0.json")
    assert finding.code == "ML-CFG-001"
    assert "line 2 column 36" in finding.message and "w0.json" in finding.evidence


def test_single_quotes_hint_json_dumps() -> None:
    [finding] = check_tf_config(str({"cluster": W2, "task": TASK0}))
    assert "json.dumps" in finding.fix


@pytest.mark.parametrize("index, severity", [(True, Severity.ERROR), ("zero", Severity.ERROR), (None, None),
                                             ("1", Severity.WARNING), (1.0, Severity.WARNING), ([1], Severity.ERROR)])
def test_task_index_types(index: Any, severity: Severity | None) -> None:
    findings = [f for f in check_tf_config(cfg(task={"type": "worker", "index": index})) if f.code == "ML-CFG-009"]
    assert [f.severity for f in findings] == ([severity] if severity else [])


def test_localhost_and_127_are_one_host_for_duplicates() -> None:
    findings = check_tf_config(cfg(cluster={"worker": ["localhost:2222", "127.0.0.1:2222"]}))
    [dup] = [f for f in findings if f.code == "ML-CFG-026"]
    assert dup.workers == ("worker:0", "worker:1") and "loopback" in dup.message


def test_ipv6_addresses() -> None:
    assert exit_code(check_tf_config(cfg(cluster={"worker": ["[2001:db8::1]:2222", "[2001:db8::2]:2222"]}))) == 0
    [bad] = [f for f in check_tf_config(cfg(cluster={"worker": ["2001:db8::1:2222", "h1:2222"]}))
             if f.code == "ML-CFG-020"]
    assert "[2001:db8::1]:2222" in bad.fix


def test_set_reports_shared_problems_once() -> None:
    cluster = {"worker": ["h0:2222", "h0:2222"]}
    findings = check_tf_config_set(_set(("a", cluster, TASK0), ("b", cluster, {"type": "worker", "index": 1})))
    assert [f.code for f in findings].count("ML-CFG-026") == 1
    assert exit_code(findings) == EXIT_INVALID_CONFIG


def test_optional_keys_must_be_strings() -> None:
    [finding] = [f for f in check_tf_config(cfg(rpc_layer=5)) if f.code == "ML-CFG-002"]
    assert "rpc_layer" in finding.message
    assert exit_code(check_tf_config(cfg(rpc_layer="grpc", environment="cloud"))) == EXIT_PASS
