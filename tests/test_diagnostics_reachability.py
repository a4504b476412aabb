"""The reachability graph: what each cut pair breaks (ML-NET-012), partitions (ML-NET-013), the DOT rendering, and
merging every task's `preflight --json` report with `--reports`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorlab.cli import main
from mirrorlab.diagnostics import graph_render
from mirrorlab.diagnostics.preflight_merge import ReportError, merge_reports
from mirrorlab.diagnostics.reachability import cut_pair_findings, reachability_graph, to_dot

TASKS = ["worker:0", "worker:1", "worker:2"]


def _mesh(cut: dict[tuple[int, int], str]) -> list[tuple[str, str, str]]:
    return [(f"worker:{a}", f"worker:{b}", cut.get((a, b), "ok")) for a in range(3) for b in range(3) if a != b]


def _by_pair(findings: list) -> dict[tuple[str, ...], str]:
    return {f.workers: f.evidence for f in findings if f.code == "ML-NET-012"}


def test_a_cut_ring_pair_says_the_all_reduce_will_hang() -> None:
    findings = cut_pair_findings(reachability_graph(TASKS, _mesh({(1, 2): "filtered"})), TASKS)
    [(pair, evidence)] = _by_pair(findings).items()
    assert pair == ("worker:1", "worker:2")
    assert "ring all-reduce from worker:1 to its ring neighbour worker:2 will hang" in evidence
    assert "rendezvous (worker:1's Hello to worker:2) hangs until its deadline" in evidence
    assert "leader" not in evidence and "ML-NET-013" not in {f.code for f in findings}


def test_a_cut_to_the_leader_off_the_ring_says_so_and_a_refusal_fails_rather_than_hangs() -> None:
    evidence = _by_pair(cut_pair_findings(reachability_graph(TASKS, _mesh({(1, 0): "refused"})), TASKS))
    text = evidence[("worker:1", "worker:0")]
    assert "ring" not in text.split(";")[0] and "collective group at the leader worker:0" in text
    assert "rendezvous (worker:1's Hello to worker:0) fails" in text


def test_a_partition_is_found_only_when_every_task_probed() -> None:
    cut = {(0, 2): "filtered", (1, 2): "filtered", (2, 0): "filtered", (2, 1): "filtered"}
    findings = cut_pair_findings(reachability_graph(TASKS, _mesh(cut)), TASKS)
    [split] = [f for f in findings if f.code == "ML-NET-013"]
    assert split.evidence == "groups: worker:0, worker:1 | worker:2"
    one_row = [edge for edge in _mesh(cut) if edge[0] == "worker:0"]
    assert "ML-NET-013" not in {f.code for f in cut_pair_findings(reachability_graph(TASKS, one_row), TASKS)}
    assert cut_pair_findings(reachability_graph(TASKS, _mesh({})), TASKS) == []


def test_the_dot_rendering_marks_ring_edges_and_failures() -> None:
    dot = to_dot(reachability_graph(TASKS, _mesh({(0, 2): "filtered"})))
    assert dot.startswith("digraph reachability {") and dot.rstrip().endswith("}")
    assert '"worker:0" -> "worker:1" [color=darkgreen, style=bold];' in dot
    assert '"worker:1" -> "worker:0" [color=darkgreen, style=solid];' in dot
    assert '"worker:0" -> "worker:2" [color=red, style=dashed, label="filtered"];' in dot


def test_pictures_need_graphviz_or_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = reachability_graph(TASKS, _mesh({}))
    assert graph_render.write_graph(graph, str(tmp_path / "g.dot")) is None
    assert (tmp_path / "g.dot").read_text() == to_dot(graph)
    monkeypatch.setattr(graph_render.shutil, "which", lambda name: None)
    monkeypatch.setattr(graph_render.importlib.util, "find_spec", lambda name: None)
    problem = graph_render.write_graph(graph, str(tmp_path / "g.png"))
    assert "needs Graphviz" in problem and "matplotlib" in problem and not (tmp_path / "g.png").exists()
    assert "suffix must be" in graph_render.write_graph(graph, str(tmp_path / "g.jpg"))


def _report(own: int, cut: dict[tuple[int, int], str]) -> str:
    samples = [[64, 0.0001], [262144, 0.0001 + 262144e-9]]
    probes = [{"from": a, "to": b, "status": s, "samples": samples if s == "ok" else []}
              for a, b, s in _mesh(cut) if a == f"worker:{own}"]
    return json.dumps({"findings": [], "task": f"worker:{own}", "tasks": TASKS, "probes": probes})


def test_merged_reports_give_the_whole_graph_and_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = {(2, 0): "filtered", (2, 1): "filtered", (0, 2): "refused", (1, 2): "refused"}
    findings, graph = merge_reports([(f"r{i}", _report(i, cut)) for i in range(3)], model_bytes=10**8)
    assert graph.number_of_edges() == 6
    codes = [f.code for f in findings]
    assert codes.count("ML-NET-012") == 4 and "ML-NET-013" in codes and "ML-NET-011" in codes
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(_report(i, cut))
    dot = tmp_path / "cluster.dot"
    code = main(["preflight", "--reports", *map(str, paths), "--graph", str(dot), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == document["exit_code"] == 1 and "worker:2" in dot.read_text()


def test_a_report_that_is_not_preflight_json_names_its_file(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ReportError, match="r1 is not a `mirrorlab preflight --json` report"):
        merge_reports([("r0", _report(0, {})), ("r1", "{}")])
    other = json.dumps({"tasks": ["worker:0", "worker:1"], "probes": []})
    with pytest.raises(ReportError, match="different clusters"):
        merge_reports([("r0", _report(0, {})), ("r1", other)])
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert main(["preflight", "--reports", str(bad)]) == 2
    assert "bad.json is not a `mirrorlab preflight --json` report" in capsys.readouterr().err
