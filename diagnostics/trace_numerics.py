"""Numerics: the first replica and step that fed NaN/Inf into a collective, collective results that differ between
replicas, and mirrored variables whose copies differ.

The first two need a trace recorded with values (``SimCluster(trace_values=True)``: each event's step, non-finite
count and result digest); the third reads the ``unsynced_update`` notes every trace carries.
"""

from __future__ import annotations

from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.trace_load import LoadedTrace, describe
from mirrorlab.diagnostics.trace_verdict import majority, workers_text
from mirrorlab.trace import CollectiveEvent

__all__ = ["NONFINITE", "NO_VALUES", "RESULTS_DIFFER", "MIRRORS_DIFFER", "check_numerics"]

NONFINITE = register_code("ML-TRC-020", "a replica fed NaN or Inf into a collective")
NO_VALUES = register_code("ML-TRC-021", "the trace carries no values, so NaN/Inf and result checks were skipped")
RESULTS_DIFFER = register_code("ML-TRC-022", "replicas got different results from one collective")
MIRRORS_DIFFER = register_code("ML-TRC-023", "a mirrored variable's copies differ between replicas")

_SHOWN = 5


def check_numerics(trace: LoadedTrace) -> list[Finding]:
    """NaN/Inf origin and differing results (when values were recorded), then differing mirrors."""
    findings: list[Finding] = []
    if trace.meta.get("values") is True:
        findings += _first_nonfinite(trace) + _differing_results(trace)
    elif trace.events:
        findings.append(Finding(
            NO_VALUES, Severity.INFO, (), "this trace records no values: where a NaN/Inf first appeared and whether "
            "replicas got the same results cannot be told", "the trace header has no \"values\": true",
            "Record the run again with SimCluster(..., trace_values=True) (or Trace(record_values=True))."))
    return findings + _differing_mirrors(trace)


def _first_nonfinite(trace: LoadedTrace) -> list[Finding]:
    bad = sorted((e for e in trace.events if (e.nonfinite or 0) > 0),
                 key=lambda e: (e.step or 0, e.seq, e.start, e.replica))
    if not bad:
        return []
    first = bad[0]
    same = [e for e in bad if e.seq == first.seq]
    replicas = sorted({e.replica for e in same})
    workers = sorted({e.worker for e in same})
    clean = sorted({e.replica for e in trace.events if e.seq == first.seq and not e.nonfinite})
    step = f"step {first.step}" if first.step else "before the first step"
    message = (f"{workers_text(replicas, 'replica')} ({workers_text(workers)}) first fed NaN/Inf values "
               f"({first.nonfinite} in replica {first.replica}) into {describe(first)} #{first.seq} at {first.site}, "
               f"{step}" + (f"; {workers_text(clean, 'replica')} sent finite values there." if clean else "."))
    evidence = [f"replica {e.replica} (worker {e.worker}): {e.nonfinite} non-finite in #{e.seq} at {e.site}, "
                f"step {e.step}" for e in bad[:_SHOWN]]
    if len(bad) > _SHOWN:
        evidence.append(f"... {len(bad) - _SHOWN} more events with non-finite inputs")
    return [Finding(NONFINITE, Severity.ERROR, tuple(trace.worker_label(w) for w in workers), message,
                    "\n".join(evidence),
                    f"Look at what replica {first.replica} computed in step {first.step} before {first.site}: its "
                    "input batch, a division or log of zero, a too-high learning rate; on one worker only, compare "
                    "its libraries and driver with the others' (`mirrorlab diagnose fp-*.json`).")]


def _differing_results(trace: LoadedTrace) -> list[Finding]:
    by_seq: dict[int, list[CollectiveEvent]] = {}
    for e in trace.events:
        if e.status == "ok" and e.digest is not None:
            by_seq.setdefault(e.seq, []).append(e)
    for seq in sorted(by_seq):
        events = by_seq[seq]
        sides: dict[str, list[int]] = {}
        for e in events:
            sides.setdefault(e.digest, []).append(e.replica)
        if len(sides) < 2:
            continue
        verdict = majority(list(sides.values()))
        workers = sorted({e.worker for e in events if e.replica in verdict.suspects} if verdict.suspects
                         else {e.worker for e in events})
        evidence = "\n".join(f"{workers_text(rs, 'replica')}: result digest {d}" for d, rs in sides.items())
        return [Finding(RESULTS_DIFFER, Severity.ERROR, tuple(trace.worker_label(w) for w in workers),
                        f"{describe(events[0])} #{seq} at {events[0].site} gave different results on different "
                        f"replicas, which a sound collective never does. {verdict.sentence('replica')}", evidence,
                        "Compare the suspect workers' libraries, drivers and hardware with the others' "
                        "(`mirrorlab diagnose fp-*.json`); a corrupted transfer or a faulty device gives this too.")]
    return []


def _differing_mirrors(trace: LoadedTrace) -> list[Finding]:
    """From ``unsynced_update`` notes: per variable, the first step whose copies differ across replicas."""
    copies: dict[tuple[str, int], dict[int, str]] = {}
    for note in trace.notes:
        d = note.details
        if note.note != "unsynced_update" or not _well_formed(d):
            continue
        copies.setdefault((d["variable"], d["step"]), {}).update(zip(d["replicas"], d["digests"]))
    findings: list[Finding] = []
    reported: set[str] = set()
    for (variable, step), by_replica in sorted(copies.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if variable in reported or len(set(by_replica.values())) < 2:
            continue
        reported.add(variable)
        sides: dict[str, list[int]] = {}
        for replica, digest in by_replica.items():
            sides.setdefault(digest, []).append(replica)
        verdict = majority(list(sides.values()))
        findings.append(Finding(
            MIRRORS_DIFFER, Severity.WARNING, (),
            f"the copies of {variable} differ between replicas after step {step}: it was updated in replica "
            f"context without aggregation, so each replica kept its own value. {verdict.sentence('replica')}",
            "\n".join(f"{workers_text(rs, 'replica')}: digest {d}" for d, rs in sides.items()),
            "Create the variable with aggregation=SUM or MEAN, or update it in cross-replica context "
            "(Keras' BatchNormalization moving statistics differ per replica on purpose, as in TF)."))
    return findings


def _well_formed(details: dict) -> bool:
    replicas, digests = details.get("replicas"), details.get("digests")
    return (isinstance(details.get("variable"), str) and isinstance(details.get("step"), int)
            and isinstance(replicas, list) and isinstance(digests, list) and len(replicas) == len(digests)
            and all(isinstance(r, int) for r in replicas) and all(isinstance(d, str) for d in digests))
