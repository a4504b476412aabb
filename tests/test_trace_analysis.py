"""`mirrorlab trace analyze`: real traces of small simulated programs, explained in plain words."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirrorlab.tf as tf
from mirrorlab.cli import main
from mirrorlab.diagnostics.findings import Finding, Severity, exit_code
from mirrorlab.diagnostics.trace_analysis import analyze_trace_files, analyze_trace_texts
from mirrorlab.diagnostics.trace_verdict import majority
from mirrorlab.sim import Crash, Cut, SimCluster, Slow

SITE = r"test_trace_analysis\.py:\d+ in [\w<>]+"


def _strategy():
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    return strategy, strategy.cluster_resolver.task_id


def _all_reduce(strategy, value) -> None:
    strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("sum", value))


def shapes_differ_on_worker_0():
    strategy, rank = _strategy()
    _all_reduce(strategy, np.ones(3 if rank == 0 else 4, np.float32))


def dtypes_differ_on_worker_0():
    strategy, rank = _strategy()
    _all_reduce(strategy, np.ones(2, np.float64 if rank == 0 else np.float32))


def chief_only_reduce():
    strategy, rank = _strategy()
    if rank == 0:
        strategy.reduce("sum", strategy.run(lambda: np.float32(1.0)), axis=None)
    _all_reduce(strategy, np.ones(2, np.float32))


def chief_extra_reduce_at_the_end():
    strategy, rank = _strategy()
    _all_reduce(strategy, np.ones(2, np.float32))
    if rank == 0:
        _all_reduce(strategy, np.ones(2, np.float32))


def worker_1_leaves_the_loop_early():
    strategy, rank = _strategy()
    for step in range(3):
        if rank == 1 and step == 2:
            return "left early"
        _all_reduce(strategy, np.ones(2, np.float32))


def train(steps: int = 2):
    strategy, _ = _strategy()
    with strategy.scope():
        w = tf.Variable(np.ones(3, np.float32))

    def step(x):
        g = tf.distribute.get_replica_context().all_reduce("mean", x * w)
        w.assign_sub(0.1 * g)

    for _ in range(steps):
        strategy.run(step, args=(np.ones(3, np.float32),))


def nan_on_worker_1_in_step_2():
    strategy, rank = _strategy()
    for step in range(3):
        value = np.float32(np.nan) if (rank == 1 and step == 1) else np.float32(1.0)
        _all_reduce(strategy, np.full(2, value, np.float32))


def per_replica_counter():
    strategy, _ = _strategy()
    with strategy.scope():
        counter = tf.Variable(np.zeros(2, np.float32))
    strategy.run(lambda: counter.assign_add(
        np.full(2, tf.distribute.get_replica_context().replica_id_in_sync_group, np.float32)))


def _trace(program, workers: int = 3, **kwargs) -> str:
    return SimCluster(workers=workers, seed=3, **kwargs).run(program).trace.to_jsonl()


def _analyze(text: str) -> list[Finding]:
    return analyze_trace_texts([("run.jsonl", text)])


def _only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, [f.one_line() for f in findings]
    return matching[0]


def _problems(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings if f.severity is not Severity.INFO]


def test_a_healthy_run_has_no_problem():
    findings = _analyze(_trace(train, trace_values=True))
    assert _problems(findings) == []
    summary = _only(findings, "ML-TRC-090")
    assert summary.message == "analysed workers 0, 1, 2: 12 collective events (collectives #1..#4), 6 notes"
    assert exit_code(findings) == 0


def test_a_shape_near_miss_names_both_call_sites_and_the_minority_worker():
    finding = _only(_analyze(_trace(shapes_differ_on_worker_0)), "ML-TRC-003")
    assert re.search(rf"At collective #2, workers 1, 2 called all_reduce\(SUM\) float32\[4\] at {SITE}, but worker 0 "
                     rf"called all_reduce\(SUM\) float32\[3\] at {SITE}\.", finding.message)
    assert "Same op at the same call site with different shapes (3, 4 elements)" in finding.message
    assert "Majority rule: worker 0 (1 of 3) differs from workers 1, 2" in finding.message
    assert finding.workers == ("worker:0",) and finding.severity is Severity.ERROR


def test_a_dtype_desync_is_its_own_finding():
    finding = _only(_analyze(_trace(dtypes_differ_on_worker_0)), "ML-TRC-002")
    assert "worker 0 called all_reduce(SUM) float64[2]" in finding.message
    assert finding.workers == ("worker:0",)


def test_a_collective_only_the_chief_calls_is_a_different_code_path():
    finding = _only(_analyze(_trace(chief_only_reduce)), "ML-TRC-001")
    assert re.search(rf"but worker 0 called all_reduce\(SUM\) float32\[\] at {SITE}\.", finding.message)
    assert "Different call sites at the same position" in finding.message
    assert finding.workers == ("worker:0",)


def test_a_two_worker_split_is_reported_as_a_tie_not_blamed_on_worker_0():
    finding = _only(_analyze(_trace(shapes_differ_on_worker_0, workers=2)), "ML-TRC-003")
    assert "No majority: worker 0 against worker 1 (1 each of 2)" in finding.message
    assert "likely culprit" not in finding.message
    assert finding.workers == ("worker:0", "worker:1")


def test_a_worker_that_stops_calling_collectives_is_named_with_where_it_stopped():
    finding = _only(_analyze(_trace(worker_1_leaves_the_loop_early)), "ML-TRC-010")
    assert re.search(rf"^worker 1 last completed all_reduce\(SUM\) float32\[2\] #3 at {SITE} and never entered #4, "
                     rf"which workers 0, 2 entered at {SITE}\.", finding.message)
    assert "Nothing in the trace says worker 1 died (the peers failed with DeadlockError" in finding.message
    assert finding.workers == ("worker:1",)
    assert "ML-TRC-001" not in _problems(_analyze(_trace(worker_1_leaves_the_loop_early)))


def test_a_collective_only_a_minority_reaches_blames_that_minority():
    finding = _only(_analyze(_trace(chief_extra_reduce_at_the_end)), "ML-TRC-010")
    assert finding.message.startswith("workers 1, 2 last completed all_reduce(SUM) float32[2] #2")
    assert "Only a minority entered #3: a collective that only worker 0 calls" in finding.message
    assert finding.workers == ("worker:0",)


def test_a_crashed_worker_is_dead_by_its_peers_lost_heartbeats():
    findings = _analyze(_trace(train, faults=[Crash(worker=1, at_collective=3)]))
    finding = _only(findings, "ML-TRC-011")
    assert re.search(rf"^worker 1 last completed broadcast\(root 0\) float32\[3\] #2 at {SITE} and never entered #3, "
                     rf"which workers 0, 2 entered at {SITE}\. Its peers lost its heartbeats", finding.message)
    assert finding.workers == ("worker:1",)
    assert "ML-TRC-010" not in _problems(findings)


def test_a_worker_dead_before_its_first_collective_is_named():
    finding = _only(_analyze(_trace(train, faults=[Crash(worker=1, at_collective=1)])), "ML-TRC-011")
    assert re.search(rf"^worker 1 never entered any collective, not even #1, which workers 0, 2 entered at {SITE}\.",
                     finding.message)


def test_absurd_sizes_and_nesting_in_a_trace_are_damage_not_a_hang_of_the_analysis():
    event = ('{"detail":"","dtype":"float32","end":0.0,"error":"","op":"all_reduce","replica":0,"seq":1,'
             '"shape":%s,"site":"x","start":0.0,"status":"ok","worker":%d}')
    text = "\n".join(['{"mirrorlab_trace":1,"meta":{"workers":1000000000000}}', event % ("[2]", 0),
                      event % ("[2]", 10**12), event % ("[" * 100000 + "]" * 100000, 0)]) + "\n"
    findings = _analyze(text)
    assert _only(findings, "ML-TRC-101").message == "run.jsonl: 2 of 3 records could not be read and were skipped"
    assert _only(findings, "ML-TRC-090").message.startswith("analysed worker 0:")


def test_a_network_cut_leaves_workers_stuck_inside_a_collective_every_one_reached():
    finding = _only(_analyze(_trace(train, faults=[Cut(0, 2)])), "ML-TRC-012")
    assert finding.message.startswith("workers 0, 2 entered barrier(strategy creation) #1")
    assert "none is missing" in finding.message
    assert finding.workers == ("worker:0", "worker:2")


def reduce_with_a_5_second_timeout():
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=5)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    _all_reduce(strategy, np.ones(2, np.float32))


def test_a_straggler_that_arrives_after_the_timeout_is_late_not_cut_off():
    findings = _analyze(_trace(reduce_with_a_5_second_timeout, faults=[Slow(worker=1, seconds_per_collective=20)]))
    finding = _only(findings, "ML-TRC-013")
    assert re.search(rf"^worker 1 entered barrier\(strategy creation\) #1 at {SITE} only at t=20\.000 s, after workers "
                     rf"0, 2 had given up waiting at t=5\.000 s \(DeadlineExceededError\): worker 1 is alive but slow",
                     finding.message)
    assert finding.workers == ("worker:1",) and "ML-TRC-012" not in _problems(findings)


def test_the_first_replica_and_step_with_nan_are_named_when_values_are_traced():
    finding = _only(_analyze(_trace(nan_on_worker_1_in_step_2, trace_values=True)), "ML-TRC-020")
    assert re.search(rf"^replica 1 \(worker 1\) first fed NaN/Inf values \(2 in replica 1\) into all_reduce\(SUM\) "
                     rf"float32\[2\] #3 at {SITE}, step 2; replicas 0, 2 sent finite values there\.", finding.message)
    assert finding.workers == ("worker:1",)


def test_without_traced_values_the_nan_check_says_it_was_skipped():
    findings = _analyze(_trace(nan_on_worker_1_in_step_2))
    assert "ML-TRC-020" not in _problems(findings)
    assert _only(findings, "ML-TRC-021").severity is Severity.INFO


def test_value_fields_are_absent_from_the_trace_unless_asked_for():
    plain = [json.loads(line) for line in _trace(train).splitlines()[1:]]
    valued = [json.loads(line) for line in _trace(train, trace_values=True).splitlines()]
    assert not any({"step", "nonfinite", "digest"} & set(r) for r in plain)
    assert valued[0]["meta"]["values"] is True
    reduces = [r for r in valued[1:] if r.get("op") == "all_reduce"]
    assert {r["step"] for r in reduces} == {1, 2} and {r["nonfinite"] for r in reduces} == {0}
    assert len({r["digest"] for r in reduces if r["step"] == 1}) == 1


def test_replicas_with_different_results_are_found_by_majority():
    lines = _trace(train, trace_values=True).splitlines()
    records = [json.loads(line) for line in lines]
    for r in records:
        if r.get("seq") == 3 and r.get("worker") == 2:
            r["digest"] = "000000000000"
    finding = _only(_analyze("\n".join(json.dumps(r) for r in records) + "\n"), "ML-TRC-022")
    assert "all_reduce(MEAN) float32[3] #3" in finding.message
    assert "Majority rule: replica 2 (1 of 3)" in finding.message and finding.workers == ("worker:2",)


def test_mirrored_copies_that_differ_are_reported_with_the_step():
    finding = _only(_analyze(_trace(per_replica_counter, workers=2, devices_per_worker=2)), "ML-TRC-023")
    assert finding.message.startswith("the copies of Variable:0 differ between replicas after step 1")
    assert finding.severity is Severity.WARNING


def _per_worker_files(text: str, directory: Path, keep: list[int]) -> list[Path]:
    head, *records = text.splitlines()
    header = json.loads(head)
    paths = []
    for w in keep:
        header["meta"]["worker"] = w
        mine = [line for line in records if json.loads(line)["worker"] == w]
        path = directory / f"worker-{w}.jsonl"
        path.write_text("\n".join([json.dumps(header), *mine]) + "\n")
        paths.append(path)
    return paths


def test_per_worker_files_with_one_missing_still_place_the_hang(tmp_path):
    paths = _per_worker_files(_trace(worker_1_leaves_the_loop_early), tmp_path, keep=[0, 1])
    findings = analyze_trace_files(paths)
    missing = _only(findings, "ML-TRC-102")
    assert missing.message == "no trace from worker 2 of 3: the analysis covers workers 0, 1 only"
    assert _only(findings, "ML-TRC-010").message.startswith("worker 1 last completed all_reduce(SUM) float32[2] #3")


def test_files_of_different_runs_are_flagged(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(_trace(train))
    b.write_text(SimCluster(workers=2, seed=4).run(train).trace.to_jsonl())
    assert "seed, workers, tasks differ" in _only(analyze_trace_files([a, b]), "ML-TRC-103").message


def test_a_truncated_buffer_is_a_warning_and_the_rest_is_analysed():
    text = _trace(worker_1_leaves_the_loop_early)
    findings = _analyze(text[:len(text) - 40])
    assert "cut off (the buffer ends mid-line)" in _only(findings, "ML-TRC-101").evidence
    assert "ML-TRC-010" in _problems(findings)


def test_the_cli_exit_codes_and_json(tmp_path, capsys):
    healthy, desync, junk = tmp_path / "ok.jsonl", tmp_path / "desync.jsonl", tmp_path / "junk.txt"
    healthy.write_text(_trace(train))
    desync.write_text(_trace(shapes_differ_on_worker_0))
    junk.write_text("hello\n")
    assert main(["trace", "analyze", str(healthy)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["trace", "analyze", str(desync), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["exit_code"] == 1 and document["findings"][0]["code"] == "ML-TRC-003"
    assert main(["trace", "analyze", str(junk), str(tmp_path / "absent.jsonl")]) == 2
    out = capsys.readouterr().out
    assert out.count("ML-TRC-100") == 2 and "absent.jsonl" in out and "junk.txt" in out


def odd_shape_on(worker: int):
    strategy, rank = _strategy()
    _all_reduce(strategy, np.ones(3 if rank == worker else 4, np.float32))


@settings(max_examples=10, deadline=None)
@given(workers=st.integers(3, 5), odd=st.integers(0, 4), devices=st.integers(1, 2), seed=st.integers(0, 2**16))
def test_the_odd_worker_out_is_blamed_whatever_its_rank_and_the_interleaving(workers, odd, devices, seed):
    odd %= workers
    result = SimCluster(workers=workers, devices_per_worker=devices, seed=seed).run(odd_shape_on, odd)
    finding = _only(_analyze(result.trace.to_jsonl()), "ML-TRC-003")
    assert finding.workers == (f"worker:{odd}",)
    # a worker still finishing its strategy-creation barrier when the group aborts never enters the collective
    assert re.search(rf"Majority rule: worker {odd} \(1 of [{3}-{workers}]\)", finding.message)


def test_majority_reports_ties_as_ties():
    assert majority([[0], [1, 2]]).suspects == (0,)
    assert majority([[0, 1], [2, 3], [4]]).tie
    assert majority([[3], [0, 1, 2], [4]]).suspects == (3, 4)


_SAMPLE = _trace(worker_1_leaves_the_loop_early, trace_values=True).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, len(_SAMPLE)), flips=st.lists(st.tuples(st.integers(0, len(_SAMPLE) - 1),
                                                                   st.integers(0, 255)), max_size=6))
def test_truncated_or_corrupted_traces_give_findings_never_a_traceback(cut, flips):
    data = bytearray(_SAMPLE[:cut])
    for position, byte in flips:
        if position < len(data):
            data[position] = byte
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "trace.jsonl"
        path.write_bytes(bytes(data))
        findings = analyze_trace_files([path])
    assert findings and all(isinstance(f, Finding) for f in findings)
    assert exit_code(findings) in (0, 1, 2)
    if not flips and not data.endswith((b"\n", b"}")):  # cut mid-line (or empty): the damage is a finding
        assert {"ML-TRC-100", "ML-TRC-101"} & {f.code for f in findings}
