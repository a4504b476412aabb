"""`mirrorlab trace export`: simulator traces and flight-recorder dumps as Chrome trace timelines."""

from __future__ import annotations

import importlib.util
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirrorlab.tf as tf
from mirrorlab.backend.flight_recorder import RECORDER_DIR_VAR, FlightRecorder
from mirrorlab.cli import main
from mirrorlab.diagnostics.trace_export import export_trace_files
from mirrorlab.sim import Crash, Cut, Preempt, SimCluster, Slow
from mirrorlab.trace import CollectiveEvent, TraceNote

STEPS = 3


def train():
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    for _ in range(STEPS):
        strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("sum", np.ones(4, np.float32)))


def _run(*faults, workers: int = 2, seed: int = 5):
    return SimCluster(workers=workers, devices_per_worker=2, seed=seed, latency=0.001, bandwidth=1e6,
                      faults=faults).run(train)


def _export(tmp_path: Path, text: str, name: str = "run.jsonl") -> tuple[int, dict]:
    source, out = tmp_path / name, tmp_path / f"{name}.json"
    source.write_text(text)
    status = main(["trace", "export", str(source), "-o", str(out)])
    return status, json.loads(out.read_text())


def _spans(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def _names(doc: dict, kind: str) -> dict:
    return {(e["pid"], e.get("tid")): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == kind}


def _assert_no_overlap(doc: dict) -> None:
    by_track: dict[tuple[int, int], list[dict]] = {}
    for span in _spans(doc):
        by_track.setdefault((span["pid"], span["tid"]), []).append(span)
    for track, spans in by_track.items():
        spans.sort(key=lambda s: (s["ts"], s["args"]["seq"]))
        for a, b in zip(spans, spans[1:]):
            assert b["ts"] >= a["ts"] + a["dur"], (track, a, b)


def test_healthy_run_has_a_track_per_worker_and_replica(tmp_path):
    result = _run()
    assert result.ok
    status, doc = _export(tmp_path, result.trace.to_jsonl())
    assert status == 0
    assert _names(doc, "process_name") == {(1, None): "worker 0 (worker:0)", (2, None): "worker 1 (worker:1)"}
    assert _names(doc, "thread_name") == {(1, 0): "notes and faults", (2, 0): "notes and faults",
                                          (1, 1): "replica 0", (1, 2): "replica 1",
                                          (2, 3): "replica 2", (2, 4): "replica 3"}
    spans = _spans(doc)
    assert len(spans) == len(result.trace) == 4 * (1 + STEPS)  # the creation barrier, then one all-reduce a step
    reduces = [s for s in spans if s["args"]["op"] == "all_reduce"]
    assert {s["name"] for s in reduces} == {"all_reduce(SUM) float32[4]"}
    assert {(s["args"]["dtype"], tuple(s["args"]["shape"]), s["args"]["status"]) for s in reduces} == \
        {("float32", (4,), "ok")}
    assert all(s["dur"] > 0 and "test_trace_export.py" in s["args"]["site"] for s in reduces)  # latency: real spans
    assert sorted(s["args"]["seq"] for s in spans if (s["pid"], s["tid"]) == (1, 1)) == list(range(1, STEPS + 2))
    assert not [e for e in doc["traceEvents"] if e["ph"] == "i"]  # no fault fired, nothing noted
    _assert_no_overlap(doc)


def test_crash_shows_the_fault_and_the_failed_collectives(tmp_path):
    result = _run(Crash(1, at_step=2))
    assert not result.ok
    status, doc = _export(tmp_path, result.trace.to_jsonl())
    assert status == 0
    faults = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert [(f["cat"], f["pid"], f["tid"], f["args"]["effect"], f["args"]["fault"]) for f in faults] == \
        [("fault", 2, 0, "crash", "Crash(worker=1, at_step=2)")]
    failed = [s for s in _spans(doc) if s["args"]["status"] != "ok"]
    assert failed and {s["pid"] for s in failed} == {1}  # the survivor's collective fails, with its error
    assert all(s["cat"] == "collective,error" and "UnavailableError" in s["args"]["error"] for s in failed)
    assert all(s["ts"] + s["dur"] >= faults[0]["ts"] for s in failed)
    _assert_no_overlap(doc)


def test_cut_records_each_lost_message_on_the_sender(tmp_path):
    result = _run(Cut(0, 1))
    status, doc = _export(tmp_path, result.trace.to_jsonl())
    assert status == 0
    lost = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert lost and {e["args"]["effect"] for e in lost} == {"message lost"}
    assert {(e["pid"] - 1, e["args"]["dst"]) for e in lost} == {(0, 1), (1, 0)}
    assert len(lost) == len(result.trace.notes)  # each lost message counted (lost_so_far keeps them distinct)
    assert "lost" in result.report()
    assert any(s["args"]["status"] == "error" for s in _spans(doc))
    _assert_no_overlap(doc)


def test_slow_and_preempt_faults_become_instants_and_no_fault_keeps_the_trace():
    slow = _run(Slow(1, seconds_per_step=0.25))
    stalls = [n for n in slow.trace.notes if n.note == "fault"]
    assert [(n.worker, n.details) for n in stalls] == [(1, {"effect": "stall", "seconds": 0.25})] * STEPS
    preempted = _run(Preempt(0, at_step=2))
    assert [(n.worker, n.details["effect"]) for n in preempted.trace.notes] == [(0, "preemption notice")]
    never_fires = _run(Crash(1, at_step=STEPS + 5))
    assert never_fires.trace.to_jsonl() == _run().trace.to_jsonl()  # a fault that never acts leaves no trace


def test_crash_inside_a_checkpoint_save_is_noted(tmp_path):
    def save_twice():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = tf.Variable(np.zeros(2, np.float32))
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), str(tmp_path), max_to_keep=2)
        manager.save()
        manager.save()

    result = SimCluster(workers=2, faults=(Crash(0, during_save=2),)).run(save_twice)
    assert [(n.worker, n.details["effect"], n.details["fault"]) for n in result.trace.notes] == \
        [(0, "crash", "Crash(worker=0, during_save=2)")]
    assert "in the middle of save #2" in result.trace.notes[0].details["message"]


