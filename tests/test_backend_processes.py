"""Real worker processes on loopback: ``mirrorlab launch`` results bit-identical to ``SimCluster``'s, and every
failure (killed peer, error on one worker, wrong token, other version or device count, a peer that never
starts, SIGTERM while waiting) ends the workers with the named error. Every process is bounded in time and
only the processes a test started are signalled."""

import json
import random
import re
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mirrorlab import __version__
from mirrorlab.backend.launch import tf_configs
from mirrorlab.backend.ports import free_ports
from mirrorlab.sim import SimCluster
from mirrorlab.trace import Trace

sys.path.insert(0, str(Path(__file__).parent))
import backend_programs  # noqa: E402

PROGRAMS = str(Path(__file__).parent / "backend_programs.py")
LIMIT = 60  # no test process may outlive this many seconds


@pytest.fixture(autouse=True)
def _recorder_dir(tmp_path, monkeypatch):
    """Flight recorders that a test does not look at go to its own temp dir, not the system's."""
    monkeypatch.setitem(_DEFAULTS, "MIRRORLAB_FLIGHT_RECORDER_DIR", str(tmp_path))


_DEFAULTS: dict = {}


@pytest.fixture(params=["shm", "grpc"])
def path(request, monkeypatch):
    """Run the test's workers with collectives over shared memory, then over gRPC."""
    monkeypatch.setitem(_DEFAULTS, "MIRRORLAB_TRANSPORT", request.param)
    return request.param


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIRRORLAB_") and k != "TF_CONFIG"}
    env.update(_DEFAULTS)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _finish(proc, timeout=LIMIT, dump=False):
    """``proc``'s output once it ends; on timeout it is terminated (a launcher forwards that), then killed.
    With ``dump``, a hung worker first prints every thread's stack (see ``run_workers``)."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        if dump:
            proc.send_signal(signal.SIGUSR2)
            time.sleep(1)
        proc.terminate()
        try:
            out = proc.communicate(timeout=10)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
        pytest.fail(f"process {proc.args} did not end within {timeout} s; its output:\n{out[-8000:]}")


def run_launch(workers, program, _args=(), _flags=(), **env):
    """(exit code, output) of ``mirrorlab launch --workers N FLAGS... backend_programs.py PROGRAM ARGS...``."""
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlab", "launch", "--workers", str(workers), *_flags, PROGRAMS,
                             program, *_args], env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = _finish(proc)
    return proc.returncode, out


def run_workers(worker_envs, program, preludes=None, ports=None, configs=None):
    """Start one worker process per entry of ``worker_envs`` (its extra environment; ``preludes[i]``: Python run
    first) of a cluster of ``len(ports)`` workers (or with the given TF_CONFIGs); returns each one's (exit code,
    output)."""
    ports = ports or free_ports(len(worker_envs))
    configs = configs or tf_configs([f"127.0.0.1:{p}" for p in ports])
    run = ("import faulthandler, signal\nfaulthandler.register(signal.SIGUSR2)\n"  # a hang shows its stacks
           f"import runpy, sys\nsys.argv = [{PROGRAMS!r}, {program!r}]\nrunpy.run_path({PROGRAMS!r}, run_name='__main__')")
    procs = [subprocess.Popen([sys.executable, "-c", (preludes[i] if preludes else "") + "\n" + run],
                              env=_env(TF_CONFIG=configs[i], **extra), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for i, extra in enumerate(worker_envs)]
    outs = [_finish(p, dump=True) for p in procs]
    return [(p.returncode, out) for p, out in zip(procs, outs)]


def results(output):
    found = {}
    for line in output.splitlines():
        if line.startswith("[worker ") and "] RESULT " in line:
            worker = int(line[len("[worker "):line.index("]")])
            found[worker] = json.loads(line.split("] RESULT ", 1)[1].rsplit(" pid ", 1)[0])
    return [found[w] for w in sorted(found)]


@pytest.mark.parametrize("workers", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_custom_loop_is_bit_identical_to_the_simulator(workers, path):
    code, out = run_launch(workers, "custom_loop")
    assert code == 0, out
    assert f"TRANSPORT {path}" in out
    simulated = SimCluster(workers=workers).run(backend_programs.custom_loop).values()
    assert results(out) == simulated
    assert len(simulated) == workers


def test_keras_fit_on_2_workers_x_2_devices_is_bit_identical_to_the_simulator():
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlab", "launch", "--workers", "2", "--devices-per-worker",
                             "2", PROGRAMS, "keras_fit"], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = _finish(proc)
    assert proc.returncode == 0, out
    assert results(out) == SimCluster(workers=2, devices_per_worker=2).run(backend_programs.keras_fit).values()


def test_a_chief_and_a_worker_match_the_simulated_cluster_with_a_chief():
    ports = free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    configs = [json.dumps({"cluster": cluster, "task": {"type": t, "index": 0}}) for t in ("chief", "worker")]
    outs = run_workers([{"MIRRORLAB_CLUSTER_TOKEN": "t"}] * 2, "custom_loop", configs=configs)
    assert [code for code, _ in outs] == [0, 0], outs
    got = [json.loads(out.split("RESULT ", 1)[1].rsplit(" pid ", 1)[0]) for _, out in outs]
    assert got == SimCluster(workers=2, chief=True).run(backend_programs.custom_loop).values()


def test_unseeded_shuffles_match_the_simulator():
    code, out = run_launch(2, "unseeded_shuffle")
    assert code == 0, out
    assert results(out) == SimCluster(workers=2).run(backend_programs.unseeded_shuffle).values()


def _launch_and_kill_worker_1(workers: int, *program: str, wait: float = 0.0) -> str:
    """``mirrorlab launch`` the program, SIGKILL worker 1 (a child of our launcher) ``wait`` seconds after it prints
    READY, and return the launcher's output once it ended with worker 1's status."""
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlab", "launch", "--workers", str(workers), PROGRAMS,
                             *program], env=_env(MIRRORLAB_HEARTBEAT_TIMEOUT=2),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, end = [], time.monotonic() + LIMIT
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[worker 1] READY pid "):
                time.sleep(wait)
                os.kill(int(line.split()[-1]), signal.SIGKILL)
                break
            assert time.monotonic() < end, "workers never got ready"
    finally:
        out = "".join(lines) + _finish(proc)
    assert proc.returncode == 128 + signal.SIGKILL, out
    return out


def test_kill_9_during_all_reduce_makes_survivors_name_the_worker(path):
    out = _launch_and_kill_worker_1(3, "slow_all_reduce")
    assert "[launch] worker 1 exited with signal SIGKILL" in out
    for survivor in (0, 2):  # each ended on its own, with the named error, before the launcher's stop
        assert f"[worker {survivor}] mirrorlab.errors.UnavailableError: Collective ops is aborted by: worker 1 " \
               "(/job:worker/replica:0/task:1" in out, out
    assert "all_reduce(SUM) float32[1000]" in out


def test_data_lanes_give_the_simulators_results_and_are_reported(monkeypatch):
    monkeypatch.setitem(_DEFAULTS, "MIRRORLAB_TRANSPORT", "grpc")
    simulated = SimCluster(workers=2).run(backend_programs.custom_loop).values()
    for lane, shown in (("auto", "TRANSPORT grpc+lane\n"), ("off", "TRANSPORT grpc\n")):
        code, out = run_launch(2, "custom_loop", MIRRORLAB_DATA_LANE=lane)
        assert code == 0 and shown in out, out
        assert results(out) == simulated


def test_kill_9_mid_transfer_on_a_data_lane_makes_the_survivor_name_the_worker(monkeypatch):
    monkeypatch.setitem(_DEFAULTS, "MIRRORLAB_TRANSPORT", "grpc")
    out = _launch_and_kill_worker_1(2, "slow_all_reduce", str(8 << 20), wait=random.uniform(0.0, 0.2))
    assert "[launch] worker 1 exited with signal SIGKILL" in out
    assert "[worker 0] mirrorlab.errors.UnavailableError: Collective ops is aborted by: worker 1 " \
           "(/job:worker/replica:0/task:1" in out, out
    assert "all_reduce(SUM) float32[8388608]" in out and "[worker 0] Diagnosis (" in out, out


def test_kill_9_during_checkpoint_saves_makes_survivors_name_the_worker_and_keeps_the_chiefs_checkpoint(tmp_path,
                                                                                                       path):
    out = _launch_and_kill_worker_1(2, "saving_loop", str(tmp_path / "ckpt"), wait=random.uniform(0.0, 0.2))
    assert "[worker 0] mirrorlab.errors.UnavailableError: Collective ops is aborted by: worker 1 " \
           "(/job:worker/replica:0/task:1" in out, out
    import mirrorlab.tf as tf  # the chief's directory still holds a complete, readable latest checkpoint

    latest = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    assert latest is not None, out
    restored = tf.Variable(np.zeros(64, np.float32))
    tf.train.Checkpoint(w=restored).read(latest).assert_existing_objects_matched()
    assert float(restored.numpy()[0]) >= 4 * 2  # at least the 4 steps before READY, 2 replicas each


def test_an_error_on_one_worker_aborts_the_others_with_its_cause(tmp_path, path):
    code, out = run_launch(3, "fail_on_worker_1", MIRRORLAB_FLIGHT_RECORDER_DIR=tmp_path)
    assert code == 1, out
    assert "[worker 1] ValueError: bad batch on worker 1" in out
    for other in (0, 2):
        assert f"[worker {other}] mirrorlab.errors.UnknownError: Collective ops is aborted by: worker 1 " \
               "(/job:worker/replica:0/task:1 at 127.0.0.1:" in out, out
        assert "failed with ValueError: bad batch on worker 1" in out, out
    dumps = {Trace.load(path).meta["worker"]: Trace.load(path) for path in tmp_path.glob("mirrorlab-flight-*.jsonl")}
    assert sorted(dumps) == [0, 1, 2], out  # every worker wrote its flight recorder
    assert {d.meta["transport"] for d in dumps.values()} == {"grpc+lane" if path == "grpc" else path}
    assert [(e.op, e.detail, e.status) for e in dumps[1]][-2:] == [("barrier", "strategy creation", "ok"),
                                                                  ("all_reduce", "SUM", "ok")]
    assert dumps[0].events[-1].status == "error" and "ValueError: bad batch" in dumps[0].events[-1].error
    # the flight recorder says which all-reduce algorithm ran, the same on every worker (a small tensor: one round)
    assert {e.algorithm for d in dumps.values() for e in d if e.op == "all_reduce"} == {"gather_reduce(ring order)"}


def test_wrong_token_is_refused_with_the_reason():
    outs = run_workers([{"MIRRORLAB_CLUSTER_TOKEN": "abc"}, {"MIRRORLAB_CLUSTER_TOKEN": "xyz"}], "custom_loop")
    for code, out in outs:
        assert code != 0
        assert "UnauthenticatedError: Rendezvous failed" in out and "MIRRORLAB_CLUSTER_TOKEN" in out, out


def test_other_mirrorlab_version_is_refused_naming_both_versions():
    patch = "import mirrorlab._version as v; v.__version__ = '0.0.9'"
    outs = run_workers([{"MIRRORLAB_CLUSTER_TOKEN": "t"}] * 2, "custom_loop", preludes=["", patch])
    for code, out in outs:
        assert code != 0
        assert (f"worker 1 (/job:worker/replica:0/task:1) runs mirrorlab 0.0.9, worker 0 "
                f"(/job:worker/replica:0/task:0) runs mirrorlab {__version__}") in out, out


def test_other_device_count_is_refused_naming_both_counts():
    outs = run_workers([{"MIRRORLAB_CLUSTER_TOKEN": "t", "MIRRORLAB_DEVICES_PER_WORKER": 1},
                        {"MIRRORLAB_CLUSTER_TOKEN": "t", "MIRRORLAB_DEVICES_PER_WORKER": 2}], "custom_loop")
    for code, out in outs:
        assert code != 0
        assert "FailedPreconditionError: Rendezvous failed: worker 1 (/job:worker/replica:0/task:1) has 2 devices, " \
               "worker 0 (/job:worker/replica:0/task:0) has 1 devices" in out, out


def test_a_worker_that_never_starts_ends_the_others_within_the_window():
    ports = free_ports(3)
    outs = run_workers([{"MIRRORLAB_CLUSTER_TOKEN": "t", "MIRRORLAB_RENDEZVOUS_TIMEOUT": 1.5}] * 2, "custom_loop",
                       ports=ports)
    for code, out in outs:
        assert code != 0
        assert "UnavailableError: Rendezvous failed" in out and "waited 1.5 s" in out
        assert f"worker 2 (/job:worker/replica:0/task:2 at 127.0.0.1:{ports[2]})" in out, out


def test_sigterm_ends_a_worker_waiting_in_rendezvous():
    ports = free_ports(2)
    config = tf_configs([f"127.0.0.1:{p}" for p in ports])[0]
    proc = subprocess.Popen([sys.executable, PROGRAMS, "custom_loop"], env=_env(TF_CONFIG=config,
                            MIRRORLAB_CLUSTER_TOKEN="t"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + LIMIT
    while not _listening(ports[0]):  # the worker serves, then waits for worker 1
        assert proc.poll() is None and time.monotonic() < end, "worker did not start serving"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _finish(proc, timeout=10)
    assert proc.returncode == -signal.SIGTERM


def _listening(port):
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _start_slow_launch(**env):
    """A launcher running ``slow_all_reduce`` on 3 workers, and each worker's pid once all are READY."""
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlab", "launch", "--workers", "3", "--stop-grace", "5",
                             PROGRAMS, "slow_all_reduce"], env=_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    pids, lines, end = {}, [], time.monotonic() + LIMIT
    for line in proc.stdout:
        lines.append(line)
        if " READY pid " in line:
            pids[int(line[len("[worker "):line.index("]")])] = int(line.split()[-1])
        if len(pids) == 3 or time.monotonic() > end:
            break
    return proc, pids, lines


