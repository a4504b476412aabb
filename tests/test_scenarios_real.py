"""Scenarios marked ``real = true`` on local worker processes (``mirrorlab scenario run NAME --backend real``): each
ends as its file says for real runs, through the same verdict, exit statuses, JSON and replay command as on the
simulator; namespace scenarios skip cleanly where namespaces cannot be made; every run is bounded in time."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from mirrorlab.cli import main
from mirrorlab.scenarios import find_scenario, load_catalog, load_scenario
from mirrorlab.scenarios.real_runner import run_real

#: Real runs of a second or two (the rendezvous succeeds or fails at once).
FAST = ["healthy-2x2-keras-fit", "loss-averaged-over-global-batch", "library-version-skew", "crash-mid-allreduce",
        "chief-only-collective", "preemption-resumed", "crash-resumed-by-backup-and-restore"]
#: Real runs that wait for a rendezvous timeout (a worker that never joins, a firewalled port).
SLOW = ["malformed-tf-config", "task-index-out-of-range", "firewall-cut"]


def test_the_catalog_marks_exactly_these_scenarios_real():
    assert {s.name for s in load_catalog() if s.real} == set(FAST + SLOW)


def _run_json(name: str, capsys: pytest.CaptureFixture) -> tuple[int, dict]:
    status = main(["scenario", "run", name, "--backend", "real", "--json"])
    return status, json.loads(capsys.readouterr().out)


def _check(name: str, capsys: pytest.CaptureFixture) -> dict:
    status, record = _run_json(name, capsys)
    if record["skipped"]:
        assert status == 0
        pytest.skip(f"{name} on real processes: {record['skipped']}")
    assert status == 0 and record["ok"], json.dumps(record, indent=1)  # (a string: printed whole, not cut short)
    assert record["backend"] == "real" and record["replay"] == f"mirrorlab scenario replay {name} --seed 0 --backend real"
    assert all(run["wall_time"] < 30 for run in record["runs"])
    return record


@pytest.mark.parametrize("name", FAST)
def test_fast_real_scenarios_end_as_expected(name, capsys):
    record = _check(name, capsys)
    if name == "crash-mid-allreduce":  # worker 1 was SIGKILLed at its third collective
        assert record["runs"][0]["workers"][1]["error"] == "ProcessEnded"
        assert "killed by SIGKILL" in record["runs"][0]["workers"][1]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_slow_real_scenarios_end_as_expected(name, capsys):
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout if name == "firewall-cut" \
        else ""
    record = _check(name, capsys)
    if name == "firewall-cut":
        assert all("192.0.2." in worker["message"] for worker in record["runs"][0]["workers"])  # in namespaces
        after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert set(after.split()) <= set(before.split())  # the run's namespaces are gone


def test_a_network_scenario_is_skipped_with_the_reason_where_namespaces_cannot_be_made(monkeypatch, capsys):
    import mirrorlab.scenarios.real_runner as real_runner

    monkeypatch.setattr(real_runner, "unavailable_reason", lambda faults: "creating network namespaces needs root")
    assert main(["scenario", "run", "firewall-cut", "--backend", "real"]) == 0
    out = capsys.readouterr().out
    assert "firewall-cut (seed 0) on real processes: skipped (creating network namespaces needs root)" in out
    verdict = run_real(find_scenario("firewall-cut"))
    assert verdict.skipped and not verdict.ok and verdict.runs == []


def test_a_scenario_without_a_real_counterpart_exits_2_saying_why(capsys):
    assert main(["scenario", "run", "localhost-multi-host", "--backend", "real"]) == 2
    err = capsys.readouterr().err
    assert "'localhost-multi-host' has no real counterpart (real is not true)" in err and "Fix:" in err
    assert main(["scenario", "run", "crash-mid-allreduce", "--backend", "real", "--check-determinism"]) == 2
    assert "--check-determinism compares simulated traces" in capsys.readouterr().err


def test_overrides_reach_their_worker_and_a_wrong_expectation_exits_1_with_replay(tmp_path, monkeypatch, capsys):
    (tmp_path / "overrides_job.py").write_text(textwrap.dedent("""
        import os
        import mirrorlab.tf as tf

        def main():
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
            return {"setting": os.environ.get("MY_SETTING"), "replicas": strategy.num_replicas_in_sync,
                    "total": float(total)}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers import it through the runner's sys.path
    path = tmp_path / "mine.toml"
    path.write_text(textwrap.dedent("""
        name = "mine"
        description = "two workers of two devices reduce; the file wrongly claims worker 1 fails"
        real = true
        [cluster]
        workers = 2
        devices_per_worker = 2
        [[workers]]
        worker = 1
        environ = { MY_SETTING = "on" }
        [program]
        function = "overrides_job:main"
        [expect]
        success = true
        [expect.real]
        success = false
        error = "ValueError"
        workers = [1]
    """))
    assert main(["scenario", "run", str(path), "--backend", "real"]) == 1
    out = capsys.readouterr().out
    assert "mine (seed 0) on real processes: NOT as expected" in out
    assert "expected ValueError on some worker, got every worker succeeded" in out
    assert "worker 0: returned {'setting': None, 'replicas': 4, 'total': 4.0}" in out
    assert "worker 1: returned {'setting': 'on', 'replicas': 4, 'total': 4.0}" in out
    assert f"replay: mirrorlab scenario replay {path} --seed 0 --backend real" in out


