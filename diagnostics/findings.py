"""The one result type of every diagnostic: a coded ``Finding``, its registry of codes, renderers and exit code.

Every check (static TF_CONFIG checks, the environment comparison, preflight, trace analysis) returns a list of
``Finding``s; the CLI renders them for people or as JSON and turns them into the process exit status, so that
all checks speak the same language and a code means the same thing wherever it appears.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from enum import Enum
from typing import IO, Any, Iterable, Mapping, Sequence

__all__ = [
    "Severity", "CodeInfo", "Finding", "register_code", "code_info", "registered_codes",
    "exit_code", "EXIT_PASS", "EXIT_FAILED", "EXIT_INVALID_CONFIG",
    "render_text", "to_json", "findings_from_json",
]

EXIT_PASS = 0
"""No error finding (warnings and infos allowed)."""
EXIT_FAILED = 1
"""At least one check failed (an error finding whose code does not mean the configuration is invalid)."""
EXIT_INVALID_CONFIG = 2
"""The configuration itself is invalid (an error finding with an ``invalid_config`` code); as Kubernetes init containers use it."""

_CODE_PATTERN = re.compile(r"^ML-[A-Z]{2,5}-\d{3}$")


class Severity(str, Enum):
    """How bad a finding is: an ``error`` fails the run, a ``warning`` is shown but passes, ``info`` is context."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Sort key: errors first."""
        return (Severity.ERROR, Severity.WARNING, Severity.INFO).index(self)


@dataclass(frozen=True)
class CodeInfo:
    """A registered code: its one-line title, and whether an error with it means the configuration is invalid."""

    code: str
    title: str
    invalid_config: bool = False


_REGISTRY: dict[str, CodeInfo] = {}


def register_code(code: str, title: str, *, invalid_config: bool = False) -> str:
    """Registers ``code`` (``ML-<AREA>-<NNN>``) with its one-line ``title``; returns the code for use as a constant.

    Codes are stable: registering one twice with a different title or exit class is a programming error.
    """
    if not _CODE_PATTERN.match(code):
        raise ValueError(f"finding code {code!r} must look like 'ML-CFG-003' (ML-, 2-5 capitals, -, three digits)")
    info = CodeInfo(code, title, invalid_config)
    existing = _REGISTRY.setdefault(code, info)
    if existing != info:
        raise ValueError(f"finding code {code} is already registered as {existing.title!r}; pick a new number")
    return code


def code_info(code: str) -> CodeInfo:
    """The registry entry of ``code``; ``KeyError`` naming the code when it was never registered."""
    try:
        return _REGISTRY[code]
    except KeyError:
        raise KeyError(f"unknown finding code {code!r}: register it with register_code first") from None


def registered_codes() -> list[CodeInfo]:
    """Every registered code, sorted by code (for the catalog page and its test)."""
    return [_REGISTRY[c] for c in sorted(_REGISTRY)]


@dataclass(frozen=True)
class Finding:
    """One problem (or fact) found: a registered ``code``, its ``severity``, the ``workers`` concerned
    (e.g. ``"worker:1"``; empty for the whole cluster), a one-line ``message``, the ``evidence`` it rests on,
    and the ``fix``."""

    code: str
    severity: Severity
    workers: tuple[str, ...] = ()
    message: str = ""
    evidence: str = ""
    fix: str = ""

    def __post_init__(self) -> None:
        code_info(self.code)
        object.__setattr__(self, "severity", Severity(self.severity))
        object.__setattr__(self, "workers", tuple(self.workers))

    @property
    def title(self) -> str:
        """The registered one-line title of this finding's code."""
        return code_info(self.code).title

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``--json`` element)."""
        return {
            "code": self.code, "severity": self.severity.value, "title": self.title, "workers": list(self.workers),
            "message": self.message, "evidence": self.evidence, "fix": self.fix,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Finding":
        """Rebuilds a finding from ``to_dict``'s output (``title`` is ignored: it comes from the registry)."""
        return cls(data["code"], Severity(data["severity"]), tuple(data.get("workers", ())),
                   data.get("message", ""), data.get("evidence", ""), data.get("fix", ""))

    def one_line(self) -> str:
        """``CODE severity [workers] message``: the form exception messages carry."""
        where = f" [{', '.join(self.workers)}]" if self.workers else ""
        return f"{self.code} {self.severity.value}{where}: {self.message}"


def _sorted(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.severity.rank, f.code, f.workers))


def exit_code(findings: Iterable[Finding]) -> int:
    """0 when no finding is an error; 2 when an error means the configuration is invalid; else 1."""
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if not errors:
        return EXIT_PASS
    if any(code_info(f.code).invalid_config for f in errors):
        return EXIT_INVALID_CONFIG
    return EXIT_FAILED


_COLOURS = {Severity.ERROR: "\x1b[31m", Severity.WARNING: "\x1b[33m", Severity.INFO: "\x1b[36m"}
_RESET = "\x1b[0m"
_HEADINGS = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Info"}


def _wants_colour(stream: IO[str] | None) -> bool:
    if os.environ.get("NO_COLOR") or stream is None:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def render_text(findings: Sequence[Finding], *, stream: IO[str] | None = None, colour: bool | None = None) -> str:
    """People's report: findings grouped by severity (errors first), each with its evidence and fix, then a summary.

    Coloured when ``colour`` is true, or when it is None and ``stream`` is a terminal (and ``NO_COLOR`` is unset).
    """
    use_colour = _wants_colour(stream) if colour is None else colour
    paint = (lambda sev, text: f"{_COLOURS[sev]}{text}{_RESET}") if use_colour else (lambda sev, text: text)
    lines: list[str] = []
    ordered = _sorted(findings)
    for severity in Severity:
        group = [f for f in ordered if f.severity is severity]
        if not group:
            continue
        lines.append(paint(severity, f"{_HEADINGS[severity]} ({len(group)})"))
        for f in group:
            lines.append(f"  {paint(severity, f.code)} {f.title}")
            if f.workers:
                lines.append(f"    workers:  {', '.join(f.workers)}")
            lines.append(f"    {f.message}")
            if f.evidence:
                lines.extend(f"    evidence: {line}" if i == 0 else f"              {line}"
                             for i, line in enumerate(f.evidence.splitlines()))
            if f.fix:
                lines.append(f"    fix:      {f.fix}")
    lines.append(_summary_line(ordered))
    return "\n".join(lines) + "\n"


def _counts(findings: Sequence[Finding]) -> dict[str, int]:
    return {s.value: sum(1 for f in findings if f.severity is s) for s in Severity}


def _summary_line(findings: Sequence[Finding]) -> str:
    counts = _counts(findings)
    verdict = {EXIT_PASS: "PASS", EXIT_FAILED: "FAILED", EXIT_INVALID_CONFIG: "INVALID CONFIGURATION"}
    code = exit_code(findings)
    return (f"{verdict[code]}: {counts['error']} error(s), {counts['warning']} warning(s), "
            f"{counts['info']} info (exit {code})")


def to_json(findings: Sequence[Finding], **extra: Any) -> str:
    """The ``--json`` document: ``findings`` (errors first), ``summary`` counts, ``exit_code``, plus any ``extra`` keys."""
    ordered = _sorted(findings)
    document = {"findings": [f.to_dict() for f in ordered], "summary": _counts(ordered), "exit_code": exit_code(ordered)}
    document.update(extra)
    return json.dumps(document, indent=2, sort_keys=False)


def findings_from_json(text: str) -> list[Finding]:
    """The findings of a ``to_json`` document (for tools that merge several reports)."""
    return [Finding.from_dict(item) for item in json.loads(text)["findings"]]