@pytest.mark.slow  # ~15 s: detection, then the launcher's grace and stop of the stopped process
def test_a_hung_worker_is_named_by_the_survivors(path):
    proc, pids, lines = _start_slow_launch(MIRRORLAB_HEARTBEAT_TIMEOUT=1.5)
    try:
        assert len(pids) == 3, "".join(lines)
        os.kill(pids[1], signal.SIGSTOP)  # hung, not dead: its sockets stay open
        out = "".join(lines) + _finish(proc)
    finally:
        if proc.poll() is None:
            os.kill(pids[1], signal.SIGKILL)
            _finish(proc)
    assert proc.returncode == 1, out  # the first to fail is a survivor; the launcher then stops worker 1
    for survivor in (0, 2):
        assert f"[worker {survivor}] mirrorlab.errors.UnavailableError: Collective ops is aborted by: worker 1 " \
               "(/job:worker/replica:0/task:1 at 127.0.0.1:" in out, out
    assert "has not answered heartbeats for 1.5 s" in out


def test_sigint_to_the_launcher_reaches_every_worker(tmp_path):
    proc, pids, lines = _start_slow_launch(MIRRORLAB_FLIGHT_RECORDER_DIR=tmp_path)
    assert len(pids) == 3, "".join(lines)
    os.kill(pids[2], signal.SIGUSR1)  # a live worker dumps its flight recorder on request
    end = time.monotonic() + 10
    while not list(tmp_path.glob(f"mirrorlab-flight-*-{pids[2]}.jsonl")) and time.monotonic() < end:
        time.sleep(0.05)
    requested = Trace.load(next(tmp_path.glob(f"mirrorlab-flight-*-{pids[2]}.jsonl")))
    proc.send_signal(signal.SIGINT)
    out = "".join(lines) + _finish(proc)
    assert proc.returncode in (1, 128 + signal.SIGINT), out
    assert out.count("KeyboardInterrupt") >= 3, out
    assert requested.meta["dumped_because"] == "SIGUSR1" and len(requested) > 0


