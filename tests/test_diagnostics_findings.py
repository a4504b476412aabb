"""The Finding model: registry, exit-code rule, human and JSON rendering."""

from __future__ import annotations

import io
import json

import pytest

from mirrorlab.diagnostics.findings import (
    EXIT_FAILED, EXIT_INVALID_CONFIG, EXIT_PASS, Finding, Severity, code_info, exit_code, findings_from_json,
    register_code, registered_codes, render_text, to_json,
)

BAD_CONFIG = register_code("ML-TST-001", "test: the configuration is invalid", invalid_config=True)
CHECK_FAILED = register_code("ML-TST-002", "test: a check failed")


def _f(code: str, severity: Severity, workers: tuple[str, ...] = ("worker:1",)) -> Finding:
    return Finding(code, severity, workers, "something is off", "seen here", "do this")


def test_codes_are_validated_and_stable() -> None:
    with pytest.raises(ValueError, match="ML-CFG-003"):
        register_code("CFG3", "bad code")
    assert register_code("ML-TST-002", "test: a check failed") == CHECK_FAILED  # same entry again is fine
    with pytest.raises(ValueError, match="already registered"):
        register_code("ML-TST-002", "another title")
    with pytest.raises(KeyError, match="ML-TST-999"):
        Finding("ML-TST-999", Severity.ERROR)
    assert code_info(BAD_CONFIG).invalid_config and not code_info(CHECK_FAILED).invalid_config
    assert [c.code for c in registered_codes()] == sorted(c.code for c in registered_codes())


def test_exit_code_rule() -> None:
    assert exit_code([]) == EXIT_PASS
    assert exit_code([_f(BAD_CONFIG, Severity.WARNING), _f(CHECK_FAILED, Severity.INFO)]) == EXIT_PASS
    assert exit_code([_f(CHECK_FAILED, Severity.ERROR)]) == EXIT_FAILED
    assert exit_code([_f(CHECK_FAILED, Severity.ERROR), _f(BAD_CONFIG, Severity.ERROR)]) == EXIT_INVALID_CONFIG


def test_text_is_grouped_errors_first_and_coloured_only_on_a_terminal() -> None:
    findings = [_f(CHECK_FAILED, Severity.WARNING), _f(BAD_CONFIG, Severity.ERROR, ())]
    plain = render_text(findings, stream=io.StringIO())
    assert "\x1b[" not in plain
    assert plain.index("Errors (1)") < plain.index("Warnings (1)")
    assert "fix:      do this" in plain and "workers:  worker:1" in plain
    assert plain.rstrip().endswith("(exit 2)")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert "\x1b[31m" in render_text(findings, stream=Tty())
    assert "\x1b[" in render_text(findings, colour=True)


def test_no_color_environment_turns_colour_off(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in render_text([_f(CHECK_FAILED, Severity.ERROR)], stream=Tty())


def test_json_round_trip() -> None:
    findings = [_f(CHECK_FAILED, Severity.INFO), _f(CHECK_FAILED, Severity.ERROR, ("chief:0", "worker:0"))]
    text = to_json(findings, host="h1")
    document = json.loads(text)
    assert document["exit_code"] == EXIT_FAILED and document["host"] == "h1"
    assert document["summary"] == {"error": 1, "warning": 0, "info": 1}
    assert document["findings"][0]["severity"] == "error" and document["findings"][0]["title"] == "test: a check failed"
    assert sorted(findings_from_json(text), key=lambda f: f.severity.rank) == sorted(findings, key=lambda f: f.severity.rank)


def test_one_line_names_code_and_workers() -> None:
    assert _f(CHECK_FAILED, Severity.ERROR).one_line() == "ML-TST-002 error [worker:1]: something is off"
