"""The scenario catalog: every scenario ends as its file says; invalid files fail with the file, key and fix; the
``mirrorlab scenario`` command's exit statuses, JSON and replay."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mirrorlab.cli import main
from mirrorlab.scenarios import ScenarioError, catalog_paths, find_scenario, load_catalog, load_scenario, run_scenario

CATALOG = load_catalog()

#: The stories issue 28 asks the catalog to tell, by scenario name.
REQUIRED = {"firewall-cut", "localhost-multi-host", "malformed-tf-config", "duplicate-ports", "task-index-out-of-range",
            "device-count-mismatch", "library-version-skew", "cuda-driver-mismatch", "ld-library-path-differs",
            "uneven-data-shards", "file-sharding-too-few-files", "chief-only-collective", "checkpoint-chief-only",
            "all-workers-same-path", "loss-averaged-per-replica", "mirrored-assign-per-replica",
            "crash-mid-allreduce", "crash-resumed-by-backup-and-restore", "preemption-resumed", "straggler-worker",
            "packet-drops", "nan-from-one-replica"}

VALID = """
name = "{name}"
description = "a story"
[cluster]
workers = 2
[program]
builtin = "allreduce_steps"
[expect]
success = true
properties = ["same_on_all_workers"]
"""


def test_the_catalog_tells_every_required_story():
    names = {s.name for s in CATALOG}
    assert len(names) >= 20 and REQUIRED <= names
    assert all(len(s.description) > 80 for s in CATALOG)


@pytest.mark.parametrize("scenario", CATALOG, ids=[s.name for s in CATALOG])
def test_every_catalog_scenario_ends_as_expected(scenario):
    verdict = run_scenario(scenario)
    assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("name", ["loss-averaged-per-replica", "firewall-cut", "crash-resumed-by-backup-and-restore"])
def test_outcomes_hold_under_other_seeds_and_are_deterministic(name):
    for seed in (1, 2):
        verdict = run_scenario(find_scenario(name), seed=seed, check_determinism=True)
        assert verdict.ok and verdict.deterministic, verdict.describe()


def test_a_wrong_expectation_is_reported_with_the_reason_and_a_replay_command(tmp_path):
    path = tmp_path / "wrong.toml"
    path.write_text(VALID.format(name="wrong").replace('properties = ["same_on_all_workers"]',
                                                       'properties = ["matches_single_worker"]'))
    verdict = run_scenario(load_scenario(path), seed=5)
    assert not verdict.ok
    assert verdict.reasons == ["expected property matches_single_worker to hold, it does not"]
    assert verdict.replay == f"mirrorlab scenario replay {path} --seed 5"


def _write(tmp_path: Path, text: str, name: str = "bad") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("change, key, fix", [
    (lambda t: t.replace('name = "bad"', 'name = "other"'), "'name'", "name the file other.toml"),
    (lambda t: t.replace("workers = 2", "workers = 0"), "'cluster.workers'", "use at least 1"),
    (lambda t: t.replace("workers = 2", 'workers = "two"'), "'cluster.workers'", "write a int"),
    (lambda t: t + '[[faults]]\nkind = "meteor"\n', "'faults[0].kind'", "use one of crash, preempt"),
    (lambda t: t + '[[faults]]\nkind = "crash"\nworker = 5\nat_step = 1\n', "'faults[0].worker'",
     "use a worker index 0..1"),
    (lambda t: t + '[[faults]]\nkind = "crash"\nworker = 1\n', "'faults[0].kind'", "give the fields of Crash"),
    (lambda t: t + '[[faults]]\nkind = "cut"\na = 0\nb = 1\nport = 2222\n', "'faults[0].port'",
     "use one of kind, a, b"),
    (lambda t: t + '[[workers]]\nworker = 1\nfingerprint = { cuda = 12 }\n', "'workers[0].fingerprint.cuda'",
     "quote the value"),
    (lambda t: t.replace('builtin = "allreduce_steps"', 'function = "no_colon"'), "'program.function'",
     '"package.module:function"'),
    (lambda t: t.replace("success = true", "success = false"), "'expect.error'", "name the error class"),
    (lambda t: t.replace('"same_on_all_workers"', '"fast"'), "'expect.properties'", "use one of same_on_all_workers"),
    (lambda t: t.replace("[expect]", "[expect]\ncolour = 1"), "'expect.colour'", "use one of success"),
    (lambda t: t.replace("[cluster]", "[cluster"), "not valid TOML", "correct the syntax"),
    (lambda t: t + '[[faults]]\nkind = "maybe"\n', "'faults[0].fault'", 'fault = { kind = "crash"'),
    (lambda t: t + '[[faults]]\nkind = "maybe"\nfault = 3\n', "'faults[0].fault'", "wrap one plain fault"),
    (lambda t: t + '[[faults]]\nkind = "maybe"\nfault = { kind = "maybe", fault = { kind = "cut", a = 0, b = 1 } }\n',
     "'faults[0].fault.kind'", "inside a maybe, which wraps one plain fault. Fix: use one of crash, preempt"),
    (lambda t: t + '[[faults]]\nkind = "maybe"\nfire_probability = 1.5\nfault = { kind = "cut", a = 0, b = 1 }\n',
     "'faults[0].fire_probability'", "use a number from 0 to 1"),
    (lambda t: t + '[[faults]]\nkind = "maybe"\nenabled_probability = "often"\nfault = { kind = "cut", a = 0, b = 1 }\n',
     "'faults[0].enabled_probability'", "write a probability"),
    (lambda t: t + '[[faults]]\nkind = "maybe"\nfault = { kind = "crash", worker = 7, at_step = 1 }\n',
     "'faults[0].fault.worker'", "use a worker index 0..1"),
    (lambda t: t + '[[faults]]\nkind = "maybe"\nseconds = 1\nfault = { kind = "cut", a = 0, b = 1 }\n',
     "'faults[0].seconds'", "use one of kind, fault, enabled_probability, fire_probability"),
    (lambda t: t + '[expect.real]\nsuccess = false\nerror = "X"\n', "'expect.real'", "add real = true"),
    (lambda t: "real = true\n" + t + '[expect.real]\nspeed = 1\n', "'expect.real.speed'", "use one of success"),
    (lambda t: "real = true\n" + t + '[[faults]]\nkind = "drop"\nsrc = 0\ndst = 1\nafter = 3\n', "'faults[0].kind'",
     "after= counts messages"),
    (lambda t: "real = 1\n" + t, "'real'", "write a bool"),
    (lambda t: t + "[expect.after_restart]\nsuccess = true\n[expect.after_restart.real]\nsuccess = true\n",
     "'expect.after_restart.real'", "use one of success"),
])
def test_invalid_files_name_the_file_the_key_and_the_fix(tmp_path, change, key, fix):
    path = _write(tmp_path, change(VALID.format(name="bad")))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    text = str(info.value)
    assert str(path) in text and key in text and fix in text and "Fix:" in text


def test_a_program_that_cannot_be_imported_or_called_is_invalid(tmp_path):
    path = _write(tmp_path, VALID.format(name="bad").replace('builtin = "allreduce_steps"',
                                                             'function = "mirrorlab.nowhere:train"'))
    with pytest.raises(ScenarioError, match=r"'mirrorlab.nowhere:train' cannot be imported"):
        run_scenario(load_scenario(path))
    path = _write(tmp_path, VALID.format(name="bad") + "[program.options]\nsteeps = 3\n")
    with pytest.raises(ScenarioError, match=r"program.options.steeps.*takes no such argument.*use one of steps"):
        run_scenario(load_scenario(path))


def test_cli_exit_statuses(tmp_path, capsys):
    assert main(["scenario", "run", "firewall-cut"]) == 0
    assert "firewall-cut (seed 0): as expected" in capsys.readouterr().out
    wrong = _write(tmp_path, VALID.format(name="wrong").replace("success = true\n", 'success = false\nerror = "X"\n')
                   .replace('properties = ["same_on_all_workers"]', ""), name="wrong")
    assert main(["scenario", "run", str(wrong)]) == 1
    assert "expected X on some worker, got every worker succeeded" in capsys.readouterr().out
    bad = _write(tmp_path, VALID.format(name="nope"))
    assert main(["scenario", "run", str(bad)]) == 2
    assert "key 'name'" in capsys.readouterr().err
    assert main(["scenario", "run", "no-such-scenario"]) == 2
    assert "Fix: use one of" in capsys.readouterr().err


def test_cli_json_list_and_replay(capsys):
    assert main(["scenario", "run", "crash-mid-allreduce", "--seed", "3", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["ok"] and record["seed"] == 3
    assert record["replay"] == "mirrorlab scenario replay crash-mid-allreduce --seed 3"
    assert record["runs"][0]["workers"][1]["error"] == "SimulatedCrash"
    assert main(["scenario", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(path.stem in listing for path in catalog_paths())
    assert "UnavailableError on worker 0" in listing
    assert main(["scenario", "replay", "crash-mid-allreduce", "--seed", "3"]) == 0
    replay = capsys.readouterr().out
    assert "stopped sending heartbeats" in replay and "SimCluster(workers=2, seed=3" in replay
    assert "faults=(Crash(worker=1, at_collective=3),)" in replay


def test_run_all_prints_one_progress_line_per_scenario(capsys, monkeypatch):
    import mirrorlab.scenarios.command as command

    monkeypatch.setattr(command, "load_catalog", lambda: CATALOG[:3])
    assert main(["scenario", "run", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["[1/3]", "[2/3]", "[3/3]"]


def test_docs_table_lists_every_catalog_scenario():
    docs = (Path(__file__).resolve().parents[1] / "docs" / "scenarios.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in docs.splitlines() if line.startswith("| `")}
    assert rows == {s.name for s in CATALOG}


def test_a_users_own_program_runs_by_module_path(tmp_path, monkeypatch):
    (tmp_path / "my_job.py").write_text(textwrap.dedent("""
        import mirrorlab.tf as tf

        def main(scale=1.0):
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(scale)), axis=None)
            return {"total": float(total)}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _write(tmp_path, VALID.format(name="mine").replace('builtin = "allreduce_steps"', 'function = "my_job:main"')
                  + "[program.options]\nscale = 2.0\n[expect.returns]\ntotal = 8.0\n", name="mine")
    verdict = run_scenario(load_scenario(path))
    assert verdict.reasons == ["expected worker 0 to return total=8.0, got 4.0",
                               "expected worker 1 to return total=8.0, got 4.0"]
    path.write_text(path.read_text().replace("total = 8.0", "total = 4.0"))
    assert run_scenario(load_scenario(path)).ok


