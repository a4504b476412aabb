"""Parses one TF_CONFIG text into JSON, turning every way it can fail into findings instead of exceptions.

It is the first step of the static checks: invalid JSON (with line and column), repeated keys (which
``json.loads`` silently resolves to the last one) and a top level that is not a JSON object.
"""

from __future__ import annotations

import json
from typing import Any

from mirrorlab.cluster.tf_config import TF_CONFIG_EXAMPLE
from mirrorlab.diagnostics.findings import Finding, Severity, register_code

__all__ = ["INVALID_JSON", "WRONG_TYPE", "DUPLICATE_KEY", "parse_tf_config", "json_kind"]

INVALID_JSON = register_code("ML-CFG-001", "TF_CONFIG is not valid JSON", invalid_config=True)
WRONG_TYPE = register_code("ML-CFG-002", "a TF_CONFIG field has the wrong JSON type", invalid_config=True)
DUPLICATE_KEY = register_code("ML-CFG-003", "a TF_CONFIG object repeats a key (the last one silently wins)",
                              invalid_config=True)

_SHOWN = 60  # characters of context shown on each side of a JSON error


def json_kind(value: object) -> str:
    """The JSON name of a decoded value's type (``null``, ``boolean``, ``number``, ``string``, ``array``, ``object``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def parse_tf_config(text: str, source: str = "TF_CONFIG") -> tuple[dict[str, Any] | None, list[Finding]]:
    """Decodes ``text`` (read from ``source``: ``TF_CONFIG`` or a file name); returns the object, or None, and findings."""
    repeated: list[str] = []

    def pairs_to_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                repeated.append(key)
            result[key] = value
        return result

    try:
        config = json.loads(text, object_pairs_hook=pairs_to_dict)
    except json.JSONDecodeError as err:
        return None, [_invalid_json(err, source)]
    except RecursionError:
        return None, [Finding(INVALID_JSON, Severity.ERROR, (), f"{source} nests JSON too deeply to read",
                              f"{source} is {len(text)} characters long", f"Write {source} as a flat object like "
                              f"{TF_CONFIG_EXAMPLE}.")]
    findings = [Finding(DUPLICATE_KEY, Severity.ERROR, (), f"key {key!r} appears twice in one JSON object of {source}",
                        f"{source}: {_excerpt_around(text, text.find(json.dumps(key)))}",
                        f"Keep one {key!r} entry: JSON keeps only the last, so the others are silently lost.")
                for key in dict.fromkeys(repeated)]
    if not isinstance(config, dict):
        findings.append(Finding(
            WRONG_TYPE, Severity.ERROR, (), f"{source} must be a JSON object but holds a JSON {json_kind(config)}",
            f"{source} = {_excerpt_around(text, 0)}", f"Set {source} to an object like {TF_CONFIG_EXAMPLE}, or unset "
            f"TF_CONFIG for single-worker mode."))
        return None, findings
    return config, findings


def _invalid_json(err: json.JSONDecodeError, source: str) -> Finding:
    """The finding for a JSON syntax error, pointing at its line and column."""
    if not err.doc.strip():
        message = f"{source} is set but empty: TensorFlow fails with 'Expecting value: line 1 column 1 (char 0)'"
    else:
        message = f"{source} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
    hint = ""
    if "double quotes" in err.msg and "'" in err.doc:
        hint = " JSON needs double quotes: write it with json.dumps(config), not str(config)."
    return Finding(INVALID_JSON, Severity.ERROR, (), message, f"{source}: {_excerpt_around(err.doc, err.pos)}",
                   f"Fix the JSON syntax at line {err.lineno} column {err.colno}.{hint} A valid TF_CONFIG looks like "
                   f"{TF_CONFIG_EXAMPLE}; unset TF_CONFIG for single-worker mode.")


def _excerpt_around(text: str, pos: int) -> str:
    """``text`` quoted whole when short, else around ``pos`` with a caret line under the position."""
    pos = max(0, pos)
    start = max(0, pos - _SHOWN)
    end = min(len(text), pos + _SHOWN)
    window = text[start:end]
    line_start = window.rfind("\n", 0, pos - start) + 1
    line_end = window.find("\n", pos - start)
    line = window[line_start:] if line_end < 0 else window[line_start:line_end]
    caret = " " * (pos - start - line_start) + "^"
    return f"{line}\n{caret}"