def test_launch_rejects_bad_arguments(capsys, tmp_path):
    from mirrorlab.cli import main

    assert main(["launch", "--workers", "0", str(tmp_path / "x.py")]) == 2
    assert "--workers=0: need at least 1" in capsys.readouterr().err
    assert main(["launch", "--workers", "2", str(tmp_path / "missing.py")]) == 2
    assert "script" in capsys.readouterr().err


@pytest.mark.slow  # two launches
def test_sigterm_to_one_worker_makes_all_save_and_exit_42_and_the_restart_resumes(tmp_path):
    job = str(tmp_path / "job")
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlab", "launch", "--workers", "2", PROGRAMS, "preemptible",
                             job], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, end = [], time.monotonic() + LIMIT
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[worker 1] READY pid "):
                os.kill(int(line.split()[-1]), signal.SIGTERM)  # a real preemption notice to one worker
                break
            assert time.monotonic() < end, "workers never got ready"
    finally:
        out = "".join(lines) + _finish(proc)
    assert proc.returncode == 42, out
    assert sorted(os.listdir(job)) == ["ckpt"]  # the chief's checkpoint; the other worker's temp copy is gone
    code, out = run_launch(2, "preemptible", _args=[job])
    assert code == 0, out
    restarted = results(out)
    plain = SimCluster(workers=2).run(backend_programs.preemptible, str(tmp_path / "plain")).values()
    assert restarted[0]["start"] > 0 and [r["w"] for r in restarted] == [p["w"] for p in plain]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_at_random_points_always_names_the_killed_worker(seed):
    rng = random.Random(seed)
    victim = rng.randrange(3)
    proc, pids, lines = _start_slow_launch(MIRRORLAB_HEARTBEAT_TIMEOUT=2)
    try:
        assert len(pids) == 3, "".join(lines)
        time.sleep(rng.uniform(0, 0.5))
        os.kill(pids[victim], signal.SIGKILL)
    finally:
        out = "".join(lines) + _finish(proc)
    assert proc.returncode == 128 + signal.SIGKILL, out
    for survivor in set(range(3)) - {victim}:  # named by its address over gRPC, by its pid over shared memory
        named = rf"\[worker {survivor}\] mirrorlab.errors.UnavailableError: Collective ops is aborted by: worker " \
                rf"{victim} \(/job:worker/replica:0/task:{victim}(, pid {pids[victim]}| at 127\.0\.0\.1:\d+)\)"
        assert re.search(named, out), out


