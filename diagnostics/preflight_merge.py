"""Merges the ``--json`` reports of every task's preflight into the whole cluster's view: the full reachability
graph (every ordered pair, so partitions show) and the full latency/bandwidth matrix with its ring prediction."""

from __future__ import annotations

import json
from typing import Sequence

import networkx as nx

from mirrorlab.diagnostics.findings import Finding
from mirrorlab.diagnostics.link_report import fit_links, link_findings
from mirrorlab.diagnostics.reachability import cut_pair_findings, reachability_graph

__all__ = ["ReportError", "merge_reports"]


class ReportError(ValueError):
    """A report that is not the JSON ``mirrorlab preflight --json`` prints; the message names the file."""


def merge_reports(reports: Sequence[tuple[str, str]], model_bytes: int | None = None
                  ) -> tuple[list[Finding], nx.DiGraph]:
    """The cluster-wide findings and graph of ``reports`` (``(file name, JSON text)`` of each task's preflight)."""
    tasks: list[str] = []
    edges, samples = [], {}
    for name, text in reports:
        try:
            document = json.loads(text)
            these = [str(t) for t in document["tasks"]]
            for probe in document["probes"]:
                pair = (str(probe["from"]), str(probe["to"]))
                edges.append((*pair, str(probe["status"])))
                samples[pair] = [(int(size), float(seconds)) for size, seconds in probe["samples"]]
        except (ValueError, KeyError, TypeError) as err:
            raise ReportError(f"{name} is not a `mirrorlab preflight --json` report of a multi-worker TF_CONFIG "
                              f"({type(err).__name__}: {err}); rerun preflight with --json on that task") from None
        if tasks and these != tasks:
            raise ReportError(f"{name} lists the tasks {these}, the other reports {tasks}: they come from different "
                              "clusters; merge the reports of one cluster only")
        tasks = these
    graph = reachability_graph(tasks, edges)
    return cut_pair_findings(graph, tasks) + link_findings(fit_links(samples), tasks, model_bytes), graph
