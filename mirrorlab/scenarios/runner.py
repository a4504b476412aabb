"""Runs a scenario on the simulator and judges its outcome against the expectation.

The program runs in a fresh work directory (passed as ``workdir=`` to programs that take it); a scenario
with ``expect.after_restart`` runs a second time without its faults in the same directory, as a restarted
job would. Every verdict carries the seed and the command that replays it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mirrorlab._version import __version__
from mirrorlab.sim import RunResult, SimCluster

from .catalog import catalog_paths
from .checks import error_text, mismatches
from .process_outcome import ProcessRun, class_names
from .schema import Expectation, Scenario, ScenarioError

__all__ = ["Verdict", "run_scenario", "resolve_program", "replay_command", "judge", "single_worker_value"]


@dataclass
class Verdict:
    """The outcome of one scenario run: whether it matched, why not, and the runs it made (``backend`` "sim" or
    "real"; ``skipped`` says why a real run could not be made here)."""

    scenario: Scenario
    seed: int
    reasons: list[str] = field(default_factory=list)
    runs: list[RunResult | ProcessRun] = field(default_factory=list)
    deterministic: bool | None = None
    backend: str = "sim"
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return self.skipped is None and not self.reasons and self.deterministic is not False

    @property
    def replay(self) -> str:
        return replay_command(self.scenario, self.seed, self.backend)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``--json`` prints."""
        return {"name": self.scenario.name, "ok": self.ok, "seed": self.seed, "mirrorlab": __version__,
                "backend": self.backend, "skipped": self.skipped, "reasons": self.reasons,
                "deterministic": self.deterministic, "replay": self.replay,
                "runs": [{**_timing(r),
                          "workers": [{"worker": w, "error": class_names(v)[0], "message": error_text(v)}
                                      if isinstance(v, BaseException) else {"worker": w, "returned": repr(v)}
                                      for w, v in enumerate(r)]} for r in self.runs]}

    def describe(self, full: bool = False) -> str:
        """A few lines for people: the verdict, the reasons, each run's report with ``full``."""
        status = f"skipped ({self.skipped})" if self.skipped else "as expected" if self.ok else "NOT as expected"
        on = " on real processes" if self.backend == "real" else ""
        lines = [f"{self.scenario.name} (seed {self.seed}){on}: {status}"]
        lines += [f"  - {reason}" for reason in self.reasons]
        if self.deterministic is False:
            lines.append("  - two runs with the same seed gave different traces: the simulation is not deterministic")
        if full or not self.ok:
            for run in self.runs:
                lines += ["  " + line for line in run.report().splitlines()]
            if full:
                lines += [f"  worker {w}: {error_text(e)}" for run in self.runs for w, e in run.errors.items()]
        lines.append(f"  replay: {self.replay}  (mirrorlab {__version__})")
        return "\n".join(lines)


def _timing(run: RunResult | ProcessRun) -> dict[str, float]:
    return {"wall_time": run.wall_time} if isinstance(run, ProcessRun) else {"virtual_time": run.virtual_time}


def replay_command(scenario: Scenario, seed: int, backend: str = "sim") -> str:
    """The shell command that runs ``scenario`` again with ``seed`` (by name for a catalog scenario)."""
    which = scenario.name if scenario.path in catalog_paths() else scenario.path
    return f"mirrorlab scenario replay {which} --seed {seed}" + (" --backend real" if backend == "real" else "")


def resolve_program(scenario: Scenario) -> Callable[..., Any]:
    """Imports the scenario's ``module:function``; a missing one is a ``ScenarioError`` (exit status 2)."""
    module_name, _, function = scenario.program.target.partition(":")
    try:
        program = getattr(importlib.import_module(module_name), function)
    except (ImportError, AttributeError) as err:
        raise ScenarioError(f"{scenario.path}: key 'program': {scenario.program.target!r} cannot be imported "
                            f"({err}). Fix: name an importable module and one of its functions.") from None
    accepted = inspect.signature(program).parameters
    unknown = [key for key in scenario.program.options if key not in accepted]
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        raise ScenarioError(f"{scenario.path}: key 'program.options.{unknown[0]}': {scenario.program.target} takes "
                            f"no such argument. Fix: use one of {', '.join(accepted)}.")
    return program


def _run(scenario: Scenario, program: Callable[..., Any], seed: int, workdir: str, faults: bool,
         workers: int | None = None) -> RunResult:
    kwargs = dict(scenario.program.options)
    if "workdir" in inspect.signature(program).parameters:
        kwargs["workdir"] = workdir
    cluster = scenario.cluster_kwargs(seed, faults)
    if workers is not None:
        cluster.update(workers=workers, devices_per_worker=1, chief=False, setups=(), faults=())
    return SimCluster(**cluster).run(program, **kwargs)


def _trace_hash(run: RunResult) -> str:
    return hashlib.sha256(run.trace.to_jsonl().encode()).hexdigest()


def single_worker_value(scenario: Scenario, program: Callable[..., Any], seed: int) -> Callable[[], Any]:
    """``single()`` for the checks: the program's value on one simulated worker with one device, computed once and
    only when a property needs it."""

    @functools.cache
    def single() -> Any:
        with tempfile.TemporaryDirectory(prefix="mirrorlab-single-") as alone:
            return _run(scenario, program, seed, alone, False, workers=1).values()[0]

    return single


def judge(expect: Expectation, run: Callable[[bool], RunResult | ProcessRun], single: Callable[[], Any],
          workdir: str, verdict: Verdict, faults: bool = True) -> None:
    """Makes one run (``run(faults)``) and adds its mismatches with ``expect`` to ``verdict``; then the rerun
    without faults that ``expect.after_restart`` asks for, in the same ``workdir``."""
    result = run(faults)
    verdict.runs.append(result)
    verdict.reasons += mismatches(expect, result, workdir, single)
    if expect.after_restart is not None:
        judge(expect.after_restart, run, single, workdir, verdict, False)


def run_scenario(scenario: Scenario, seed: int | None = None, check_determinism: bool = False) -> Verdict:
    """Runs ``scenario`` (with ``seed`` instead of its own if given) and judges the outcome; with
    ``check_determinism`` runs it twice more and compares the trace hashes of the first run."""
    program = resolve_program(scenario)
    verdict = Verdict(scenario, scenario.seed if seed is None else seed)
    with tempfile.TemporaryDirectory(prefix=f"mirrorlab-{scenario.name}-") as workdir:
        judge(scenario.expect, lambda faults: _run(scenario, program, verdict.seed, workdir, faults),
              single_worker_value(scenario, program, verdict.seed), workdir, verdict)
    if check_determinism:
        with tempfile.TemporaryDirectory(prefix=f"mirrorlab-{scenario.name}-") as workdir:
            again = _run(scenario, program, verdict.seed, workdir, True)
        verdict.deterministic = _trace_hash(again) == _trace_hash(verdict.runs[0])
    return verdict
