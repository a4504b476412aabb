"""The static TF_CONFIG checks at strategy start-up, for users who never run ``mirrorlab diagnose``.

An error TensorFlow raises while reading TF_CONFIG keeps its class and text and gains the coded findings that
explain it; a TF_CONFIG TensorFlow accepts but that will misbehave (``localhost`` beside remote hosts, a
``grpc://`` prefix, an index of ``1.7``) raises a ``TFConfigWarning`` naming the findings.
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from typing import Iterator

from mirrorlab.diagnostics.findings import Finding, Severity
from mirrorlab.diagnostics.tf_config_lint import check_tf_config

__all__ = ["TFConfigWarning", "tf_config_diagnosed", "explanation"]

_STACKLEVEL = 5  # _warn_accepted <- tf_config_diagnosed <- contextlib.__exit__ <- strategy __init__ <- user code


class TFConfigWarning(UserWarning):
    """TF_CONFIG is accepted as TensorFlow would, but the static checks found something that will go wrong."""


def explanation(findings: list[Finding], how: str = "run `mirrorlab diagnose` for details") -> str:
    """The lines appended to an error or warning: one per finding, with its fix; ``how`` says where to learn more."""
    lines = [f"  {f.one_line()} Fix: {f.fix}" for f in findings]
    return f"Diagnosis ({how}):\n" + "\n".join(lines)


def _findings(*severities: Severity) -> list[Finding]:
    raw = os.environ.get("TF_CONFIG")
    if raw is None:
        return []
    return [f for f in check_tf_config(raw, "TF_CONFIG") if f.severity in severities]


@contextmanager
def tf_config_diagnosed() -> Iterator[None]:
    """Wraps a strategy's reading of ``TF_CONFIG``: explains its errors in place, warns about accepted dangers."""
    try:
        yield
    except (ValueError, TypeError, KeyError) as err:  # json.JSONDecodeError is a ValueError
        errors = _findings(Severity.ERROR)
        if errors:
            first = str(err.args[0]) if err.args else type(err).__name__
            err.args = (f"{first}\n{explanation(errors)}",) + tuple(err.args[1:])
        raise
    else:
        _warn_accepted()


def _warn_accepted() -> None:
    found = _findings(Severity.ERROR, Severity.WARNING)
    if found:
        warnings.warn(TFConfigWarning(f"TF_CONFIG is accepted but will misbehave.\n{explanation(found)}"),
                      stacklevel=_STACKLEVEL)
