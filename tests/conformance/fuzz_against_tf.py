"""Differential fuzzing of mirrorlab against TensorFlow 2.21: random cases run in TF and in mirrorlab in one process,
compared as the conformance suites compare golden results (harness.differences), differing cases minimized.

Run by hand with the TF venv (not collected by pytest; TF is slow, keep a run to a few minutes)::

    /work/tfvenv/bin/python tests/conformance/fuzz_against_tf.py dataset --cases 300 --seed 1
    /work/tfvenv/bin/python tests/conformance/fuzz_against_tf.py collective checkpoint --cases 200 --setups A
    /work/tfvenv/bin/python tests/conformance/fuzz_against_tf.py --replay '{"area": "dataset", ...}'
    /work/tfvenv/bin/python tests/conformance/fuzz_against_tf.py dataset collective checkpoint --setups C  # root

Areas: ``dataset`` (fuzz_datasets.py: distributed pipelines, per-step values and reductions), ``collective``
(fuzz_collectives.py: reduce/gather/all_reduce/all_gather/compute_average_loss on uneven per-replica values),
``checkpoint`` (fuzz_checkpoints.py: save under one strategy, restore under another; the spec names its strategies,
so it runs once rather than per setup) and ``variable`` (fuzz_variables.py: a distributed variable of a random kind,
then random updates, scatters, reads, reductions and merge_call/extended.update paths) and ``checkpoint_api``
(fuzz_checkpoint_api.py: random sequences over Checkpoint, CheckpointManager and the readers on nested trackables and
Keras models, in the setup's strategy) and ``keras`` (fuzz_keras.py: random Dense models, losses, optimizers and
metrics trained with fit, then evaluate and predict, in the setup's strategy or the default one; an area module's
own ``differences``, here with a training tolerance, replaces harness.differences) and ``functional``
(fuzz_functional.py: random graphs of layers, merges and operators as keras.Model(inputs, outputs): their layers,
checkpoint keys, outputs, tape gradients, fit and predict). Setups: A =
MirroredStrategy over 2 logical CPUs, B = MWMS without a cluster (1 replica), M1 = MirroredStrategy over 1 CPU;
C (asked for by name) = MWMS on a real cluster of 2 TF worker processes against mirrorlab's SimCluster(workers=2),
compared per worker, in batches of cluster launches (fuzz_cluster.py: dataset, collective and checkpoint, whose
C specs save or restore under the cluster's MWMS; specs that break TF's cluster are reported as BROKE).
Case i of a seed is ``random.Random(f"{seed}:{area}:{i}")``; a difference prints its minimized spec (replay it with
``--replay``) and the differences found. Cases that would crash TF or break its collectives for the rest of the
process are not generated or not run (see dataset_known_differences.py); ``--verbose`` prints each spec first, to
find one that still does.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance import fuzz_checkpoints, fuzz_cluster, fuzz_collectives, fuzz_datasets, fuzz_variables  # noqa: E402
from conformance import fuzz_checkpoint_api, fuzz_functional, fuzz_keras  # noqa: E402
from conformance.adapters import Api, MirrorlabApi, TfApi  # noqa: E402
from conformance.cases import Case  # noqa: E402
from conformance.harness import differences  # noqa: E402

AREAS: dict[str, ModuleType] = {"dataset": fuzz_datasets, "collective": fuzz_collectives,
                                "checkpoint": fuzz_checkpoints, "variable": fuzz_variables,
                                "checkpoint_api": fuzz_checkpoint_api, "keras": fuzz_keras,
                                "functional": fuzz_functional}
SETUPS = ("A", "B", "M1")
SHRINK_RUNS = 40      # at most this many candidate runs to minimize one differing case
SHOWN = 4             # differences printed per case


class TfBroken(RuntimeError):
    """TF's process can no longer run collectives: nothing after this can be compared."""


