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
from .schema import Expectation, Scenario, ScenarioError

__all__ = ["Verdict", "run_scenario", "resolve_program", "replay_command"]


@dataclass
class Verdict:
    """The outcome of one scenario run: whether it matched, why not, and the runs it made."""

    scenario: Scenario
    seed: int
    reasons: list[str] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)
    deterministic: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.reasons and self.deterministic is not False

    @property
    def replay(self) -> str:
        return replay_command(self.scenario, self.seed)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``--json`` prints."""
        return {"name": self.scenario.name, "ok": self.ok, "seed": self.seed, "mirrorlab": __version__,
                "reasons": self.reasons, "deterministic": self.deterministic, "replay": self.replay,
                "runs": [{"virtual_time": r.virtual_time,
                          "workers": [{"worker": w, "error": type(v).__name__, "message": error_text(v)}
                                      if isinstance(v, BaseException) else {"worker": w, "returned": repr(v)}
                                      for w, v in enumerate(r)]} for r in self.runs]}

    def describe(self, full: bool = False) -> str:
        """A few lines for people: the verdict, the reasons, each run's report with ``full``."""
        status = "as expected" if self.ok else "NOT as expected"
        lines = [f"{self.scenario.name} (seed {self.seed}): {status}"]
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


def replay_command(scenario: Scenario, seed: int) -> str:
    """The shell command that runs ``scenario`` again with ``seed`` (by name for a catalog scenario)."""
    which = scenario.name if scenario.path in catalog_paths() else scenario.path
    return f"mirrorlab scenario replay {which} --seed {seed}"


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


def _judge(scenario: Scenario, program: Callable[..., Any], expect: Expectation, seed: int, workdir: str,
           faults: bool, verdict: Verdict) -> None:
    run = _run(scenario, program, seed, workdir, faults)
    verdict.runs.append(run)

    @functools.cache
    def single() -> Any:
        with tempfile.TemporaryDirectory(prefix="mirrorlab-single-") as alone:
            return _run(scenario, program, seed, alone, False, workers=1).values()[0]

    verdict.reasons += mismatches(expect, run, workdir, single)
    if expect.after_restart is not None:
        _judge(scenario, program, expect.after_restart, seed, workdir, False, verdict)


def run_scenario(scenario: Scenario, seed: int | None = None, check_determinism: bool = False) -> Verdict:
    """Runs ``scenario`` (with ``seed`` instead of its own if given) and judges the outcome; with
    ``check_determinism`` runs it twice more and compares the trace hashes of the first run."""
    program = resolve_program(scenario)
    verdict = Verdict(scenario, scenario.seed if seed is None else seed)
    with tempfile.TemporaryDirectory(prefix=f"mirrorlab-{scenario.name}-") as workdir:
        _judge(scenario, program, scenario.expect, verdict.seed, workdir, True, verdict)
    if check_determinism:
        with tempfile.TemporaryDirectory(prefix=f"mirrorlab-{scenario.name}-") as workdir:
            again = _run(scenario, program, verdict.seed, workdir, True)
        verdict.deterministic = _trace_hash(again) == _trace_hash(verdict.runs[0])
    return verdict
