"""The ``mirrorlab run`` command: your training script run by every worker of a simulated cluster, as one process per
host would run it.

Each simulated worker runs the whole script as ``__main__`` (``if __name__ == "__main__":`` blocks run) in a fresh
namespace, with its own ``TF_CONFIG`` in ``os.environ``, so ``MultiWorkerMirroredStrategy()`` joins the simulated
cluster. ``sys.argv`` is the script's path and the arguments after ``--``; the script's folder is first on
``sys.path``. ``sys.exit()`` or ``sys.exit(0)`` ends a worker normally. The command prints the run's report and
exits 0 when every worker finished, 1 when any failed.
"""

from __future__ import annotations

import argparse
import runpy
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mirrorlab.sim import RunResult, SimCluster
from mirrorlab.sim.fault_specs import FAULT_FORMS, parse_fault
from mirrorlab.sim.faults import Fault

from .cli_args import UsageError, positive_int

__all__ = ["register", "run_script"]


def _script_program(path: Path) -> Callable[[], None]:
    """A program that runs the script as ``__main__`` (``runpy``), in a fresh namespace each time it is called."""
    def program() -> None:
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
    program.__module__, program.__qualname__ = "__main__", f"<{path.name} as __main__>"  # how the report names it
    return program


@contextmanager
def _as_python_would(path: Path, script_args: list[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path`` as ``python path args...`` sets them, restored afterwards."""
    argv, search_path = sys.argv[:], sys.path[:]
    sys.argv[:] = [str(path), *script_args]
    sys.path.insert(0, str(path.resolve().parent))
    try:
        yield
    finally:
        sys.argv[:], sys.path[:] = argv, search_path


def run_script(path: Path, script_args: list[str], workers: int, devices_per_worker: int, seed: int,
               faults: list[Fault]) -> RunResult:
    """Run the script at ``path`` on a ``SimCluster`` of ``workers`` x ``devices_per_worker`` with ``faults``.
    UsageError for a missing script or a fault the cluster does not have; SyntaxError for a script Python refuses."""
    if not path.is_file():
        raise UsageError(f"script {str(path)!r}: no such file")
    try:
        cluster = SimCluster(workers=workers, devices_per_worker=devices_per_worker, seed=seed, faults=faults)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    compile(path.read_text(encoding="utf-8"), str(path), "exec")  # a SyntaxError before any worker starts
    with _as_python_would(path, script_args):
        return cluster.run(_script_program(path))


def _fault(spec: str) -> str:
    """A ``--fault`` spec, checked (kept as written, for the command that repeats the run)."""
    try:
        parse_fault(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def _run_command(args: argparse.Namespace) -> int:
    """``mirrorlab run``: run the script, print the report and the command line that repeats the run."""
    try:
        result = run_script(Path(args.script), args.passthrough, args.workers, args.devices_per_worker, args.seed,
                            [parse_fault(spec) for spec in args.fault])
    except SyntaxError as exc:
        print(f"mirrorlab run: {exc.filename}, line {exc.lineno}: SyntaxError: {exc.msg}", file=sys.stderr)
        return 1
    again = ["mirrorlab", "run", args.script, "--workers", str(args.workers), "--devices-per-worker",
             str(args.devices_per_worker), "--seed", str(args.seed)]
    again += [word for spec in args.fault for word in ("--fault", spec)]
    again += ["--", *args.passthrough] if args.passthrough else []
    print(result.report())
    print(f"same run again: {shlex.join(again)}")
    return 0 if result.ok else 1


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``mirrorlab run`` to the command line's ``commands``."""
    run = commands.add_parser("run", help="run your script on a simulated cluster and print the report",
                              description=__doc__.replace("``", ""),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("script", help="the Python script every simulated worker runs as __main__ (its own arguments "
                     "go after --)")
    run.add_argument("--workers", type=positive_int, default=2, help="simulated workers (default 2)")
    run.add_argument("--devices-per-worker", type=positive_int, default=1, help="devices per worker (default 1)")
    run.add_argument("--seed", type=int, default=0, help="simulation seed: fixes the interleaving (default 0)")
    run.add_argument("--fault", type=_fault, action="append", default=[], metavar="SPEC",
                     help=f"inject a fault (repeatable): {FAULT_FORMS.replace('%', '%%')}")
    run.set_defaults(func=_run_command, takes_passthrough=True)
