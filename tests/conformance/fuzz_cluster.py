"""Setup C of the differential fuzzer (fuzz_against_tf.py): TF 2.21's MultiWorkerMirroredStrategy on a real cluster
of 2 worker processes against mirrorlab's ``SimCluster(workers=2)`` (1 CPU each), compared per worker.

A batch of specs runs in one TF cluster launch: both workers (on 127.0.0.1 in a private network namespace, as
record_golden.py runs them) create their MWMS, then run the specs in order, each followed by a health check (an
all-reduce with a timeout), and append one JSON line per spec. A spec after which the check fails, or during which
the workers stop making progress (a collective that blocks until a peer dies, a crash) in two launches, broke TF's
collectives for the rest of the process: the launch is killed (its whole process group), the spec is reported as
breaking (BROKE, not compared), and a fresh cluster runs the specs after it. Every launch is bounded in time. Most
breaking specs are an input pipeline failing on one worker only (dataset_known_differences.py); the generators
avoid the ones they can tell (``breaks_cluster``). A differing spec is minimized by running
a level of its shrunk variants in one launch at a time (at most SHRINK_LEVELS launches).

The children run a snapshot of the conformance package (TF's autograph reads a traced function's source file, so an
edit to it during a run must not reach them). The modes ``cluster`` and ``worker`` are how this script runs them.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance import fuzz_checkpoints, fuzz_collectives, fuzz_datasets  # noqa: E402
from conformance.adapters import Api, error_json  # noqa: E402
from conformance.cases import Case  # noqa: E402
from conformance.harness import differences  # noqa: E402

__all__ = ["AREAS", "ClusterFuzzer", "LaunchFailed", "breaks_cluster", "generate", "run", "run_spec", "shrink"]

Spec = dict[str, Any]
Result = dict[str, Any]
SCRIPT = Path(__file__).resolve()
# Each area: how a spec of setup C is generated and shrunk (checkpoint specs name the cluster's MWMS "C").
AREAS: dict[str, tuple[Callable[[random.Random], Spec], Callable[[Spec], Iterator[Spec]]]] = {
    "dataset": (fuzz_datasets.generate, fuzz_datasets.shrink),
    "collective": (fuzz_collectives.generate, fuzz_collectives.shrink),
    "checkpoint": (fuzz_checkpoints.generate_cluster, fuzz_checkpoints.shrink),
}
STARTUP_S = 180        # a launch until its first spec starts (two TF imports and the cluster's handshake)
STALL_S = 60           # a launch without progress for this long is stuck in a collective
LAUNCH_S = 420         # a launch in all
HEALTH_TIMEOUT_S = 20  # the health check's all-reduce
MAX_LAUNCHES = 8       # per batch: a batch with more breaking specs leaves its rest unrun
SHRINK_LEVELS = 4      # launches to minimize one differing spec
SHRINK_BATCH = 24      # shrunk variants tried per level
MINIMIZED = 3          # differing specs minimized per area and run (the others are printed as found)
BATCH = 50             # specs per batch (one launch unless some break the cluster)


class LaunchFailed(RuntimeError):
    """TF's cluster did not start (no spec began): nothing can be compared."""


def breaks_cluster(spec: Spec) -> bool:
    """True for a spec known to break TF's cluster, a deliberate difference (dataset_known_differences.py,
    ONE_FILE_REASON): one text file auto-sharded by FILE (or AUTO) over 2 workers fails on worker 0 alone."""
    source = spec.get("source", {})
    return (spec["area"] == "dataset" and source.get("files") == 1 and spec["policy"] in (None, "AUTO", "FILE")
            and "from_function" not in spec)


def generate(area: str, rng: random.Random) -> Spec:
    """A random spec of ``area`` for setup C (drawn again while it would break TF's cluster)."""
    spec = AREAS[area][0](rng)
    while breaks_cluster(spec):
        spec = AREAS[area][0](rng)
    return spec


def shrink(spec: Spec) -> Iterator[Spec]:
    """Smaller variants of a setup-C spec (those of its area that keep TF's cluster whole)."""
    return (smaller for smaller in AREAS[spec["area"]][1](spec) if not breaks_cluster(smaller))


def run_spec(api: Api, spec: Spec, strategy: Any, directory: Path) -> Result:
    """One worker's normalized result of ``spec`` under the cluster's ``strategy``; a checkpoint spec works in
    ``directory`` (shared by the workers, named so that ``fuzz_checkpoints.clean`` spells it ``<dir>``)."""
    if spec["area"] == "checkpoint":
        directory.mkdir(parents=True, exist_ok=True)
        return fuzz_checkpoints.clean(api.run_case(Case("fuzz", fuzz_checkpoints.build(spec, directory)), strategy))
    module = fuzz_datasets if spec["area"] == "dataset" else fuzz_collectives
    return api.run_case(Case("fuzz", module.build(spec)), strategy)


