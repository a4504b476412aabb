"""Runs a scenario marked ``real = true`` as real worker processes and judges it like a simulated run.

Each worker is ``python -m mirrorlab.scenarios.real_worker`` with its own TF_CONFIG (127.0.0.1 ports, or 192.0.2.0/24
addresses in network namespaces when the scenario has network faults), its ``[[workers]]`` overrides (environment,
device count, ``MIRRORLAB_FINGERPRINT``) and short backend timeouts. Workers import first and start together; a run
is bounded by a wall-clock limit, every process is killed by its pid, and namespaces are deleted even on failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .netns import NetnsLab
from .netns_faults import NetworkFaults, unavailable_reason
from .process_outcome import ProcessRun, WorkerEnd
from .real_faults import NETWORK_FAULTS, enabled_faults, plain_fault
from .runner import Verdict, judge, resolve_program, single_worker_value
from .schema import Scenario, ScenarioError

__all__ = ["run_real", "RENDEZVOUS_S", "HEARTBEAT_S", "RUN_LIMIT_S"]

#: Backend timeouts for scenario workers (seconds): short, so a lost peer shows within a few seconds.
RENDEZVOUS_S, HEARTBEAT_S = 6.0, 3.0
#: How long the workers may take to import everything, and how long a run may last once they start.
READY_LIMIT_S, RUN_LIMIT_S = 60.0, 60.0
#: After a worker fails, the others get this long to report their own errors before they are stopped.
STOP_GRACE_S = RENDEZVOUS_S + HEARTBEAT_S + 2.0
#: The gRPC port of workers in network namespaces (each has its own address; the simulator's port).
NETNS_PORT = 2222


def _network_faults(scenario: Scenario, seed: int, faults: bool) -> tuple:
    chosen = tuple(f for f in scenario.faults if isinstance(plain_fault(f), NETWORK_FAULTS)) if faults else ()
    return enabled_faults(chosen, seed)


def run_real(scenario: Scenario, seed: int | None = None) -> Verdict:
    """Runs ``scenario`` on local processes and judges it by its expectation for real runs (``[expect.real]``);
    the verdict is ``skipped`` where its network faults need namespaces this machine cannot make."""
    if not scenario.real:
        raise ScenarioError(f"{scenario.path}: scenario {scenario.name!r} has no real counterpart (real is not true): "
                            "its story needs something only the simulator has (virtual time, a simulated host or "
                            "message count). Fix: run it without --backend real, or add real = true if it can run "
                            "on local processes.")
    program = resolve_program(scenario)
    verdict = Verdict(scenario, scenario.seed if seed is None else seed, backend="real")
    network = _network_faults(scenario, verdict.seed, True)
    if network:
        verdict.skipped = unavailable_reason(network)
        if verdict.skipped:
            return verdict
    with tempfile.TemporaryDirectory(prefix=f"mirrorlab-{scenario.name}-") as workdir:
        judge(scenario.expectation("real"), lambda faults: _run(scenario, verdict.seed, workdir, faults),
              single_worker_value(scenario, program, verdict.seed), workdir, verdict)
    return verdict


def _tasks(scenario: Scenario) -> list[tuple[str, int]]:
    tasks = [("chief", 0)] if scenario.chief else []
    return tasks + [("worker", i) for i in range(scenario.workers - len(tasks))]


def _tf_configs(scenario: Scenario, addresses: list[str]) -> list[str]:
    """Each worker's TF_CONFIG; an override keeps its text with the simulator's addresses (``sim-worker-1:2222``)
    replaced by the real ones."""
    tasks = _tasks(scenario)
    jobs: dict[str, list[str]] = {}
    for (job, _), address in zip(tasks, addresses):
        jobs.setdefault(job, []).append(address)
    configs = [json.dumps({"cluster": jobs, "task": {"type": job, "index": index}}) for job, index in tasks]
    for setup in scenario.setups:
        text = setup.environ.get("TF_CONFIG")
        if text is not None:
            for (job, index), address in zip(tasks, addresses):
                text = text.replace(f"sim-{job}-{index}:2222", address)
            configs[setup.worker] = text
    return configs


def _environ(scenario: Scenario, worker: int, tf_config: str, token: str) -> dict[str, str]:
    from mirrorlab.backend.settings import (DEVICES_VAR, FINGERPRINT_VAR, HEARTBEAT_VAR, RENDEZVOUS_VAR,
                                            TOKEN_VAR)

    setup = next((s for s in scenario.setups if s.worker == worker), None)
    env = {k: v for k, v in os.environ.items() if k != FINGERPRINT_VAR}
    env.update(setup.environ if setup else {})
    env.update({"TF_CONFIG": tf_config, TOKEN_VAR: token, RENDEZVOUS_VAR: str(RENDEZVOUS_S),
                HEARTBEAT_VAR: str(HEARTBEAT_S), "PYTHONUNBUFFERED": "1",
                DEVICES_VAR: str((setup.devices if setup else None) or scenario.devices_per_worker),
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    if setup and setup.fingerprint:
        env[FINGERPRINT_VAR] = json.dumps(setup.fingerprint)
    return env


@contextmanager
def _hosts(scenario: Scenario, network: tuple) -> Iterator[tuple[list[str], list[list[str]], NetworkFaults | None]]:
    """(addresses, command prefix per worker, network faults) on loopback, or in namespaces when ``network``."""
    if not network:
        from mirrorlab.backend.ports import free_ports

        yield [f"127.0.0.1:{p}" for p in free_ports(scenario.workers)], [[] for _ in range(scenario.workers)], None
        return
    with NetnsLab(scenario.workers) as lab:
        rules = NetworkFaults(lab, network, NETNS_PORT)
        try:
            yield ([f"{h.ip}:{NETNS_PORT}" for h in lab.hosts],
                   [["ip", "netns", "exec", h.namespace] for h in lab.hosts], rules)
        finally:
            rules.stop()


def _run(scenario: Scenario, seed: int, workdir: str, faults: bool) -> ProcessRun:
    """One run: start every worker, let them go together, wait (bounded), collect each outcome."""
    network = _network_faults(scenario, seed, faults)
    token = os.urandom(16).hex()
    with tempfile.TemporaryDirectory(prefix="mirrorlab-real-") as state, _hosts(scenario, network) as (
            addresses, prefixes, rules):
        folder = Path(state)
        procs: list[subprocess.Popen] = []
        try:
            for w, config in enumerate(_tf_configs(scenario, addresses)):
                argv = [*prefixes[w], sys.executable, "-m", "mirrorlab.scenarios.real_worker", "--scenario",
                        str(scenario.path), "--worker", str(w), "--seed", str(seed), "--workdir", workdir,
                        "--ready", str(folder / f"ready-{w}"), "--result", str(folder / f"result-{w}.json")]
                if faults:
                    argv.append("--faults")
                with open(folder / f"worker-{w}.log", "wb") as log:
                    procs.append(subprocess.Popen(argv, env=_environ(scenario, w, config, token),
                                                  stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                                  start_new_session=True))
            _await_ready(procs, folder)
            started = time.monotonic()
            if rules is not None:
                rules.start()
            for proc in procs:
                _start(proc)
            ends = _supervise(procs, folder)
        finally:
            for proc in procs:
                _kill(proc)
        return ProcessRun(ends, time.monotonic() - started, rules.notes if rules else [])


def _await_ready(procs: list[subprocess.Popen], folder: Path) -> None:
    """Until every worker has imported everything (or ended, or READY_LIMIT_S passed)."""
    end = time.monotonic() + READY_LIMIT_S
    while time.monotonic() < end:
        if all((folder / f"ready-{w}").exists() or p.poll() is not None for w, p in enumerate(procs)):
            return
        time.sleep(0.02)


def _start(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.write(b"go\n")
        proc.stdin.close()
    except OSError:  # the worker already ended (it failed while loading)
        pass


def _supervise(procs: list[subprocess.Popen], folder: Path) -> list[WorkerEnd]:
    """Waits for every worker; stops the rest STOP_GRACE_S after the first failure, or all at RUN_LIMIT_S."""
    started = time.monotonic()
    ended: dict[int, float] = {}
    stopped: dict[int, str] = {}
    first_failure: tuple[int, float] | None = None
    while len(ended) < len(procs):
        now = time.monotonic()
        for w, proc in enumerate(procs):
            if w not in ended and proc.poll() is not None:
                ended[w] = now
                if proc.returncode != 0 and first_failure is None:
                    first_failure = (w, now)
        for w, proc in enumerate(procs):
            if w in ended:
                continue
            if now - started > RUN_LIMIT_S:
                stopped[w] = f"was still running after {RUN_LIMIT_S:g} s (the run's wall-clock limit) and was killed"
            elif first_failure is not None and now - first_failure[1] > STOP_GRACE_S:
                stopped[w] = (f"was killed {STOP_GRACE_S:g} s after worker {first_failure[0]} failed, still "
                              "running")
            if w in stopped:
                _kill(proc)
        time.sleep(0.02)
    return [WorkerEnd(proc.returncode, ended[w], folder / f"result-{w}.json", _tail(folder / f"worker-{w}.log"),
                      stopped.get(w, "")) for w, proc in enumerate(procs)]


def _tail(log: Path, lines: int = 12) -> str:
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL to the worker's own process group (its pid: it leads a session of its own), then reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10.0)
