"""Findings from the timed transfers: the per-pair latency/bandwidth matrix, the slow links and nodes it names, and
the ring all-reduce time the alpha-beta model predicts for a model size."""

from __future__ import annotations

from typing import Mapping, Sequence

from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.link_model import (LinkFit, fit_link, format_rate, format_seconds, predict_ring,
                                              ring_links, slow_links, slow_nodes)

__all__ = ["SLOW_LINK", "SLOW_NODE", "LINK_MATRIX", "fit_links", "link_findings"]

SLOW_LINK = register_code("ML-NET-009", "one link is much slower than the others")
SLOW_NODE = register_code("ML-NET-010", "every link of one task is slow: the task's host or its network card")
LINK_MATRIX = register_code("ML-NET-011", "the measured links and the predicted ring all-reduce time")

Pair = tuple[str, str]


def fit_links(samples: Mapping[Pair, Sequence[tuple[int, float]]]) -> dict[Pair, LinkFit]:
    """An alpha-beta fit for every link whose samples span two message sizes (a link cut short by the deadline after
    its small messages has none)."""
    return {pair: fit_link(got) for pair, got in samples.items() if len({size for size, _ in got}) >= 2}


def link_findings(fits: Mapping[Pair, LinkFit], tasks: Sequence[str], model_bytes: int | None) -> list[Finding]:
    """Slow links (unless a slow node explains them), slow nodes, and the matrix with the ring prediction."""
    if not fits:
        return []
    findings = []
    nodes = slow_nodes(fits)
    for node in nodes:
        findings.append(Finding(SLOW_NODE, Severity.WARNING, (node,), f"every measured link of {node} is slow",
                                "; ".join(f"{a} -> {b}: {why}" for (a, b), why in slow_links(fits).items()
                                          if node in (a, b)),
                                f"Check {node}'s host: CPU load, its network card's speed and errors (ethtool -S), "
                                "and its place in the network; one slow worker slows every synchronous step."))
    for (a, b), why in slow_links(fits).items():
        if a in nodes or b in nodes:
            continue
        findings.append(Finding(SLOW_LINK, Severity.WARNING, (a, b), f"the link {a} -> {b} is slow: {why}",
                                _describe(fits, [(a, b)]),
                                "Check the route between these two hosts (traceroute, tc qdisc show, MTU, a "
                                "congested or misconfigured switch port); a ring all-reduce runs at its slowest link."))
    findings.append(_matrix(fits, tasks, model_bytes))
    return findings


def _matrix(fits: Mapping[Pair, LinkFit], tasks: Sequence[str], model_bytes: int | None) -> Finding:
    message = f"measured {len(fits)} link(s)"
    if model_bytes:
        seconds, bottleneck, missing = predict_ring(fits, tasks, model_bytes)
        ring = " -> ".join(list(tasks) + [tasks[0]]) if len(tasks) > 1 else tasks[0]
        if bottleneck is None:
            message += f"; no link of the ring {ring} was measured here, so no all-reduce prediction"
        else:
            partial = (f" (from the ring links measured here; {len(missing)} of {len(ring_links(tasks))} missing: run "
                       "preflight on every task and merge the reports with --reports)") if missing else ""
            message += (f"; a ring all-reduce of {model_bytes} bytes over {len(tasks)} workers ({ring}) is predicted "
                        f"at {format_seconds(seconds)} by T = 2(n-1)alpha + 2(n-1)/n S beta, bounded by "
                        f"{bottleneck[0]} -> {bottleneck[1]}{partial}")
    return Finding(LINK_MATRIX, Severity.INFO, tuple(tasks), message, _describe(fits, sorted(fits)),
                   "Pass --model-bytes (the model's size in bytes) for the predicted all-reduce time per step.")


def _describe(fits: Mapping[Pair, LinkFit], pairs: Sequence[Pair]) -> str:
    return "; ".join(f"{a} -> {b}: alpha {format_seconds(fits[(a, b)].alpha_s)}, "
                     f"bandwidth {format_rate(fits[(a, b)].bandwidth)}" for a, b in pairs)
