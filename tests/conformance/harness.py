"""The golden files, and comparing normalized results (TF vs mirrorlab).

Golden file ``golden/<setup>.json``: ``{"tensorflow": version, "setup": setup, "cases": {name: [result of
worker 0, result of worker 1, ...]}}`` where a result is ``{label: normalized value}`` (see adapters.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .cases import Case

__all__ = ["GOLDEN_DIR", "load_golden", "save_golden", "differences", "worker_differences",
           "message_comparable"]

GOLDEN_DIR = Path(__file__).with_name("golden")

# Relative tolerance per dtype; integers, bools and strings compare exactly.
RTOL = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}
PYTHON_FLOAT_RTOL = 1e-12


def golden_path(setup: str) -> Path:
    """Where the golden results of ``setup`` live."""
    return GOLDEN_DIR / f"{setup}.json"


def load_golden(setup: str) -> dict[str, list[dict[str, Any]]]:
    """The recorded TF results of ``setup``: case name -> one result per worker."""
    return json.loads(golden_path(setup).read_text())["cases"]


def save_golden(setup: str, version: str, cases: dict[str, list[dict[str, Any]]]) -> None:
    """Write the TF results of ``setup`` (one result per worker for every case)."""
    GOLDEN_DIR.mkdir(exist_ok=True)
    document = {"tensorflow": version, "setup": setup, "cases": cases}
    golden_path(setup).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")


def message_comparable(message: str) -> bool:
    """False for TF messages from graph tracing (``in user code:``, or shape inference naming a ``{{node ...}}``),
    op kernels (``{{function_node``) or a function's run (``Graph execution error:``, then the graph's nodes): their
    text names TF graph internals, so only the error class is compared."""
    return not message.startswith(("in user code:", "{{function_node", "Graph execution error:")) and \
        "{{node " not in message


def _is_array(value: Any) -> bool:
    """True for a normalized array."""
    return isinstance(value, dict) and set(value) == {"dtype", "shape", "value"}


def _is_error(value: Any) -> bool:
    """True for a normalized exception."""
    return isinstance(value, dict) and set(value) == {"error", "message"}


def _close(expected: Any, actual: Any, rtol: float) -> bool:
    """Element-wise equality of nested lists, with ``rtol`` for floats and "nan" equal to itself."""
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(_close(e, a, rtol) for e, a in zip(expected, actual, strict=True)))
    if isinstance(expected, float) and isinstance(actual, float):
        return math.isclose(expected, actual, rel_tol=rtol, abs_tol=rtol)
    return type(expected) is type(actual) and expected == actual


def differences(expected: Any, actual: Any, compare_messages: bool = True, path: str = "",
                rtol: dict[str, float] | None = None, python_rtol: float = PYTHON_FLOAT_RTOL) -> list[str]:
    """Human-readable differences between a TF result (``expected``) and a mirrorlab result (``actual``), floats
    within ``rtol`` (per dtype; default RTOL), Python floats within ``python_rtol``."""
    where = path or "result"
    if _is_error(expected):
        if not _is_error(actual):
            return [f"{where}: TF raised {expected['error']}({expected['message']!r}), mirrorlab gave {actual!r}"]
        if expected["error"] != actual["error"]:
            return [f"{where}: TF raised {expected['error']}({expected['message']!r}), "
                    f"mirrorlab raised {actual['error']}({actual['message']!r})"]
        if compare_messages and message_comparable(expected["message"]) and expected["message"] != actual["message"]:
            return [f"{where}: {expected['error']} message: TF {expected['message']!r} vs mirrorlab "
                    f"{actual['message']!r}"]
        return []
    if _is_array(expected):
        if not _is_array(actual):
            return [f"{where}: TF gave an array {expected!r}, mirrorlab {actual!r}"]
        for key in ("dtype", "shape"):
            if expected[key] != actual[key]:
                return [f"{where}: {key} TF {expected[key]} vs mirrorlab {actual[key]} "
                        f"(values TF {expected['value']} vs mirrorlab {actual['value']})"]
        if not _close(expected["value"], actual["value"], (rtol or RTOL).get(expected["dtype"], 0.0)):
            return [f"{where}: value TF {expected['value']} vs mirrorlab {actual['value']} ({expected['dtype']})"]
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(expected) != set(actual):
            return [f"{where}: TF gave {expected!r}, mirrorlab {actual!r}"]
        return [d for key in expected
                for d in differences(expected[key], actual[key], compare_messages, f"{path}.{key}" if path else key,
                                     rtol, python_rtol)]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            return [f"{where}: TF gave {expected!r}, mirrorlab {actual!r}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for d in differences(e, a, compare_messages, f"{where}[{i}]", rtol, python_rtol)]
    if not _close(expected, actual, python_rtol):
        return [f"{where}: TF gave {expected!r}, mirrorlab {actual!r}"]
    return []


def worker_differences(expected: list[dict[str, Any]], actual: list[dict[str, Any]], case: Case) -> list[str]:
    """Differences between TF's and mirrorlab's per-worker results of ``case``, prefixed by the worker."""
    if len(expected) != len(actual):
        return [f"TF ran {len(expected)} workers, mirrorlab {len(actual)}"]
    return [f"worker {w}: {d}" for w, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in differences(e, a, case.compare_messages)]
