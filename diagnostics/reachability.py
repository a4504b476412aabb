"""Reachability as a directed graph (networkx): which task reaches which, which cut pairs explain which symptoms
over the pairs the backend really uses, whether the cluster splits into groups, and the graph as DOT.

The pairs used: the real backend's rendezvous (every worker says Hello to every peer) and heartbeats (every worker
pings every peer) use all ordered pairs, as TensorFlow's MWMS health check does; the ring all-reduce and all-gather
send from each task to the next in task order (chief, then workers by index); TensorFlow's collective group is
resolved at the collective leader (the chief, else worker 0).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import networkx as nx

from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.link_model import ring_links

__all__ = ["CUT_PAIR", "PARTITIONED", "reachability_graph", "cut_pair_findings", "to_dot"]

CUT_PAIR = register_code("ML-NET-012", "a task cannot reach a peer: what it breaks")
PARTITIONED = register_code("ML-NET-013", "the cluster splits into groups that cannot reach each other")

OK = "ok"
_COLOURS = {OK: "darkgreen", "refused": "orange", "filtered": "red", "unreachable": "gray40",
            "unresolvable": "purple", "wrong service": "brown"}


def reachability_graph(tasks: Sequence[str], edges: Iterable[tuple[str, str, str]]) -> nx.DiGraph:
    """Nodes ``tasks``; an edge ``(src, dst)`` for every probe, its ``status`` (``ok``, ``refused``, ``filtered``...)
    and whether the ring uses it."""
    graph = nx.DiGraph()
    graph.add_nodes_from(tasks)
    ring = set(ring_links(tasks))
    for src, dst, status in edges:
        graph.add_edge(src, dst, status=status, ring=(src, dst) in ring)
    return graph


def _leader(tasks: Sequence[str]) -> str | None:
    return next((t for t in tasks if t.startswith("chief")), next((t for t in tasks if t == "worker:0"), None))


def cut_pair_findings(graph: nx.DiGraph, tasks: Sequence[str]) -> list[Finding]:
    """One ML-NET-012 per probed pair that is not ok, saying what it breaks; ML-NET-013 when the pairs that are ok
    split the probed tasks into groups (only judged when every task probed every other)."""
    findings = []
    leader = _leader(tasks)
    for src, dst, status in sorted(graph.edges(data="status")):
        if status == OK:
            continue
        stalls = "hangs until its deadline" if status == "filtered" else "fails"
        breaks = [f"the backend's rendezvous ({src}'s Hello to {dst}) {stalls}, so start-up fails after "
                  "MIRRORLAB_RENDEZVOUS_TIMEOUT (60 s by default)",
                  f"{src}'s heartbeats to {dst} go unanswered, so {src} reports {dst} lost after "
                  "MIRRORLAB_HEARTBEAT_TIMEOUT"]
        if graph.edges[src, dst]["ring"]:
            breaks.insert(0, f"the ring all-reduce from {src} to its ring neighbour {dst} will hang (in TensorFlow "
                             "until CommunicationOptions.timeout_seconds, forever by default)")
        if dst == leader:
            breaks.append(f"TensorFlow resolves the collective group at the leader {dst}, so {src} hangs at its "
                          "first collective")
        findings.append(Finding(CUT_PAIR, Severity.ERROR, (src, dst), f"{src} cannot reach {dst} ({status})",
                                "; ".join(breaks),
                                f"Make {dst}'s address reachable from {src}'s host (the ML-NET finding of this pair "
                                "says how); every ordered pair must connect."))
    probed = {src for src, _ in graph.edges}
    if probed == set(tasks) and len(tasks) > 1:
        ok = nx.DiGraph([(s, d) for s, d, st in graph.edges(data="status") if st == OK])
        ok.add_nodes_from(tasks)
        groups = sorted(sorted(c) for c in nx.strongly_connected_components(ok))
        if len(groups) > 1:
            findings.append(Finding(PARTITIONED, Severity.ERROR, tuple(tasks),
                                    f"the cluster splits into {len(groups)} groups that cannot all reach each other",
                                    "groups: " + " | ".join(", ".join(g) for g in groups),
                                    "Open the network between the groups; training needs every pair."))
    return findings


def to_dot(graph: nx.DiGraph) -> str:
    """The graph in Graphviz DOT: edges coloured by status (failed ones dashed and labelled), ring edges bold."""
    lines = ["digraph reachability {", "  rankdir=LR;", "  node [shape=box];"]
    lines += [f'  "{node}";' for node in graph.nodes]
    for src, dst, data in graph.edges(data=True):
        status = data["status"]
        style = ("bold" if data["ring"] else "solid") if status == OK else "dashed"
        label = "" if status == OK else f', label="{status}"'
        lines.append(f'  "{src}" -> "{dst}" [color={_COLOURS.get(status, "black")}, style={style}{label}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