def test_file_expectations_report_what_the_work_directory_holds(tmp_path):
    path = _write(tmp_path, VALID.format(name="files").replace('builtin = "allreduce_steps"', 'builtin = "custom_loop"')
                  + '[program.options]\ncheckpoint = "all"\n', name="files")
    text = path.read_text().replace("[expect]", '[expect]\nfiles = ["model.keras"]\nabsent_files = ["ckpt-*"]')
    path.write_text(text)
    reasons = run_scenario(load_scenario(path)).reasons
    assert reasons[0].startswith("expected a file matching 'model.keras' in the work directory, found ['checkpoint'")
    assert reasons[1] == ("expected no file matching 'ckpt-*' in the work directory, found ['ckpt-1.index.json', "
                          "'ckpt-1.npz']")


def test_a_maybe_table_is_the_simulators_maybe_and_its_seed_decides_the_run(tmp_path):
    from mirrorlab.sim import Crash, Maybe

    path = _write(tmp_path, VALID.format(name="maybe") + textwrap.dedent("""
        [[faults]]
        kind = "maybe"
        fire_probability = 0.25
        fault = { kind = "crash", worker = 1, at_step = 2 }
        [[faults]]
        kind = "maybe"
        enabled_probability = 1
        fault = { kind = "slow", worker = 0, seconds_per_step = 1.5 }
    """), name="maybe")
    faults = load_scenario(path).faults
    assert faults[0] == Maybe(Crash(1, at_step=2), 0.5, 0.25)
    assert repr(faults[1]) == "Maybe(fault=Slow(worker=0, seconds_per_step=1.5), enabled_probability=1.0)"


def test_the_randomized_catalog_scenario_holds_whatever_its_seed_enables():
    scenario = find_scenario("random-stragglers-and-clogs")
    summaries = set()
    for seed in range(4):
        verdict = run_scenario(scenario, seed=seed)
        assert verdict.ok, verdict.describe()
        summaries.add(verdict.runs[0].randomized_faults)
        assert "randomized faults (decided by the seed)" in verdict.describe(full=True)
    assert len(summaries) == 4  # each seed enabled or fired a different set of sites


def test_expect_real_replaces_the_keys_it_names_for_real_runs_only():
    scenario = find_scenario("firewall-cut")
    assert scenario.real and scenario.expectation("sim") is scenario.expect
    real = scenario.expectation("real")
    assert (real.error, real.workers, real.message) == ("UnavailableError", (0, 1), ("waited", "never answered", "firewalls"))
    drops = find_scenario("packet-drops")
    assert not drops.real and drops.expectation("real") is drops.expect
