"""Failure scenarios: TOML files that tell a real cluster's story, run on the simulator (and, marked ``real = true``,
on local worker processes) and checked against the outcome a person would expect (``mirrorlab scenario run``; the
format is in ``docs/scenarios.md``)."""

from .catalog import catalog_paths, find_scenario, load_catalog
from .real_runner import run_real
from .runner import Verdict, run_scenario
from .schema import Expectation, Program, Scenario, ScenarioError, load_scenario

__all__ = ["Scenario", "Program", "Expectation", "ScenarioError", "load_scenario", "catalog_paths", "find_scenario",
           "load_catalog", "run_scenario", "run_real", "Verdict"]
