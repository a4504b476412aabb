"""The command line: --version, one-line argument errors with exit status 2, a closed pipe without a traceback,
an honest demo, and ``mirrorlab run`` of a user's script on a simulated cluster (report, exit 0/1)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mirrorlab._version import __version__
from mirrorlab.cli import CLOSED_PIPE, main

TRAIN = """\
import json, os, sys
import mirrorlab.tf as tf


def main():
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
    {extra}
    replicas = strategy.num_replicas_in_sync
    print(f"worker {{index}} of {{replicas}} replicas: sum {{float(total)}}, argv {{sys.argv[1:]}}")


if __name__ == "__main__":
    main()
"""


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """``main(argv)``'s exit status (argparse's exits included), stdout and stderr."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def _script(tmp_path: Path, extra: str = "pass") -> str:
    path = tmp_path / "train.py"
    path.write_text(TRAIN.format(extra=extra))
    return str(path)


def test_version(capsys: pytest.CaptureFixture) -> None:
    assert _run(capsys, "--version") == (0, f"mirrorlab {__version__}\n", "")


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"], ["run", "--help"]])
def test_help_reads_as_text_not_markup(capsys: pytest.CaptureFixture, argv: list[str]) -> None:
    status, out, _ = _run(capsys, *argv)
    assert status == 0 and "usage: mirrorlab" in out and "``" not in out


def test_demo_names_the_workers_that_divide_the_global_batch(capsys: pytest.CaptureFixture) -> None:
    assert _run(capsys, "demo", "--workers", "3") == (
        2, "", "mirrorlab demo: error: --workers 3 gives 6 replicas; the demo's global batch 16 needs a divisor: use "
               "--workers 1, 2, 4 or 8, or --global-batch\n")


@pytest.mark.parametrize(("argv", "says"), [
    (["demo", "--workers", "0"], "argument --workers: 0 is too small: use 1 or more"),
    (["demo", "--workers", "-2"], "argument --workers: -2 is too small"),
    (["demo", "--workers", "two"], "argument --workers: 'two' is not a whole number"),
    (["demo", "--steps", "0"], "argument --steps: 0 is too small"),
    (["demo", "--devices-per-worker", "0"], "argument --devices-per-worker/--devices: 0 is too small"),
    (["demo", "--global-batch", "12", "--devices", "8"], "use fewer --devices-per-worker, or --global-batch"),
    (["demo", "--", "x"], "demo takes no arguments after --"),
    ([], "the following arguments are required: COMMAND"),
    (["run", "train.py", "--workers", "0"], "argument --workers: 0 is too small"),
    (["run", "train.py", "--fault", "crash:1@stp=3"], "fault 'crash:1@stp=3': expected crash:WORKER@step=N"),
    (["run", "train.py", "--fault", "drop:0-1:1.5"], "probability=1.5 must be a probability between 0 and 1"),
    (["run", "train.py", "--fault", "cut:0-2"], "Cut(a=0, b=2): b=2 is not a worker of this 2-worker cluster"),
    (["run", "train.py", "--fault", "isolate:2@1.0"], "Isolate(worker=2, start=1.0): worker=2 is not a worker"),
    (["run", "train.py", "--fault", "maybe:0.5:crash:3@step=1"], "worker=3 is not a worker of this 2-worker"),
    (["run", "train.py", "--fault", "clog:0-1@1+0"], "seconds=0.0 must be a finite number > 0"),
    (["run", "missing.py"], "script 'missing.py': no such file"),
])
def test_a_bad_command_line_is_one_line_and_status_2(capsys: pytest.CaptureFixture, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                                     says: str) -> None:
    monkeypatch.chdir(tmp_path)
    _script(tmp_path)
    status, out, err = _run(capsys, *argv)
    assert (status, out) == (2, "") and says in err and err.count("\n") == 1 and err.startswith("mirrorlab")


def test_demo_says_it_is_simulated_and_sends_users_to_run(capsys: pytest.CaptureFixture) -> None:
    status, out, _ = _run(capsys, "demo", "--workers", "4", "--devices", "1", "--steps", "2")
    assert status == 0 and "4 workers x 1 devices (4 replicas in sync)" in out
    assert "simulated" in out and "mirrorlab run train.py --workers 4 --devices-per-worker 1" in out
    assert "TF_CONFIG=" not in out and "python train.py" not in out


def test_a_closed_pipe_ends_quietly() -> None:
    """``mirrorlab demo | head -1`` where head has gone: no traceback, SIGPIPE's status."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "mirrorlab", "demo", "--steps", "1"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (CLOSED_PIPE, "")


def test_run_runs_the_script_as_main_on_every_worker(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    status, out, err = _run(capsys, "run", _script(tmp_path), "--workers", "2", "--devices-per-worker", "2",
                            "--seed", "5", "--", "--epochs", "3")
    assert (status, err) == (0, "")
    for w in (0, 1):
        assert f"worker {w} of 4 replicas: sum 4.0, argv ['--epochs', '3']" in out
        assert f"  worker {w}: returned None" in out
    assert "simulated run: seed=5" in out
    assert out.rstrip().endswith(f"same run again: mirrorlab run {tmp_path / 'train.py'} --workers 2 "
                                 "--devices-per-worker 2 --seed 5 -- --epochs 3")


def test_run_with_a_crash_fault_reports_it_and_exits_1(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    status, out, _ = _run(capsys, "run", _script(tmp_path), "--fault", "crash:1@step=1")
    assert status == 1 and "worker 1: crashed at" in out and "(Crash(worker=1, at_step=1)" in out
    assert "--fault crash:1@step=1" in out


def test_run_with_partition_and_randomized_faults(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert _run(capsys, "run", _script(tmp_path), "--fault", "clog:0-1@0+2.5")[0] == 0
    status, out, _ = _run(capsys, "run", _script(tmp_path), "--fault", "maybe:1:crash:1@step=1")
    assert status == 1 and "enabled, fired 1 time(s): worker 1 before step 1" in out


@pytest.mark.parametrize(("extra", "status"), [
    ("sys.exit(0)", 0), ("sys.exit()", 0), ("sys.exit(3)", 1), ("{}['missing'] if index == 1 else None", 1)])
def test_run_exits_as_the_workers_did(capsys: pytest.CaptureFixture, tmp_path: Path, extra: str,
                                      status: int) -> None:
    assert _run(capsys, "run", _script(tmp_path, extra))[0] == status


def test_run_names_a_syntax_error_in_one_line(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(textwrap.dedent("""\
        x = 1
        def oops(:
        """))
    status, out, err = _run(capsys, "run", str(path))
    assert (status, out) == (1, "") and err.startswith(f"mirrorlab run: {path}, line 2: SyntaxError: ")
    assert err.count("\n") == 1


def test_run_leaves_argv_and_path_as_they_were(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    argv, path = sys.argv[:], sys.path[:]
    _run(capsys, "run", _script(tmp_path), "--", "--flag")
    assert (sys.argv, sys.path) == (argv, path)
