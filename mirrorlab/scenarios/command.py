"""``mirrorlab scenario list|run|replay``: the catalog from the command line.

``run`` exits 0 when every outcome matches its scenario's expectation, 1 when one does not and 2 when a
scenario file is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .catalog import find_scenario, load_catalog
from .runner import run_scenario
from .schema import Scenario, ScenarioError

__all__ = ["register"]

EXIT_MATCH, EXIT_MISMATCH, EXIT_INVALID = 0, 1, 2


def register(commands: Any) -> None:
    """Adds the ``scenario`` command and its ``list``, ``run`` and ``replay`` subcommands to ``commands``."""
    scenario = commands.add_parser("scenario", help="run the catalog of failure scenarios on the simulator")
    actions = scenario.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the catalog: name, expected outcome, story")
    listing.set_defaults(func=_list)
    run = actions.add_parser("run", help="run scenarios and check their expected outcomes")
    run.add_argument("names", nargs="*", metavar="NAME|FILE", help="catalog names or .toml files")
    run.add_argument("--all", action="store_true", help="run the whole catalog")
    run.add_argument("--seed", type=int, help="simulation seed (default: each scenario's own)")
    run.add_argument("--json", action="store_true", help="print one JSON object per scenario")
    run.add_argument("--check-determinism", action="store_true",
                     help="run each scenario twice with the same seed and compare the trace hashes")
    run.set_defaults(func=_run)
    replay = actions.add_parser("replay", help="run one scenario with a seed and print every worker's outcome")
    replay.add_argument("name", metavar="NAME|FILE")
    replay.add_argument("--seed", type=int, required=True)
    replay.set_defaults(func=_replay)


def expected_text(scenario: Scenario) -> str:
    """The expected outcome in a few words (the list and the docs' table)."""
    expect = scenario.expect
    if not expect.success:
        plural = "s" if len(expect.workers) > 1 else ""
        where = f" on worker{plural} {', '.join(map(str, expect.workers))}" if expect.workers else ""
        text = f"{expect.error}{where}"
    elif expect.violated:
        text = f"runs, but violates {', '.join(expect.violated)}"
    else:
        text = "succeeds" + (f" with {', '.join(expect.properties)}" if expect.properties else "")
    if expect.after_restart is not None:
        text += "; the restarted job succeeds"
    return text


def _list(args: argparse.Namespace) -> int:
    try:
        scenarios = load_catalog()
    except ScenarioError as err:
        print(err, file=sys.stderr)
        return EXIT_INVALID
    width = max(len(s.name) for s in scenarios)
    for scenario in scenarios:
        story = scenario.description.split(". ")[0].replace("\n", " ")
        print(f"{scenario.name:<{width}}  {expected_text(scenario)}\n{'':<{width}}  {story}")
    return EXIT_MATCH


def _run(args: argparse.Namespace) -> int:
    try:
        scenarios = load_catalog() if args.all else [find_scenario(name) for name in args.names]
    except ScenarioError as err:
        print(err, file=sys.stderr)
        return EXIT_INVALID
    if not scenarios:
        print("mirrorlab scenario run: name a scenario or file, or pass --all (see mirrorlab scenario list)",
              file=sys.stderr)
        return EXIT_INVALID
    status = EXIT_MATCH
    for k, scenario in enumerate(scenarios, 1):
        try:
            verdict = run_scenario(scenario, args.seed, args.check_determinism)
        except ScenarioError as err:
            print(err, file=sys.stderr)
            return EXIT_INVALID
        if not verdict.ok:
            status = EXIT_MISMATCH
        if args.json:
            print(json.dumps(verdict.as_dict()))
        elif len(scenarios) > 1:
            mark = "ok  " if verdict.ok else "FAIL"
            print(f"[{k}/{len(scenarios)}] {mark} {scenario.name} (seed {verdict.seed})", flush=True)
            if not verdict.ok:
                print(verdict.describe())
        else:
            print(verdict.describe())
    return status


def _replay(args: argparse.Namespace) -> int:
    try:
        verdict = run_scenario(find_scenario(args.name), args.seed)
    except ScenarioError as err:
        print(err, file=sys.stderr)
        return EXIT_INVALID
    print(verdict.describe(full=True))
    return EXIT_MATCH if verdict.ok else EXIT_MISMATCH
