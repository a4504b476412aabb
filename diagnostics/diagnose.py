"""What ``mirrorlab diagnose`` checks: this host and its TF_CONFIG, or given files (TF_CONFIGs and fingerprints).

Inputs are sorted by kind from their content: a JSON object with the fingerprint schema is a fingerprint,
anything else is a TF_CONFIG (so a broken TF_CONFIG is still reported as one).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from mirrorlab.diagnostics.environment_checks import check_fingerprint, compare_fingerprints
from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.fingerprint import collect_fingerprint, is_fingerprint
from mirrorlab.diagnostics.tf_config_checks import SINGLE_WORKER
from mirrorlab.diagnostics.tf_config_lint import check_tf_config, check_tf_config_set

__all__ = ["UNREADABLE_INPUT", "MAX_INPUT_BYTES", "diagnose_host", "diagnose_files", "input_files"]

UNREADABLE_INPUT = register_code("ML-CLI-001", "an input file cannot be read", invalid_config=True)

#: Larger inputs are refused: a TF_CONFIG or fingerprint is a few kilobytes.
MAX_INPUT_BYTES = 1 << 20


def diagnose_host(fingerprint: dict | None = None) -> list[Finding]:
    """This host: its environment fingerprint and its ``TF_CONFIG`` (unset means single-worker mode)."""
    findings = check_fingerprint("this host", fingerprint if fingerprint is not None else collect_fingerprint())
    raw = os.environ.get("TF_CONFIG")
    if raw is None:
        findings.append(Finding(SINGLE_WORKER, Severity.INFO, (), "TF_CONFIG is unset: single-worker mode",
                                "TF_CONFIG not in the environment", "For multi-worker training set TF_CONFIG on every "
                                "worker before creating the strategy."))
    else:
        findings += check_tf_config(raw, "TF_CONFIG")
    return findings


def input_files(paths: Iterable[str]) -> tuple[list[Path], list[Finding]]:
    """The files named, with each directory replaced by its (non-hidden) files in name order."""
    files: list[Path] = []
    findings: list[Finding] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            files.append(path)
        else:
            findings.append(_unreadable(name, "no such file or directory"))
    return files, findings


def _unreadable(name: str, why: str) -> Finding:
    return Finding(UNREADABLE_INPUT, Severity.ERROR, (), f"cannot read {name}: {why}", name,
                   "Pass TF_CONFIG files (one JSON object each), fingerprint files, or directories of them.")


def _read(path: Path) -> tuple[str | None, Finding | None]:
    try:
        if path.stat().st_size > MAX_INPUT_BYTES:
            return None, _unreadable(str(path), f"larger than {MAX_INPUT_BYTES} bytes")
        return path.read_text(encoding="utf-8"), None
    except UnicodeDecodeError as err:
        return None, _unreadable(str(path), f"not UTF-8 text ({err.reason} at byte {err.start})")
    except OSError as err:
        return None, _unreadable(str(path), err.strerror or str(err))


def diagnose_files(paths: Iterable[str]) -> list[Finding]:
    """Findings about the TF_CONFIG and fingerprint files named (directories are expanded)."""
    files, findings = input_files(paths)
    tf_configs: list[tuple[str, str]] = []
    fingerprints: list[tuple[str, object]] = []
    for path in files:
        text, problem = _read(path)
        if problem:
            findings.append(problem)
            continue
        assert text is not None
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        if is_fingerprint(value):
            fingerprints.append((str(path), value))
        else:
            tf_configs.append((str(path), text))
    findings += check_tf_config_set(tf_configs)
    if len(fingerprints) == 1:
        findings += check_fingerprint(*fingerprints[0])
    else:
        findings += compare_fingerprints(fingerprints)
    return findings
