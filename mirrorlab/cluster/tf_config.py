"""Reads the ``TF_CONFIG`` environment variable the way TensorFlow does, with errors that say how to fix it."""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["read_tf_config", "TF_CONFIG_EXAMPLE"]

#: A valid TF_CONFIG, quoted in error messages as the shape to copy.
TF_CONFIG_EXAMPLE = '{"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", "index": 0}}'

_SHOWN_CHARS = 120  # longer values are quoted only around the offending character


def read_tf_config() -> dict[str, Any]:
    """Parses ``TF_CONFIG`` now (unset means ``{}``: single-worker mode), like TF on every resolver access.

    ``os.environ`` is looked up on each call, so a per-thread overlay installed by the simulator is seen.
    Invalid JSON (including ``""``) raises ``json.JSONDecodeError`` as TF does; its text starts with TF's
    (``Expecting value: line 1 column 1 (char 0)``) and goes on, after a newline, with the cause and fix.
    Divergence: JSON that is not an object raises ``ValueError`` (TF treats an array or string as
    single-worker mode and fails on ``null`` or a number with ``TypeError: argument of type ...``).
    """
    raw = os.environ.get("TF_CONFIG")
    if raw is None:
        return {}
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as err:
        raise _explained(err) from None
    if not isinstance(config, dict):
        raise ValueError(f"TF_CONFIG must be a JSON object, but it holds a JSON {_json_kind(config)}: "
                         f"{_excerpt(raw, 0)}. Set TF_CONFIG to a JSON object like {TF_CONFIG_EXAMPLE} or unset "
                         f"it for single-worker mode.")
    return config


def _explained(err: json.JSONDecodeError) -> json.JSONDecodeError:
    """Returns a copy of ``err`` whose message keeps TF's first line and adds what is wrong and the fix."""
    if not err.doc.strip():
        problem = "it is set but holds no JSON value (it is empty or blank)"
    else:
        problem = f"{err.msg} at character {err.pos} of {_excerpt(err.doc, err.pos)}"
    hint = ""
    if "double quotes" in err.msg and "'" in err.doc:
        hint = " JSON needs double quotes: write the value with json.dumps(config), not str(config)."
    explained = json.JSONDecodeError(err.msg, err.doc, err.pos)
    explained.args = (f"{err}\nTF_CONFIG is not valid JSON: {problem}.{hint} Set TF_CONFIG to a JSON object "
                      f"like {TF_CONFIG_EXAMPLE} or unset it for single-worker mode.",)
    return explained


def _excerpt(raw: str, pos: int) -> str:
    """Quotes a short ``raw`` whole and a long one only around ``pos``, as a slice of its length."""
    if len(raw) <= _SHOWN_CHARS:
        return f"TF_CONFIG={raw!r}"
    start = max(0, min(pos - _SHOWN_CHARS // 2, len(raw) - _SHOWN_CHARS))
    end = start + _SHOWN_CHARS
    return f"TF_CONFIG[{start}:{end}]={raw[start:end]!r} ({len(raw)} characters in all)"


def _json_kind(value: object) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "number"