def _scenario(tmp_path, name: str, faults: str, steps: int = 3):
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(f"""
        name = "{name}"
        description = "a two-worker all-reduce with the faults below"
        real = true
        [cluster]
        workers = 2
        [program]
        builtin = "allreduce_steps"
        options = {{ steps = {steps} }}
        [expect]
        success = true
    """) + textwrap.dedent(faults))
    return load_scenario(path)


def test_a_maybe_site_is_enabled_on_real_processes_exactly_when_the_simulator_enables_it(tmp_path):
    from mirrorlab.sim.randomized_faults import activate

    scenario = _scenario(tmp_path, "maybe-crash", """
        [[faults]]
        kind = "maybe"
        fault = { kind = "crash", worker = 1, at_step = 2 }
    """)
    enabled = {seed: bool(activate(scenario.faults, seed).armed) for seed in range(8)}
    on, off = next(s for s, e in enabled.items() if e), next(s for s, e in enabled.items() if not e)
    crashed = run_real(scenario, seed=on)
    assert "killed by SIGKILL" in str(crashed.runs[0][1]) and crashed.reasons, crashed.describe()
    assert run_real(scenario, seed=off).ok


@pytest.mark.slow
@pytest.mark.parametrize("fault", ['kind = "drop"\nsrc = 1\ndst = 0', 'kind = "isolate"\nworker = 1'])
def test_drop_and_isolate_from_the_start_keep_the_rendezvous_from_completing(tmp_path, fault):
    scenario = _scenario(tmp_path, "netfault", f"[[faults]]\n{fault}\n")
    verdict = run_real(scenario)
    if verdict.skipped:
        pytest.skip(verdict.skipped)
    errors = verdict.runs[0].errors
    assert set(errors) == {0, 1}, verdict.describe()
    assert all("never answered" in str(e) and "192.0.2." in str(e) for e in errors.values())


def test_all_with_the_real_backend_runs_the_real_ones_with_progress_and_replays_one(monkeypatch, capsys):
    import mirrorlab.scenarios.command as command

    catalog = [find_scenario("packet-drops"), find_scenario("library-version-skew")]
    monkeypatch.setattr(command, "load_catalog", lambda: catalog)
    assert main(["scenario", "run", "--all", "--backend", "real"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["1 scenario(s) marked real = true; 1 run on the simulator only",
                     "[1/1] ok   library-version-skew (seed 0)"]
    assert main(["scenario", "replay", "library-version-skew", "--seed", "4", "--backend", "real"]) == 0
    out = capsys.readouterr().out
    assert "library-version-skew (seed 4) on real processes: as expected" in out
    assert "Fix: give every host the same tensorflow" in out  # every worker's full error text


def test_a_worker_still_running_at_the_wall_clock_limit_is_killed_by_its_pid(tmp_path, monkeypatch):
    import mirrorlab.scenarios.real_runner as real_runner

    (tmp_path / "stuck_job.py").write_text("import time\n\ndef main():\n    time.sleep(120)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(real_runner, "RUN_LIMIT_S", 1.0)
    path = _scenario(tmp_path, "stuck", "").path
    path.write_text(path.read_text().replace('builtin = "allreduce_steps"', 'function = "stuck_job:main"')
                    .replace("options = { steps = 3 }", ""))
    verdict = run_real(load_scenario(path))
    run = verdict.runs[0]
    assert run.wall_time < 15
    assert [e.returncode for e in run.ends] == [-9, -9]
    assert all("was still running after 1 s (the run's wall-clock limit) and was killed" in str(e)
               for e in run.errors.values())
    assert verdict.reasons[0].startswith("expected success, worker 0 failed: ProcessEnded")


TIMED_JOB = """
import time
import numpy as np
import mirrorlab.tf as tf

def main(steps=30, pause=0.1):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        w = tf.Variable(np.zeros(2, np.float32))
    for _ in range(steps):
        strategy.run(lambda: w.assign_add(tf.distribute.get_replica_context().all_reduce("sum", np.ones(2, np.float32))))
        time.sleep(pause)
    return {"weights": w.numpy().tolist()}
"""


@pytest.mark.slow
@pytest.mark.parametrize("fault, ends", [
    ('kind = "clog"\na = 0\nb = 1\nstart = 1.0\nseconds = 1.0', "success"),  # shorter than the heartbeat timeout
    ('kind = "isolate"\nworker = 1\nstart = 1.0', "has not answered heartbeats"),
])
def test_timed_network_faults_act_from_their_start_on_a_running_cluster(tmp_path, monkeypatch, fault, ends):
    (tmp_path / "timed_job.py").write_text(TIMED_JOB)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _scenario(tmp_path, "timed", f"[[faults]]\n{fault}\n").path
    path.write_text(path.read_text().replace('builtin = "allreduce_steps"', 'function = "timed_job:main"')
                    .replace("options = { steps = 3 }", ""))
    verdict = run_real(load_scenario(path))
    if verdict.skipped:
        pytest.skip(verdict.skipped)
    run = verdict.runs[0]
    assert "applied from 1 s" in run.report()
    if ends == "success":
        assert run.ok and run.values() == [{"weights": [60.0, 60.0]}] * 2 and run.wall_time > 3.0, run.report()
    else:
        assert ends in str(run.errors[0]) and "192.0.2.2" in str(run.errors[0]), verdict.describe(full=True)