def spec_directory(base: Path, index: int) -> Path:
    """The directory of spec ``index`` of a batch (created by every worker that needs it)."""
    return base / f"{fuzz_checkpoints.PREFIX}{index}"


def mirrorlab_results(api: Api, spec: Spec) -> list[Result]:
    """mirrorlab's result (``api``: a MirrorlabApi) of ``spec`` on each worker of ``SimCluster(workers=2)``."""
    from mirrorlab.sim import SimCluster

    base = Path(tempfile.mkdtemp(prefix="fuzzc-ml-"))

    def program() -> Result:
        """One simulated worker: create the MWMS, then run the spec."""
        try:
            strategy = api.mwms()
        except Exception as error:
            return {"strategy_creation": error_json(error)}
        return run_spec(api, spec, strategy, spec_directory(base, 0))

    try:
        return [{"program": error_json(r)} if isinstance(r, BaseException) else r
                for r in SimCluster(workers=2, check_mirrors=False).run(program)]
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- TF's side: the workers ---------------------------------------------------------------------------------------


def healthy(api: Api, strategy: Any) -> str | None:
    """None when an all-reduce over the cluster still works (within HEALTH_TIMEOUT_S), else what went wrong."""
    options = api.CommunicationOptions(timeout_seconds=HEALTH_TIMEOUT_S)
    try:
        total = strategy.run(lambda: api.get_replica_context().all_reduce(api.ReduceOp.SUM, api.constant(1.0),
                                                                          options=options))
        value = float(strategy.experimental_local_results(total)[0])
    except Exception as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return None if value == strategy.num_replicas_in_sync else f"the health all-reduce gave {value}"


def worker_mode(specs_file: Path, start: int, base: Path, out: Path) -> None:
    """One TF worker (TF_CONFIG set by the cluster mode): the specs from ``start`` on, one JSON line each, until the
    health check fails; then exit at once (``os._exit``: a worker must not wait for a broken peer)."""
    from conformance.adapters import TfApi
    from conformance.dataset_cases import text_files

    specs = json.loads(specs_file.read_text())
    api = TfApi()
    strategy = api.mwms()  # before any other TF op, as multi-worker collectives require
    text_files()
    with out.open("a") as lines:
        for index in range(start, len(specs)):
            lines.write(json.dumps({"begin": index}) + "\n")
            lines.flush()
            try:
                result = run_spec(api, specs[index], strategy, spec_directory(base, index))
            except Exception as error:  # the harness failed (e.g. a value it cannot normalize)
                result = {"harness": f"{type(error).__name__}: {error}"}
            broken = healthy(api, strategy)
            lines.write(json.dumps({"index": index, "result": result, "broken": broken}) + "\n")
            lines.flush()
            if broken:
                break
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def cluster_mode(specs_file: Path, start: int, base: Path, outs: list[Path]) -> None:
    """Inside the private network namespace: start both workers and wait (the parent bounds the launch)."""
    from conformance.record_golden import run_workers

    def command(rank: int) -> list[str]:
        """Worker ``rank``'s command line."""
        return [sys.executable, str(Path(__file__).resolve()), "worker", str(specs_file), str(start), str(base),
                str(outs[rank])]

    codes = run_workers("C", command, [out.with_suffix(".log") for out in outs], timeout_s=LAUNCH_S)
    sys.exit(0 if codes == [0, 0] else 1)


# -- TF's side: the parent ----------------------------------------------------------------------------------------


@dataclass
class Batch:
    """TF's outcome of a batch of specs: per spec, each worker's result, or why the spec broke the cluster."""

    results: dict[int, list[Result]] = field(default_factory=dict)
    broke: dict[int, str] = field(default_factory=dict)
    stalled: set[int] = field(default_factory=set)   # specs that stalled once and were run again
    launches: int = 0

    def settle(self, records: list[list[dict[str, Any]]], start: int, count: int, why: str) -> int:
        """Take a launch's records (per worker: ``{"begin": i}`` and ``{"index": i, "result", "broken"}`` lines)
        for the specs ``start``..``count - 1``: the results of the specs every worker finished healthily, in order;
        the first other spec broke the cluster (its health check failed, or the launch ended, ``why``, before every
        worker finished it a second time: TF on a loaded machine may stall once). Returns where the next launch
        starts."""
        finished = [{r["index"]: r for r in rank if "index" in r} for rank in records]
        index = start
        while index < count and all(index in f for f in finished):
            if any(f[index]["broken"] for f in finished):
                self.broke[index] = "; ".join(f"worker {w}: {f[index]['broken']}"
                                              for w, f in enumerate(finished) if f[index]["broken"])
                return index + 1
            self.results[index] = [f[index]["result"] for f in finished]
            index += 1
        if index == count:
            return count
        if index not in self.stalled:
            self.stalled.add(index)
            return index
        began = [max((r["begin"] for r in rank if "begin" in r), default=None) for rank in records]
        self.broke[index] = f"{why} (the workers began specs {began})"
        return index + 1


