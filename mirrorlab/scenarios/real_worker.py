"""One worker process of a scenario run on real processes (``python -m mirrorlab.scenarios.real_worker``).

It loads the scenario, imports the program, applies this worker's faults (``real_faults.py``), signals that it is
ready and waits for the runner's start line on stdin (so short rendezvous timeouts measure the cluster, not Python's
imports), runs the program and writes its outcome as JSON: the returned value, or the error's class hierarchy and
text. An error is then raised on as in any worker, so the backend aborts the peers' collectives at once.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mirrorlab.backend.environment import BackendEnvironment
from mirrorlab.collective.communicator import Communicator
from mirrorlab.runtime import WorkerRuntime, bind_environment
from mirrorlab.sim.faults import SAVE_WINDOWS

from .checks import error_text
from .real_faults import ProcessFaults
from .runner import resolve_program
from .schema import load_scenario

__all__ = ["main", "outcome_record"]


class _FaultingRuntime(WorkerRuntime):
    """The backend's runtime with this worker's faults at each step and collective boundary."""

    def __init__(self, comm: Communicator, devices: Sequence[str], trace: Any, faults: ProcessFaults) -> None:
        super().__init__(comm, devices, trace)
        self.faults = faults

    def before_step(self, step: int) -> None:
        self.faults.at_boundary(step, None)

    def before_collective(self, seq: int) -> None:
        self.faults.at_boundary(None, seq)


class _FaultingEnvironment(BackendEnvironment):
    """The backend environment of a worker with faults: its runtimes and checkpoint saves consult them."""

    def __init__(self, faults: ProcessFaults) -> None:
        super().__init__()
        self.faults = faults
        self._saves = 0  # counted by their data writes, as the simulator counts them

    def make_runtime(self, comm: Communicator, devices: Sequence[str]) -> WorkerRuntime:
        return _FaultingRuntime(comm, devices, self.recorder, self.faults)

    def io_point(self, what: str) -> None:
        if what == SAVE_WINDOWS["data"]:
            self._saves += 1
        self.faults.in_save(self._saves, what)


def _plain(value: Any) -> Any:
    """A returned value JSON cannot hold as it is: an array or NumPy number as a list or number, else its repr."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return repr(value)


def outcome_record(value: Any = None, error: BaseException | None = None) -> dict[str, Any]:
    """What a worker reports: ``{"returned": value}`` or ``{"error": {"classes": [...], "message": text}}``."""
    if error is None:
        return {"returned": json.loads(json.dumps(value, default=_plain))}
    return {"error": {"classes": [cls.__name__ for cls in type(error).__mro__], "message": error_text(error)}}


def _write(path: Path, record: dict[str, Any]) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    os.replace(partial, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorlab.scenarios.real_worker")
    parser.add_argument("--scenario", required=True, help="the scenario's .toml file")
    parser.add_argument("--worker", type=int, required=True, help="this worker's index in the cluster")
    parser.add_argument("--seed", type=int, required=True, help="decides the Maybe fault sites")
    parser.add_argument("--faults", action="store_true", help="apply the scenario's worker faults")
    parser.add_argument("--workdir", required=True, help="the run's work directory")
    parser.add_argument("--ready", required=True, help="a file to create once ready to start")
    parser.add_argument("--result", required=True, help="the file the outcome is written to")
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    program = resolve_program(scenario)
    faults = ProcessFaults(args.worker, scenario.faults if args.faults else (), args.seed)
    if faults:
        bind_environment(_FaultingEnvironment(faults))
    kwargs = dict(scenario.program.options)
    if "workdir" in inspect.signature(program).parameters:
        kwargs["workdir"] = args.workdir
    Path(args.ready).touch()
    sys.stdin.readline()  # the runner's start line: every worker has imported everything
    try:
        value = program(**kwargs)
    except BaseException as exc:
        _write(Path(args.result), outcome_record(error=exc))
        raise
    _write(Path(args.result), outcome_record(value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
