"""``mirrorlab scenario list|run|replay``: the catalog from the command line.

``run`` exits 0 when every outcome matches its scenario's expectation (a real run that cannot be made here is
skipped, with the reason), 1 when one does not and 2 when a scenario file is invalid or has no real counterpart.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .catalog import find_scenario, load_catalog
from .real_runner import run_real
from .runner import Verdict, run_scenario
from .schema import Scenario, ScenarioError

__all__ = ["register"]

EXIT_MATCH, EXIT_MISMATCH, EXIT_INVALID = 0, 1, 2


def register(commands: Any) -> None:
    """Adds the ``scenario`` command and its ``list``, ``run`` and ``replay`` subcommands to ``commands``."""
    scenario = commands.add_parser("scenario", help="run the catalog of failure scenarios (simulator or processes)")
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
    _backend_option(run)
    run.set_defaults(func=_run)
    replay = actions.add_parser("replay", help="run one scenario with a seed and print every worker's outcome")
    replay.add_argument("name", metavar="NAME|FILE")
    replay.add_argument("--seed", type=int, required=True)
    _backend_option(replay)
    replay.set_defaults(func=_replay)


def _backend_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("sim", "real"), default="sim",
                        help="the simulator (default), or local worker processes for scenarios marked real = true")


def _verdict(scenario: Scenario, args: argparse.Namespace, check_determinism: bool = False) -> Verdict:
    """Runs ``scenario`` on the chosen backend (``ScenarioError`` when it cannot run there)."""
    if args.backend == "sim":
        return run_scenario(scenario, args.seed, check_determinism)
    return run_real(scenario, args.seed)


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
    return text + (" [real]" if scenario.real else "")


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
    if args.backend == "real" and args.check_determinism:
        print("mirrorlab scenario run: --check-determinism compares simulated traces; real processes are not "
              "replayed by a seed. Fix: drop --backend real or --check-determinism.", file=sys.stderr)
        return EXIT_INVALID
    if args.backend == "real" and args.all:
        left_out = [s.name for s in scenarios if not s.real]
        scenarios = [s for s in scenarios if s.real]
        if not args.json:
            print(f"{len(scenarios)} scenario(s) marked real = true; {len(left_out)} run on the simulator only")
    status = EXIT_MATCH
    for k, scenario in enumerate(scenarios, 1):
        try:
            verdict = _verdict(scenario, args, args.check_determinism)
        except ScenarioError as err:
            print(err, file=sys.stderr)
            return EXIT_INVALID
        if not verdict.ok and not verdict.skipped:
            status = EXIT_MISMATCH
        if args.json:
            print(json.dumps(verdict.as_dict()))
        elif args.all or len(scenarios) > 1:
            mark = "skip" if verdict.skipped else "ok  " if verdict.ok else "FAIL"
            why = f": {verdict.skipped}" if verdict.skipped else ""
            print(f"[{k}/{len(scenarios)}] {mark} {scenario.name} (seed {verdict.seed}){why}", flush=True)
            if not verdict.ok and not verdict.skipped:
                print(verdict.describe())
        else:
            print(verdict.describe())
    return status


def _replay(args: argparse.Namespace) -> int:
    try:
        verdict = _verdict(find_scenario(args.name), args)
    except ScenarioError as err:
        print(err, file=sys.stderr)
        return EXIT_INVALID
    print(verdict.describe(full=True))
    return EXIT_MATCH if verdict.ok or verdict.skipped else EXIT_MISMATCH