def _records(out: Path) -> list[dict[str, Any]]:
    """The complete JSON lines a worker wrote so far."""
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines(keepends=True) if line.endswith("\n")]


def _log_tail(path: Path, lines: int = 12) -> str:
    """The last lines of a log, indented."""
    text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else ["(no log)"]
    return "\n".join("      " + line for line in text)


class ClusterFuzzer:
    """Runs batches of specs on TF's 2-worker cluster (in ``work``) and on mirrorlab's simulator, and compares."""

    def __init__(self, work: Path, snapshot: Path) -> None:
        """``work``: a directory for the launches' files; ``snapshot``: the copy of this script the children run."""
        self.work = work
        self.script = snapshot
        self.batches = 0
        from conformance.adapters import MirrorlabApi

        self.mirrorlab = MirrorlabApi()

    def launch(self, specs_file: Path, start: int, base: Path, tag: str) -> tuple[list[list[dict[str, Any]]], str]:
        """One bounded cluster launch running the specs from ``start``: each worker's records, and why it ended."""
        outs = [base / f"{tag}_w{rank}.jsonl" for rank in (0, 1)]
        command = [sys.executable, str(self.script), "cluster", str(specs_file), str(start), str(base),
                   *map(str, outs)]
        inner = f"ip link set lo up && exec {shlex.join(command)}"
        log = base / f"{tag}_cluster.log"
        with log.open("w") as out:
            process = subprocess.Popen(["unshare", "-n", "sh", "-c", inner], stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        began = time.monotonic()
        deadline, size, why = began + STARTUP_S, 0, "finished"
        while process.poll() is None:
            time.sleep(0.25)
            now = time.monotonic()
            grown = sum(o.stat().st_size for o in outs if o.exists())
            if grown != size:
                size, deadline = grown, now + STALL_S
            if now > deadline or now - began > LAUNCH_S:
                why = f"no progress for {STALL_S} s" if now <= began + LAUNCH_S else f"ran past {LAUNCH_S} s"
                break
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        if why == "finished" and process.returncode:
            why = f"the cluster exited with {process.returncode}"
        records = [_records(o) for o in outs]
        if not any(r for r in records):
            raise LaunchFailed(f"TF's cluster started no spec ({why}); logs:\n{_log_tail(log)}\n"
                               + "\n".join(_log_tail(o.with_suffix('.log')) for o in outs))
        return records, why

    def run_tf(self, specs: list[Spec]) -> Batch:
        """TF's results of ``specs``: relaunching after each spec that breaks the cluster (at most MAX_LAUNCHES)."""
        self.batches += 1
        base = self.work / f"batch{self.batches}"
        base.mkdir()
        specs_file = base / "specs.json"
        specs_file.write_text(json.dumps(specs))
        batch, start = Batch(), 0
        while start < len(specs) and batch.launches < MAX_LAUNCHES:
            records, why = self.launch(specs_file, start, base, f"launch{batch.launches}")
            batch.launches += 1
            start = batch.settle(records, start, len(specs), why)
        return batch

    def compare(self, specs: list[Spec]) -> tuple[list[list[str] | None], Batch]:
        """Per spec: the differences between TF's and mirrorlab's per-worker results ([] when equal; None when the
        spec broke TF's cluster or was not run)."""
        batch = self.run_tf(specs)
        found: list[list[str] | None] = []
        for index, spec in enumerate(specs):
            expected = batch.results.get(index)
            if expected is None:
                found.append(None)
                continue
            actual = mirrorlab_results(self.mirrorlab, spec)
            found.append([f"worker {w}: {d}" for w, (e, a) in enumerate(zip(expected, actual, strict=True))
                          for d in (["the harness failed: " + e["harness"]] if "harness" in e else
                                    differences(e, a))])
        return found, batch

    def minimize(self, spec: Spec, diffs: list[str]) -> tuple[Spec, list[str]]:
        """A smaller spec that still differs: each level runs up to SHRINK_BATCH variants in one launch and keeps
        the first that differs (at most SHRINK_LEVELS levels)."""
        for _ in range(SHRINK_LEVELS):
            candidates = list(shrink(spec))[:SHRINK_BATCH]
            if not candidates:
                break
            found, _ = self.compare(candidates)
            smaller = next(((c, d) for c, d in zip(candidates, found, strict=True) if d), None)
            if smaller is None:
                break
            spec, diffs = smaller
        return spec, diffs


def report(spec: Spec, diffs: list[str], shown: int = 4) -> None:
    """Print one differing spec of setup C (replay it with ``--replay ... --setups C``) and its first differences."""
    print(f"DIFF [C] {json.dumps(spec)}", flush=True)
    for line in diffs[:shown]:
        print(f"    {line[:600]}", flush=True)


def fuzz(fuzzer: ClusterFuzzer, area: str, seed: int, cases: int, deadline: float, verbose: bool = False) -> None:
    """Run up to ``cases`` random specs of ``area`` in setup C, BATCH at a time, until ``deadline``; print every
    differing spec (the first MINIMIZED minimized, while time is left) and every spec that broke TF's cluster, then
    a summary."""
    started, run, differing, broke, stalled = time.monotonic(), 0, 0, 0, 0
    for first in range(0, cases, BATCH):
        if time.monotonic() > deadline:
            break
        specs = [generate(area, random.Random(f"{seed}:{area}:{i}")) for i in range(first, min(cases, first + BATCH))]
        print(f"[{area} C cases {first}..{first + len(specs) - 1}]", file=sys.stderr, flush=True)
        if verbose:
            print("\n".join(json.dumps(spec) for spec in specs), file=sys.stderr, flush=True)
        found, batch = fuzzer.compare(specs)
        run += sum(d is not None for d in found)
        stalled += len(batch.stalled)
        for index, why in batch.broke.items():
            broke += 1
            print(f"BROKE [C] {json.dumps(specs[index])}\n    {why}", flush=True)
        for spec, diffs in zip(specs, found, strict=True):
            if diffs:
                differing += 1
                shrinking = differing <= MINIMIZED and time.monotonic() < deadline
                report(*(fuzzer.minimize(spec, diffs) if shrinking else (spec, diffs)))
    print(f"{area} [C]: {run} cases compared, {differing} differing, {broke} broke TF's cluster, {stalled} stalled "
          f"once ({time.monotonic() - started:.0f} s)", flush=True)


def replay(fuzzer: ClusterFuzzer, spec: Spec) -> None:
    """Run one spec in setup C and print whether it differs."""
    found, batch = fuzzer.compare([spec])
    if found[0] is None:
        print(f"[C] broke TF's cluster: {batch.broke.get(0)}")
    else:
        print("[C] " + ("same" if not found[0] else "\n    ".join(["differs:", *found[0]])))


def run(areas: list[str], seed: int, cases: int, deadline: float, verbose: bool, spec: Spec | None) -> None:
    """Setup C of fuzz_against_tf.py: replay ``spec``, or fuzz each of ``areas`` that C covers."""
    logging.getLogger("mirrorlab").setLevel(logging.ERROR)  # AUTO sharding's fallback warnings, as TF's
    with tempfile.TemporaryDirectory(prefix="fuzzc-") as tmp:
        fuzzer = ClusterFuzzer(Path(tmp), snapshot(Path(tmp)))
        try:
            if spec is not None:
                replay(fuzzer, spec)
                return
            for area in areas:
                if area in AREAS:
                    fuzz(fuzzer, area, seed, cases, deadline, verbose)
                else:
                    print(f"{area} [C]: not covered in setup C", flush=True)
        except LaunchFailed as failed:
            sys.exit(str(failed))


def snapshot(work: Path) -> Path:
    """Copy the conformance package into ``work``; the copy of this script, which the children run."""
    copy = work / "snapshot" / "conformance"
    shutil.copytree(SCRIPT.parent, copy, ignore=shutil.ignore_patterns("golden", "__pycache__"))
    return copy / SCRIPT.name


def main() -> None:
    """The children's modes (the fuzzer itself is fuzz_against_tf.py's setup C)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    cluster = sub.add_parser("cluster")
    worker = sub.add_parser("worker")
    for mode in (cluster, worker):
        mode.add_argument("specs", type=Path)
        mode.add_argument("start", type=int)
        mode.add_argument("base", type=Path)
    cluster.add_argument("outs", type=Path, nargs=2)
    worker.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.mode == "cluster":
        cluster_mode(args.specs, args.start, args.base, args.outs)
    else:
        worker_mode(args.specs, args.start, args.base, args.out)


if __name__ == "__main__":
    main()
