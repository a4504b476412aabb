"""Record TensorFlow 2.21's results of every conformance case into ``golden/<setup>.json``.

Usage (TensorFlow is only installed in the TF venv; setups C and Cchief need root for ``unshare -n``)::

    /work/tfvenv/bin/python tests/conformance/record_golden.py                 # all setups
    /work/tfvenv/bin/python tests/conformance/record_golden.py --setups A B    # some of them

* A and B run in one child process with 2 logical CPUs: A = ``MirroredStrategy(["/cpu:0", "/cpu:1"])``,
  B = ``MultiWorkerMirroredStrategy()`` without TF_CONFIG (1 replica).
* C (2 workers) and Cchief (chief + 1 worker) run as two worker processes on 127.0.0.1 inside a private
  network namespace (``unshare -n`` with only loopback up), because TF's gRPC server binds every interface.

Cases marked ``tf_only_quirk`` are not recorded. Every child runs under a timeout and is killed (its whole
process group) when it overruns; a failing worker's log tail is printed. The internal modes ``local``,
``cluster`` and ``worker`` are how the script runs its own children.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance.adapters import TfApi
from conformance.cases import CASES, SETUPS, recorded_cases
from conformance.harness import save_golden

SCRIPT = str(Path(__file__).resolve())
LOCAL_TIMEOUT_S = 300
CLUSTER_TIMEOUT_S = 300
WORKER_TIMEOUT_S = 240


def run_bounded(command: list[str], timeout_s: float, log: Path) -> int:
    """Run ``command`` with output to ``log``; kill its process group after ``timeout_s``. Returns the exit code."""
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            out.write(f"\n[record_golden] killed after {timeout_s} s\n")
            return -signal.SIGKILL


def require_success(code: int, what: str, logs: list[Path]) -> None:
    """Exit with the tails of the children's logs when a child failed."""
    if code != 0:
        tails = [f"--- last lines of {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                 for log in logs if log.exists()]
        sys.exit(f"{what} failed (exit code {code})\n" + "\n".join(tails))


def record_setups(api: TfApi, setups: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Run every recorded case of each setup in this process: setup -> case -> result."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for setup in setups:
        strategy = api.strategy_for(setup)
        results[setup] = {}
        for name in recorded_cases(setup):
            print(f"[{setup}] {name}", file=sys.stderr, flush=True)
            results[setup][name] = api.run_case(CASES[name], strategy)
    return results


def local_mode(out: Path) -> None:
    """Child: record A and B in this process (2 logical CPUs, no TF_CONFIG)."""
    os.environ.pop("TF_CONFIG", None)
    api = TfApi(logical_cpus=2)
    out.write_text(json.dumps({"version": api.version, "results": record_setups(api, ["A", "B"])}))


def worker_mode(setup: str, out: Path) -> None:
    """Grandchild: one worker of a C/Cchief cluster (TF_CONFIG is set by the cluster mode)."""
    api = TfApi()
    out.write_text(json.dumps({"version": api.version, "results": record_setups(api, [setup])[setup]}))


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(setup: str, worker_command: Callable[[int], list[str]], logs: list[Path],
                timeout_s: float = WORKER_TIMEOUT_S) -> list[int | None]:
    """Start the two workers of ``setup`` on 127.0.0.1 (``worker_command(rank)``, output to ``logs[rank]``) and
    wait for them, killing the ones still running after ``timeout_s``. Returns their exit codes."""
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    if setup == "Cchief":
        cluster, tasks = {"chief": addresses[:1], "worker": addresses[1:]}, [("chief", 0), ("worker", 0)]
    else:
        cluster, tasks = {"worker": addresses}, [("worker", 0), ("worker", 1)]
    processes = []
    for rank, (task_type, index) in enumerate(tasks):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                   TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}}))
        with logs[rank].open("w") as log:
            # Same process group as this process, so the parent's timeout kills the workers too.
            processes.append(subprocess.Popen(worker_command(rank), stdout=log, stderr=subprocess.STDOUT, env=env))
    deadline = time.monotonic() + timeout_s
    try:
        for process in processes:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        print(f"[record_golden] {setup}: the workers ran past {timeout_s} s; killing them", flush=True)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return [p.returncode for p in processes]


def cluster_mode(setup: str, work: Path) -> None:
    """Child inside ``unshare -n``: start both workers of ``setup`` and wait for them (bounded)."""
    def command(rank: int) -> list[str]:
        """Worker ``rank`` records its results into ``work``."""
        return [sys.executable, SCRIPT, "worker", setup, str(work / f"{setup}_w{rank}.json")]

    codes = run_workers(setup, command, [work / f"{setup}_w{rank}.log" for rank in (0, 1)])
    sys.exit(0 if codes == [0, 0] else 1)


def run_in_private_network(command: list[str], timeout_s: float, log: Path) -> int:
    """Run ``command`` (bounded, see ``run_bounded``) in a new network namespace with only loopback up."""
    inner = f"ip link set lo up && exec {shlex.join(command)}"
    return run_bounded(["unshare", "-n", "sh", "-c", inner], timeout_s, log)


def record(setups: list[str]) -> None:
    """Parent: record the requested setups through bounded children and write the golden files."""
    with tempfile.TemporaryDirectory(prefix="conformance-golden-") as tmp:
        work = Path(tmp)
        if {"A", "B"} & set(setups):
            log = work / "local.log"
            require_success(run_bounded([sys.executable, SCRIPT, "local", str(work / "local.json")],
                                        LOCAL_TIMEOUT_S, log), "local setups A/B", [log])
            local = json.loads((work / "local.json").read_text())
            for setup in ("A", "B"):
                if setup in setups:
                    cases = {name: [result] for name, result in local["results"][setup].items()}
                    save_golden(setup, local["version"], cases)
                    print(f"{setup}: {len(cases)} cases recorded")
        for setup in (s for s in ("C", "Cchief") if s in setups):
            log = work / f"{setup}_cluster.log"
            code = run_in_private_network([sys.executable, SCRIPT, "cluster", setup, str(work)],
                                          CLUSTER_TIMEOUT_S, log)
            require_success(code, f"setup {setup}", [log] + [work / f"{setup}_w{rank}.log" for rank in (0, 1)])
            workers = [json.loads((work / f"{setup}_w{rank}.json").read_text()) for rank in (0, 1)]
            cases = {name: [w["results"][name] for w in workers] for name in recorded_cases(setup)}
            save_golden(setup, workers[0]["version"], cases)
            print(f"{setup}: {len(cases)} cases recorded")


def main() -> None:
    """Command line: ``[--setups ...]`` records; ``local``/``cluster``/``worker`` are the children's modes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode")
    sub.add_parser("local").add_argument("out", type=Path)
    cluster = sub.add_parser("cluster")
    cluster.add_argument("setup", choices=("C", "Cchief"))
    cluster.add_argument("work", type=Path)
    worker = sub.add_parser("worker")
    worker.add_argument("setup", choices=("C", "Cchief"))
    worker.add_argument("out", type=Path)
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    args = parser.parse_args()
    if args.mode == "local":
        local_mode(args.out)
    elif args.mode == "cluster":
        cluster_mode(args.setup, args.work)
    elif args.mode == "worker":
        worker_mode(args.setup, args.out)
    else:
        record(args.setups)


if __name__ == "__main__":
    main()
