"""Trace analysis: read collective traces and explain, in plain words, desyncs, hangs and bad numbers.

``analyze_trace_files(paths)`` is what ``mirrorlab trace analyze`` runs: load (damage becomes findings), then the
desync check; the hang check only when there is no desync (a desync stops every worker, which is no hang of its
own); then the numerics checks; and a summary of what was analysed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.trace_desync import check_desync
from mirrorlab.diagnostics.trace_hang import check_hang
from mirrorlab.diagnostics.trace_load import LoadedTrace, load_trace_files, load_trace_texts
from mirrorlab.diagnostics.trace_numerics import check_numerics
from mirrorlab.diagnostics.trace_verdict import workers_text

__all__ = ["SUMMARY", "analyze_trace_files", "analyze_trace_texts", "analyze_loaded"]

SUMMARY = register_code("ML-TRC-090", "what the trace analysis covered")


def analyze_trace_files(paths: Iterable[str | Path]) -> list[Finding]:
    """Every finding about the trace files at ``paths`` (one run: one file, or one per worker)."""
    return analyze_loaded(load_trace_files(paths))


def analyze_trace_texts(sources: Sequence[tuple[str, str]]) -> list[Finding]:
    """The same for in-memory ``(name, text)`` traces, e.g. ``[("run", result.trace.to_jsonl())]``."""
    return analyze_loaded(load_trace_texts(sources))


def analyze_loaded(trace: LoadedTrace) -> list[Finding]:
    """The checks over an already loaded trace, after the findings about its files."""
    findings = list(trace.findings)
    if not trace.workers:
        return findings
    desync = check_desync(trace)
    findings += desync or check_hang(trace)
    findings += check_numerics(trace)
    seqs = {e.seq for e in trace.events}
    span = f"collectives #1..#{max(seqs)}" if seqs else "no collectives"
    findings.append(Finding(
        SUMMARY, Severity.INFO, (),
        f"analysed {workers_text(trace.workers)}: {len(trace.events)} collective events ({span}), "
        f"{len(trace.notes)} notes",
        f"run: {', '.join(f'{k}={trace.meta[k]!r}' for k in ('seed', 'workers', 'clock') if k in trace.meta)}"))
    return findings