class Fuzzer:
    """Both frameworks' APIs and the comparison of one spec in one setup."""

    def __init__(self, tf_api: TfApi | None = None) -> None:
        """TF (by default with 2 logical CPUs, which setup A needs) and mirrorlab."""
        self.apis: dict[str, Api] = {"tf": tf_api or TfApi(logical_cpus=2), "ml": MirrorlabApi()}

    def result(self, framework: str, spec: dict[str, Any], setup: str) -> dict[str, Any]:
        """One framework's normalized result of ``spec`` in ``setup``."""
        api = self.apis[framework]
        module = AREAS[spec["area"]]
        strategy = None if spec["area"] == "checkpoint" else api.mirrored(1) if setup == "M1" else \
            api.strategy_for(setup)
        try:
            result = api.run_case(Case("fuzz", module.build(spec)), strategy)
        except Exception as error:  # the harness itself failed (e.g. a value it cannot normalize)
            return {"harness": f"{type(error).__name__}: {error}"}
        return fuzz_checkpoints.clean(result) if spec["area"] == "checkpoint" else result

    def compare(self, spec: dict[str, Any], setup: str) -> list[str]:
        """The differences between TF's and mirrorlab's results of ``spec`` in ``setup``."""
        expected = self.result("tf", spec, setup)
        self.require_healthy_tf(spec)
        actual = self.result("ml", spec, setup)
        broken = [f"the harness failed on {name}: {result['harness']}"
                  for name, result in (("TF", expected), ("mirrorlab", actual)) if "harness" in result]
        return broken or getattr(AREAS[spec["area"]], "differences", differences)(expected, actual)

    def require_healthy_tf(self, spec: dict[str, Any]) -> None:
        """Stop when TF's collectives no longer work: a failed collective kernel aborts every later collective of the
        process ("Restart your program to reset"), so every later case would differ."""
        api = self.apis["tf"]
        strategy = api.strategy_for("A")
        try:
            strategy.run(lambda: api.get_replica_context().all_reduce(api.ReduceOp.SUM, api.constant(1.0)))
        except Exception as error:
            raise TfBroken(f"TF's collectives failed after this case; avoid what it does:\n{json.dumps(spec)}\n"
                           f"{error}") from None

    def minimize(self, spec: dict[str, Any], setup: str) -> tuple[dict[str, Any], list[str]]:
        """A smaller spec that still differs (greedy: take the first smaller variant that differs, repeat)."""
        found = self.compare(spec, setup)
        runs = 0
        progress = True
        while progress and runs < SHRINK_RUNS:
            progress = False
            for candidate in AREAS[spec["area"]].shrink(spec):
                runs += 1
                diffs = self.compare(candidate, setup)
                if diffs:
                    spec, found, progress = candidate, diffs, True
                    break
                if runs >= SHRINK_RUNS:
                    break
        return spec, found


def report(setup: str, spec: dict[str, Any], diffs: list[str]) -> None:
    """Print one differing case: the setup, its spec and its first differences."""
    print(f"DIFF [{setup}] {json.dumps(spec)}", flush=True)
    for line in diffs[:SHOWN]:
        print(f"    {line[:600]}", flush=True)


def fuzz(fuzzer: Fuzzer, area: str, seed: int, cases: int, setups: tuple[str, ...], deadline: float,
         verbose: bool = False) -> tuple[int, int]:
    """Run up to ``cases`` random cases of ``area`` until ``deadline`` (``verbose``: print each spec to stderr
    first, to find one that crashes TF); returns (cases run, cases differing)."""
    module = AREAS[area]
    differing = 0
    for i in range(cases):
        if time.monotonic() > deadline:
            return i, differing
        spec = module.generate(random.Random(f"{seed}:{area}:{i}"))
        if verbose or i % 50 == 0:
            print(f"[{area} case {i}] {json.dumps(spec) if verbose else ''}", file=sys.stderr, flush=True)
        for setup in (setups if area != "checkpoint" else setups[:1]):
            if fuzzer.compare(spec, setup):
                differing += 1
                report(setup, *fuzzer.minimize(spec, setup))
                break
    return cases, differing


def main() -> None:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("areas", nargs="*", help=f"some of {', '.join(AREAS)} (default: all)")
    parser.add_argument("--cases", type=int, default=100, help="cases per area")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--setups", nargs="+", choices=(*SETUPS, "C"), default=list(SETUPS))
    parser.add_argument("--minutes", type=float, default=5.0, help="stop every area after this long in all")
    parser.add_argument("--replay", help="one spec (JSON) to run and compare instead of fuzzing")
    parser.add_argument("--verbose", action="store_true", help="print every spec to stderr before running it")
    args = parser.parse_args()
    os.environ.pop("TF_CONFIG", None)  # A and B run without a cluster
    unknown = set(args.areas) - set(AREAS)
    if unknown:
        parser.error(f"unknown areas {sorted(unknown)}: choose from {', '.join(AREAS)}")
    try:
        run(Fuzzer() if set(args.setups) - {"C"} else None, args)
    except TfBroken as broken:
        sys.exit(str(broken))


def run(fuzzer: Fuzzer | None, args: argparse.Namespace) -> None:
    """Replay one spec, or fuzz every requested area (setup C in TF worker processes, see fuzz_cluster.py)."""
    deadline = time.monotonic() + 60 * args.minutes
    if "C" in args.setups:
        fuzz_cluster.run(list(args.areas or AREAS), args.seed, args.cases, deadline, args.verbose,
                         json.loads(args.replay) if args.replay else None)
    args.setups = [setup for setup in args.setups if setup != "C"]
    if fuzzer is None:
        return
    if args.replay:
        spec = json.loads(args.replay)
        for setup in args.setups:
            diffs = fuzzer.compare(spec, setup)
            print(f"[{setup}] " + ("same" if not diffs else "\n    ".join(["differs:", *diffs])))
        return
    for area in args.areas or AREAS:
        start = time.monotonic()
        count, differing = fuzz(fuzzer, area, args.seed, args.cases, tuple(args.setups), deadline, args.verbose)
        print(f"{area}: {count} cases, {differing} differing ({time.monotonic() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
