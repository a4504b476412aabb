"""Runs the static TF_CONFIG checks on one TF_CONFIG, or on the set of every worker's, and compares the set.

A set is what a launcher hands out: one TF_CONFIG per task, which must agree on the cluster and each name a
different task. Findings that every file repeats (a duplicate address in the shared cluster) are reported once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Sequence

from mirrorlab.diagnostics.address_checks import check_address_set, check_each_address
from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.tf_config_checks import STRUCTURE_CHECKS, Check
from mirrorlab.diagnostics.tf_config_parse import parse_tf_config
from mirrorlab.diagnostics.tf_config_view import TFConfigView, read_view, task_label

__all__ = ["CLUSTERS_DISAGREE", "TASK_CLAIMED_TWICE", "TASK_WITHOUT_CONFIG", "CHECKS", "check_tf_config",
           "check_tf_config_set"]

CLUSTERS_DISAGREE = register_code("ML-CFG-030", "workers' TF_CONFIGs disagree on the cluster", invalid_config=True)
TASK_CLAIMED_TWICE = register_code("ML-CFG-031", "two TF_CONFIGs name the same task", invalid_config=True)
TASK_WITHOUT_CONFIG = register_code("ML-CFG-032", "a task of the cluster has no TF_CONFIG in the set given")

#: Every check of one TF_CONFIG, in the order they run.
CHECKS: tuple[Check, ...] = STRUCTURE_CHECKS + (check_each_address, check_address_set)


def _check_one(text: str, source: str) -> tuple[TFConfigView | None, list[Finding]]:
    config, findings = parse_tf_config(text, source)
    if config is None:
        return None, findings
    view = read_view(config, source)
    for check in CHECKS:
        findings += check(config, view)
    return view, findings


def check_tf_config(text: str, source: str = "TF_CONFIG") -> list[Finding]:
    """Every static finding about one TF_CONFIG ``text`` read from ``source`` (never raises on any text)."""
    return _check_one(text, source)[1]


def check_tf_config_set(items: Sequence[tuple[str, str]]) -> list[Finding]:
    """Findings about several workers' TF_CONFIGs, given as (source, text): each one's, once, then how they agree."""
    views: list[TFConfigView] = []
    findings: list[Finding] = []
    for source, text in items:
        view, found = _check_one(text, source)
        findings += found
        if view is not None and view.jobs:
            views.append(view)
    findings = _once(findings)
    if len(views) > 1:
        findings += _disagreements(views) + _claimed_twice(views) + _without_config(views)
    return findings


def _once(findings: list[Finding]) -> list[Finding]:
    """Merges findings that differ only in the file they came from, noting how many more files had them."""
    groups: dict[tuple, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[(f.code, f.severity, f.workers, f.message)].append(f)
    merged = []
    for group in groups.values():
        first = group[0]
        more = f"\n(the same in {len(group) - 1} more file(s))" if len(group) > 1 else ""
        merged.append(Finding(first.code, first.severity, first.workers, first.message, first.evidence + more,
                              first.fix))
    return merged


def _disagreements(views: list[TFConfigView]) -> list[Finding]:
    labels = sorted({(job, index) for v in views for job, tasks in v.jobs.items() for index in tasks})
    findings = []
    for job, index in labels:
        by_address: dict[str, list[str]] = defaultdict(list)
        for v in views:
            by_address[v.jobs.get(job, {}).get(index, "(absent)")].append(v.source)
        if len(by_address) < 2:
            continue
        label = task_label(job, index)
        evidence = "; ".join(f"{address!r} in {', '.join(sources)}" for address, sources in
                             sorted(by_address.items(), key=lambda item: -len(item[1])))
        findings.append(Finding(
            CLUSTERS_DISAGREE, Severity.ERROR, (label,), f"the TF_CONFIGs give {label} {len(by_address)} different "
            f"addresses", evidence, "Generate every worker's TF_CONFIG from one cluster description: the cluster must "
            "be identical everywhere, only \"task\" differs."))
    return findings


def _claimed_twice(views: list[TFConfigView]) -> list[Finding]:
    claims: dict[str, list[str]] = defaultdict(list)
    for v in views:
        if v.task_type and v.task_index is not None:
            claims[task_label(v.task_type, v.task_index)].append(v.source)
    return [Finding(TASK_CLAIMED_TWICE, Severity.ERROR, (label,), f"{len(sources)} TF_CONFIGs all say this is {label}",
                    f"{label} in {', '.join(sources)}", "Give every process its own task index (0, 1, ... per job).")
            for label, sources in claims.items() if len(sources) > 1]


def _without_config(views: list[TFConfigView]) -> list[Finding]:
    cluster = max(views, key=lambda v: sum(w.jobs == v.jobs for w in views)).jobs  # the most common cluster
    claimed = {task_label(v.task_type, v.task_index) for v in views if v.task_type}
    missing = [task_label(job, index) for job in ("chief", "worker") for index in sorted(cluster.get(job, {}))
               if task_label(job, index) not in claimed]
    if not missing:
        return []
    return [Finding(TASK_WITHOUT_CONFIG, Severity.INFO, tuple(missing),
                    f"no TF_CONFIG given for {', '.join(missing)}, so they were not compared",
                    f"cluster {json.dumps(cluster)}; TF_CONFIGs for {sorted(claimed)}",
                    "Pass every worker's TF_CONFIG (files or a directory) to compare the whole cluster.")]