def test_kill_9_during_rendezvous_ends_the_others_within_the_window():
    ports = free_ports(3)
    configs = tf_configs([f"127.0.0.1:{p}" for p in ports])
    env = dict(MIRRORLAB_CLUSTER_TOKEN="t", MIRRORLAB_RENDEZVOUS_TIMEOUT=2)
    procs = [subprocess.Popen([sys.executable, PROGRAMS, "custom_loop"], env=_env(TF_CONFIG=configs[i], **env),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    end = time.monotonic() + LIMIT
    while not _listening(ports[1]):  # worker 1 is up and in its rendezvous (worker 2 never starts)
        assert procs[1].poll() is None and time.monotonic() < end, "worker 1 did not start serving"
        time.sleep(0.05)
    procs[1].kill()
    out = _finish(procs[0])
    _finish(procs[1])
    assert procs[0].returncode == 1 and "UnavailableError: Rendezvous failed" in out, out
    assert f"worker 2 (/job:worker/replica:0/task:2 at 127.0.0.1:{ports[2]})" in out


def test_launch_gives_workers_the_malloc_settings_unless_already_set(tmp_path, monkeypatch):
    import io

    from mirrorlab.backend.launch import launch
    from mirrorlab.backend.malloc_tuning import reuse_freed_memory_env

    script = tmp_path / "env.py"
    script.write_text("import os\nprint(os.environ['MALLOC_MMAP_THRESHOLD_'], os.environ['MALLOC_TRIM_THRESHOLD_'])\n")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")  # the user's own setting wins
    out = io.StringIO()
    assert launch(str(script), [], 2, out=out) == 0
    expected = f"{reuse_freed_memory_env()['MALLOC_MMAP_THRESHOLD_']} 12345"
    assert out.getvalue().count(expected) == 2, out.getvalue()