def test_export_is_deterministic(tmp_path):
    first = _run(Crash(0, at_collective=3), seed=11).trace.to_jsonl()
    assert _run(Crash(0, at_collective=3), seed=11).trace.to_jsonl() == first
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    (tmp_path / "t.jsonl").write_text(first)
    assert main(["trace", "export", str(tmp_path / "t.jsonl"), "-o", str(a)]) == 0
    assert main(["trace", "export", str(tmp_path / "t.jsonl"), "-o", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()


def test_flight_recorder_dumps_merge_into_one_timeline(tmp_path, monkeypatch):
    """Two workers' dumps (wall clock): times become microseconds since the earliest record."""
    monkeypatch.setenv(RECORDER_DIR_VAR, str(tmp_path))
    epoch = 1_790_000_000.0
    paths = []
    for rank in range(2):
        recorder = FlightRecorder({"workers": 2, "devices_per_worker": 1, "clock": "wall", "worker": rank,
                                   "tasks": ["/job:chief/replica:0/task:0", "/job:worker/replica:0/task:0"],
                                   "task": ["/job:chief/replica:0/task:0", "/job:worker/replica:0/task:0"][rank]})
        for seq in (1, 2):
            recorder.add(CollectiveEvent(rank, rank, seq, "all_reduce", "SUM", "float32", [8],
                                         epoch + seq + rank * 0.1, epoch + seq + 0.5, "train.py:9 in step",
                                         "ok" if seq == 1 else "error", "" if seq == 1 else "UnavailableError: x"))
        recorder.add_note(TraceNote("unsynced_update", rank, epoch + 1.7, "train.py:12 in step", {"variable": "v"}))
        paths.append(recorder.dump("error"))
    out = tmp_path / "out.json"
    assert main(["trace", "export", *paths, "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["otherData"]["clock"] == "wall" and doc["otherData"]["time_origin_s"] == epoch + 1
    assert _names(doc, "process_name") == {(1, None): "worker 0 (chief:0)", (2, None): "worker 1 (worker:0)"}
    spans = sorted(_spans(doc), key=lambda s: (s["pid"], s["ts"]))
    assert [(s["pid"], s["tid"]) for s in spans] == [(1, 1), (1, 1), (2, 2), (2, 2)]
    assert [v for s in spans for v in (s["ts"], s["dur"])] == pytest.approx(  # 1 us: wall-clock float precision
        [0.0, 5e5, 1e6, 5e5, 1e5, 4e5, 1.1e6, 4e5], abs=1.0)
    assert [e["cat"] for e in doc["traceEvents"] if e["ph"] == "i"] == ["note", "note"]


def test_unreadable_input_is_exit_2_without_output(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a trace\n")
    out = tmp_path / "out.json"
    assert main(["trace", "export", str(bad), str(tmp_path / "missing.jsonl"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "ML-TRC-100" in err and "missing.jsonl" in err and "nothing written" in err
    assert not out.exists()


def test_unwritable_output_is_a_clear_error(tmp_path, capsys):
    source = tmp_path / "t.jsonl"
    source.write_text(_run().trace.to_jsonl())
    assert main(["trace", "export", str(source), "-o", str(tmp_path / "no-such-dir" / "out.json")]) == 2
    assert "cannot write" in capsys.readouterr().err


_HEALTHY = None


def _healthy_lines() -> list[str]:
    global _HEALTHY
    if _HEALTHY is None:
        _HEALTHY = _run(Crash(1, at_step=2)).trace.to_jsonl().splitlines()
    return _HEALTHY


_DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.integers(0, 5000)),
    st.tuples(st.just("line"), st.integers(0, 30), st.text(max_size=60)),
    st.tuples(st.just("field"), st.integers(1, 30), st.sampled_from(["start", "end", "time", "worker", "replica",
                                                                    "seq", "shape", "details", "error"]),
              st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                        st.text(max_size=5), st.lists(st.integers(), max_size=3),
                        st.dictionaries(st.text(max_size=3), st.floats(), max_size=2))),
)


def _damage(lines: list[str], damage: tuple) -> str:
    lines = list(lines)
    kind = damage[0]
    if kind == "cut":
        return "\n".join(lines)[:damage[1]]
    if kind == "line":
        lines.insert(min(damage[1], len(lines)), damage[2])
        return "\n".join(lines) + "\n"
    n = min(damage[1], len(lines) - 1)
    record = json.loads(lines[n])
    record[damage[2]] = damage[3]
    lines[n] = json.dumps(record)
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damages=st.lists(_DAMAGE, min_size=1, max_size=3))
def test_damaged_input_gives_a_partial_export_or_a_clear_error(damages):
    text = "\n".join(_healthy_lines()) + "\n"
    for damage in sorted(damages, key=lambda d: ["field", "line", "cut"].index(d[0])):  # fields of intact records
        text = _damage(text.splitlines(), damage)
    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "t.jsonl", Path(folder) / "t.json"
        source.write_text(text)
        status = main(["trace", "export", str(source), "-o", str(out)])
        assert status in (0, 2)
        if status == 0:
            doc = json.loads(out.read_text(), parse_constant=_no_constants)  # strict JSON: no NaN/Infinity
            assert len(_spans(doc)) <= len(_healthy_lines())
            assert all(s["dur"] >= 0 for s in _spans(doc))
        else:
            assert not out.exists()


def _no_constants(name: str):
    raise AssertionError(f"the export contains {name}, which is not JSON")


def test_export_of_loaded_trace_lists_skipped_records(tmp_path):
    lines = _healthy_lines()
    record = json.loads(lines[1])
    record["end"] = float("inf")
    (tmp_path / "t.jsonl").write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    timeline = export_trace_files([tmp_path / "t.jsonl"])
    assert len(timeline.skipped) == 1 and "not a finite number" in timeline.skipped[0]
    assert timeline.spans == len(lines) - 2 - sum('"note"' in ln for ln in lines)


def test_docs_picture_script_draws_a_scenario(tmp_path):
    """``docs/make_timeline_png.py`` (matplotlib is optional: skipped without it) draws a catalog scenario."""
    pytest.importorskip("matplotlib")
    script = Path(__file__).resolve().parents[1] / "docs" / "make_timeline_png.py"
    spec = importlib.util.spec_from_file_location("make_timeline_png", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "t.png"
    assert module.main(["crash-mid-allreduce", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size < 200_000
