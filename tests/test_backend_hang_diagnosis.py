"""Real worker processes on loopback whose collective hangs: the survivors' errors carry the coded finding the trace
analysis would give (which worker never entered which collective where, alive or finished, dead or silent), learned
from their own state and what each peer answers over the heartbeat channel. Every process is bounded in time and only
the processes a test started are signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_backend_processes import LIMIT, PROGRAMS, _finish as finish_process


def _launch(tmp_path: Path, workers: int, mode: str, transport: str = "grpc") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRRORLAB_") and k != "TF_CONFIG"}
    env.update(MIRRORLAB_HEARTBEAT_TIMEOUT="1.5", MIRRORLAB_TRANSPORT=transport,
               MIRRORLAB_FLIGHT_RECORDER_DIR=str(tmp_path))
    return subprocess.Popen([sys.executable, "-m", "mirrorlab", "launch", "--workers", str(workers), "--stop-grace",
                             "2", PROGRAMS, "hang_on_worker_1", mode], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, lines: Sequence[str] = ()) -> str:
    """The launcher's whole output (``lines`` already read, then the rest) once it ends, bounded in time."""
    return "".join(lines) + finish_process(proc, LIMIT)


def _signal_worker_1_when_ready(proc: subprocess.Popen, sig: int) -> list[str]:
    """Send ``sig`` to worker 1 once it printed READY; the launcher's output so far."""
    lines, end = [], time.monotonic() + LIMIT
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[worker 1] READY pid "):
            time.sleep(1.0)  # a few heartbeats (every 0.3 s) tell the others where worker 1 sleeps
            os.kill(int(line.split()[-1]), sig)
            return lines
        assert time.monotonic() < end, "workers never got ready"
    pytest.fail("".join(lines))


def _finding_lines(out: str, worker: int) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"[worker {worker}]   ML-TRC-")]


@pytest.mark.parametrize("transport", ["grpc", pytest.param("shm", marks=pytest.mark.slow)])
def test_a_worker_that_skips_a_collective_is_named_alive_by_the_survivors(tmp_path: Path, transport: str) -> None:
    out = _finish(_launch(tmp_path, 3, "skip", transport))
    # Both survivors time out at about the same moment; one may hear of the other's timeout first (its abort), as
    # TF allows: then it says so, and still names worker 1. At least one timed out on its own.
    own = [f"[worker {s}] mirrorlab.errors.DeadlineExceededError: Collective has timed out" in out for s in (0, 2)]
    passed_on = [f"[worker {s}] mirrorlab.errors.DeadlineExceededError: Collective ops is aborted by: Collective has "
                 "timed out" in out for s in (0, 2)]
    assert any(own) and all(a or b for a, b in zip(own, passed_on)), out
    _assert_both_survivors_name_worker_1_alive(out, tmp_path)


def test_a_survivor_that_hears_of_the_timeout_from_a_peer_still_names_the_worker(tmp_path: Path) -> None:
    out = _finish(_launch(tmp_path, 3, "skip_uneven"))  # worker 2 would wait twice as long as worker 0
    assert "[worker 0] mirrorlab.errors.DeadlineExceededError: Collective has timed out" in out, out
    assert "[worker 2] mirrorlab.errors.DeadlineExceededError: Collective ops is aborted by: Collective has timed " \
           "out during execution." in out, out
    _assert_both_survivors_name_worker_1_alive(out, tmp_path)


def _assert_both_survivors_name_worker_1_alive(out: str, tmp_path: Path) -> None:
    for survivor in (0, 2):
        [finding] = _finding_lines(out, survivor)
        assert ("ML-TRC-010 error [worker:1]: worker 1 last completed all_reduce(SUM) float32[4] #3 at "
                "backend_programs.py:") in finding, out
        assert "never entered #4, which workers 0, 2 entered at backend_programs.py:" in finding
        assert "worker 1 still answers heartbeats and has called no collective for " in finding  # its recorder
        assert "s: it is alive but stopped calling collectives" in finding and "Majority rule: worker 1" in finding
        assert f"[worker {survivor}]   Worker {survivor}'s flight recorder is written to {tmp_path}" in out


def test_a_worker_that_ends_early_is_named_finished(tmp_path: Path) -> None:
    out = _finish(_launch(tmp_path, 2, "exit"))
    [finding] = _finding_lines(out, 0)
    assert ("ML-TRC-010 error [worker:1]: worker 1 finished its program (said goodbye) while worker 0 waits in "
            "all_reduce(SUM) float32[4] #4 at backend_programs.py:") in finding, out
    assert "No majority: worker 0 against worker 1" in finding  # two workers: a tie, never blamed on the first


@pytest.mark.parametrize("transport", ["grpc", pytest.param("shm", marks=pytest.mark.slow)])
def test_a_killed_worker_is_named_dead_where_it_stopped(tmp_path: Path, transport: str) -> None:
    proc = _launch(tmp_path, 3, "sleep", transport)
    out = _finish(proc, _signal_worker_1_when_ready(proc, signal.SIGKILL))
    for survivor in (0, 2):
        assert f"[worker {survivor}] mirrorlab.errors.UnavailableError: Collective ops is aborted by: " in out, out
        [finding] = _finding_lines(out, survivor)
        assert "ML-TRC-011 error [worker:1]: worker 1 last completed all_reduce(SUM) float32[4] #2" in finding, out
        assert "worker 1 died: its port refuses connections, so its process has exited" in finding


@pytest.mark.slow  # a stopped worker is found by its silence: the heartbeat timeout, then the launcher's stop
def test_a_stopped_worker_is_named_silent_not_dead(tmp_path: Path) -> None:
    proc = _launch(tmp_path, 3, "sleep")
    lines = _signal_worker_1_when_ready(proc, signal.SIGSTOP)
    try:
        out = _finish(proc, lines)
    finally:
        pid = int(next(line for line in lines if line.startswith("[worker 1] READY pid ")).split()[-1])
        try:
            os.kill(pid, signal.SIGKILL)  # the launcher stops it too; this one is ours to make sure of
        except ProcessLookupError:
            pass
    findings = _finding_lines(out, 0) + _finding_lines(out, 2)
    assert findings and all("ML-TRC-011 error [worker:1]" in f and "worker 1 stopped answering" in f
                            for f in findings), out


def test_the_diagnosis_benchmark_runs() -> None:
    """benchmarks/bench_hang_diagnosis.py at tiny sizes (speed itself is never asserted)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_hang_diagnosis.py"
    spec = importlib.util.spec_from_file_location("bench_hang_diagnosis", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    overhead = bench.wrapper_overhead(calls=50, repeats=2)
    assert {k: len(v) for k, v in overhead.items()} == {"bare": 2, "wrapped": 2}
    probes = bench.probe_seconds(peers=1, repeats=2)
    assert len(probes) == 2 and all(0 < t < 1.0 for t in probes)
