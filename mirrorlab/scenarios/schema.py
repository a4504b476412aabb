"""The scenario file format: a TOML file read with ``tomllib`` and checked into a ``Scenario``.

Every mistake raises ``ScenarioError`` naming the file, the key and the fix, so a catalog author never
sees a bare ``KeyError``. The layout is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from mirrorlab.sim import Clog, Crash, Cut, Delay, Drop, Fault, Isolate, Maybe, Preempt, Slow, WorkerSetup

from .real_faults import unsupported_on_real

__all__ = ["Scenario", "Program", "Expectation", "ScenarioError", "load_scenario", "FAULT_KINDS", "PROPERTIES",
           "BUILTIN_MODULE"]

#: ``[[faults]] kind = ...`` -> the simulator's fault class (``maybe`` wraps one of the others: ``fault = {...}``).
FAULT_KINDS: dict[str, type[Fault]] = {"crash": Crash, "preempt": Preempt, "slow": Slow, "delay": Delay,
                                       "drop": Drop, "cut": Cut, "clog": Clog, "isolate": Isolate, "maybe": Maybe}
#: Properties ``expect.properties`` / ``expect.violated`` may name.
PROPERTIES = ("same_on_all_workers", "matches_single_worker", "finite")
#: Where ``program.builtin`` names are looked up.
BUILTIN_MODULE = "mirrorlab.catalog.programs"


class ScenarioError(ValueError):
    """A scenario file that cannot be run as written (the CLI exits with status 2)."""


@dataclass(frozen=True)
class Program:
    """What every simulated worker runs: ``module:function`` called with ``options`` as keyword arguments."""

    target: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Expectation:
    """The outcome a scenario promises: an error (its class, workers, message fragments) or success with
    properties, returned values and files; ``after_restart`` is checked on a rerun without faults; ``real`` (from
    ``[expect.real]``) replaces it on real processes, where an outcome differs (a lost heartbeat, not a deadlock)."""

    success: bool
    error: str | None = None
    workers: tuple[int, ...] = ()
    message: tuple[str, ...] = ()
    properties: tuple[str, ...] = ()
    violated: tuple[str, ...] = ()
    returns: dict[str, Any] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    absent_files: tuple[str, ...] = ()
    after_restart: Expectation | None = None
    real: Expectation | None = None


@dataclass(frozen=True)
class Scenario:
    """One catalog entry: the story, the cluster and its faults, the program and the expected outcome."""

    name: str
    description: str
    path: Path
    workers: int
    devices_per_worker: int
    chief: bool
    seed: int
    heartbeat_timeout: float
    faults: tuple[Fault, ...]
    setups: tuple[WorkerSetup, ...]
    program: Program
    expect: Expectation
    real: bool = False

    def expectation(self, backend: str) -> Expectation:
        """What the run on ``backend`` ("sim" or "real") must end with."""
        return self.expect.real if backend == "real" and self.expect.real is not None else self.expect

    def cluster_kwargs(self, seed: int | None = None, faults: bool = True) -> dict[str, Any]:
        """``SimCluster(**kwargs)`` for this scenario (another ``seed``, or without its faults)."""
        return {"workers": self.workers, "devices_per_worker": self.devices_per_worker, "chief": self.chief,
                "seed": self.seed if seed is None else seed, "heartbeat_timeout": self.heartbeat_timeout,
                "faults": self.faults if faults else (), "setups": self.setups}


class _Table:
    """A TOML table being checked: typed reads that name the file and the dotted key on failure."""

    def __init__(self, path: Path, where: str, data: dict[str, Any]) -> None:
        self.path, self.where, self.data = path, where, data

    def fail(self, key: str, problem: str, fix: str) -> ScenarioError:
        dotted = f"{self.where}.{key}" if self.where else key
        return ScenarioError(f"{self.path}: key {dotted!r}: {problem}. Fix: {fix}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = dataclasses.MISSING, fix: str = "") -> Any:
        if key not in self.data:
            if default is dataclasses.MISSING:
                raise self.fail(key, "is missing", fix or f"add {key} = ... to the file")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.fail(key, f"is {value!r} ({type(value).__name__}), not {names}", fix or f"write a {names}")
        return value

    def table(self, key: str, required: bool = False) -> _Table:
        value = self.get(key, dict, dataclasses.MISSING if required else {}, fix=f"write a [{key}] table")
        return _Table(self.path, f"{self.where}.{key}" if self.where else key, value)

    def only(self, allowed: tuple[str, ...]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.fail(key, "is not a known key", f"use one of {', '.join(allowed)}")


def load_scenario(path: str | Path) -> Scenario:
    """Reads and checks one scenario file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read the scenario file ({err.strerror}). Fix: give the path of an "
                            "existing .toml file or a catalog name (mirrorlab scenario list).") from None
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{path}: not valid TOML ({err}). Fix: correct the syntax at that line.") from None
    top = _Table(path, "", data)
    top.only(("name", "description", "seed", "real", "cluster", "workers", "faults", "program", "expect"))
    name = top.get("name", str)
    if name != path.stem:
        raise top.fail("name", f"is {name!r} but the file is {path.name}", f"name the file {name}.toml or set "
                       f"name = {path.stem!r}")
    cluster = top.table("cluster", required=True)
    cluster.only(("workers", "devices_per_worker", "chief", "heartbeat_timeout"))
    workers = cluster.get("workers", int)
    if workers < 1:
        raise cluster.fail("workers", f"is {workers}", "use at least 1")
    devices = cluster.get("devices_per_worker", int, 1)
    if devices < 1:
        raise cluster.fail("devices_per_worker", f"is {devices}", "use at least 1")
    faults = tuple(_fault(_Table(path, f"faults[{k}]", _item(top, "faults", k)), workers)
                   for k in range(len(top.get("faults", list, []))))
    setups = tuple(_setup(_Table(path, f"workers[{k}]", _item(top, "workers", k)), workers)
                   for k in range(len(top.get("workers", list, []))))
    if len({s.worker for s in setups}) != len(setups):
        raise top.fail("workers", "lists one worker twice", "merge the overrides of each worker into one [[workers]]")
    expect = _expectation(top.table("expect", required=True), workers)
    real = top.get("real", bool, False)
    if expect.real is not None and not real:
        raise top.fail("expect.real", "describes a run on real processes, but real is not true",
                       "add real = true at the top of the file, or remove [expect.real]")
    if real:
        for k, fault in enumerate(faults):
            problem = unsupported_on_real(fault)
            if problem:
                raise _Table(path, f"faults[{k}]", {}).fail("kind", problem, "remove the fault or set real = false")
    return Scenario(name=name, description=top.get("description", str).strip(), path=path, workers=workers,
                    devices_per_worker=devices, chief=cluster.get("chief", bool, False),
                    seed=top.get("seed", int, 0), heartbeat_timeout=float(cluster.get("heartbeat_timeout",
                                                                                      (int, float), 10.0)),
                    faults=faults, setups=setups, program=_program(top.table("program", required=True)),
                    expect=expect, real=real)


def _item(top: _Table, key: str, index: int) -> dict[str, Any]:
    item = top.data[key][index]
    if not isinstance(item, dict):
        raise top.fail(f"{key}[{index}]", f"is {item!r}", f"write each entry as a [[{key}]] table")
    return item


def _worker_index(table: _Table, key: str, workers: int) -> int:
    index = table.get(key, int)
    if not 0 <= index < workers:
        raise table.fail(key, f"is {index}, not a worker of this {workers}-worker cluster",
                         f"use a worker index 0..{workers - 1}")
    return index


def _fault(table: _Table, workers: int, kinds: tuple[str, ...] = tuple(FAULT_KINDS)) -> Fault:
    kind = table.get("kind", str, fix=f"set kind to one of {', '.join(kinds)}")
    if kind not in kinds:
        nested = ", inside a maybe, which wraps one plain fault" if kind in FAULT_KINDS else ""
        raise table.fail("kind", f"is {kind!r}{nested}", f"use one of {', '.join(kinds)}")
    if kind == "maybe":
        return _maybe(table, workers)
    cls = FAULT_KINDS[kind]
    names = tuple(f.name for f in dataclasses.fields(cls))
    table.only(("kind", *names))
    for key in ("worker", "src", "dst", "a", "b"):
        if key in names and key in table.data:
            _worker_index(table, key, workers)
    kwargs = {k: v for k, v in table.data.items() if k != "kind"}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise table.fail("kind", f"a {kind} fault cannot be made from {kwargs} ({err})",
                         f"give the fields of {cls.__name__}: {', '.join(names)}") from None


def _maybe(table: _Table, workers: int) -> Maybe:
    """``kind = "maybe"``: one plain fault (``fault = { kind = "crash", ... }``) that the run's seed enables or not,
    then fires at each chance with ``fire_probability``."""
    table.only(("kind", "fault", "enabled_probability", "fire_probability"))
    plain = tuple(kind for kind in FAULT_KINDS if kind != "maybe")
    if not isinstance(table.data.get("fault"), dict):
        raise table.fail("fault", f"is {table.data.get('fault', 'missing')!r}, not a table",
                         'wrap one plain fault: fault = { kind = "crash", worker = 1, at_step = 2 }')
    fault = _fault(table.table("fault", required=True), workers, plain)
    chances = {}
    for key, default in (("enabled_probability", 0.5), ("fire_probability", 1.0)):
        value = table.get(key, (int, float), default, fix=f"write a probability, e.g. {key} = 0.5")
        if not 0.0 <= value <= 1.0:
            raise table.fail(key, f"is {value!r}, not a probability", f"use a number from 0 to 1, e.g. {key} = 0.5")
        chances[key] = float(value)
    return Maybe(fault, **chances)


def _setup(table: _Table, workers: int) -> WorkerSetup:
    table.only(("worker", "tf_config", "environ", "devices", "fingerprint"))
    worker = _worker_index(table, "worker", workers)
    environ = {k: _string(table, f"environ.{k}", v) for k, v in table.get("environ", dict, {}).items()}
    if "tf_config" in table.data:
        environ["TF_CONFIG"] = table.get("tf_config", str)
    fingerprint = {k: _string(table, f"fingerprint.{k}", v) for k, v in table.get("fingerprint", dict, {}).items()}
    devices = table.get("devices", int, None)
    if devices is not None and devices < 1:
        raise table.fail("devices", f"is {devices}", "use at least 1")
    return WorkerSetup(worker, environ=environ, devices=devices, fingerprint=fingerprint)


def _string(table: _Table, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise table.fail(key, f"is {value!r}", "quote the value: environment and fingerprint entries are strings")
    return value


def _program(table: _Table) -> Program:
    table.only(("builtin", "function", "options"))
    if ("builtin" in table.data) == ("function" in table.data):
        raise table.fail("builtin", "exactly one of program.builtin and program.function must be set",
                         "write builtin = \"custom_loop\" or function = \"package.module:function\"")
    if "builtin" in table.data:
        target = f"{BUILTIN_MODULE}:{table.get('builtin', str)}"
    else:
        target = table.get("function", str)
        module, _, function = target.partition(":")
        if not module or not function:
            raise table.fail("function", f"is {target!r}", "write it as \"package.module:function\"")
    return Program(target, dict(table.get("options", dict, {})))


def _strings(table: _Table, key: str) -> tuple[str, ...]:
    values = table.get(key, list, [])
    for value in values:
        if not isinstance(value, str):
            raise table.fail(key, f"holds {value!r}", "write a list of strings")
    return tuple(values)


#: The keys of ``[expect]`` that ``[expect.real]`` may override for runs on real processes.
_OUTCOME_KEYS = ("success", "error", "workers", "message", "properties", "violated", "returns", "files", "absent_files")


def _expectation(table: _Table, workers: int, top: bool = True) -> Expectation:
    table.only((*_OUTCOME_KEYS, "after_restart", *(("real",) if top else ())))
    success = table.get("success", bool, fix="write success = true, or success = false with error = \"...\"")
    error = table.get("error", str, None)
    if success == (error is not None):
        raise table.fail("error", "success = false needs an error class and success = true allows none",
                         "name the error class TF would raise (e.g. \"UnavailableError\") with success = false")
    on = tuple(table.get("workers", list, []))
    for index in on:
        if not isinstance(index, int) or not 0 <= index < workers:
            raise table.fail("workers", f"holds {index!r}", f"list worker indices 0..{workers - 1}")
    checked = {}
    for key in ("properties", "violated"):
        checked[key] = _strings(table, key)
        for name in checked[key]:
            if name not in PROPERTIES:
                raise table.fail(key, f"names {name!r}", f"use one of {', '.join(PROPERTIES)}")
    after = table.data.get("after_restart")
    real = None
    if "real" in table.data:
        overrides = table.table("real")
        overrides.only(_OUTCOME_KEYS)
        inherited = {key: value for key, value in table.data.items() if key != "real"}
        if "success" in overrides.data and overrides.data["success"]:
            inherited.pop("error", None)  # a real run that succeeds where the simulated one fails
        real = _expectation(_Table(table.path, overrides.where, inherited | overrides.data), workers)
    return Expectation(success=success, error=error, workers=on, message=_strings(table, "message"),
                       properties=checked["properties"], violated=checked["violated"],
                       returns=dict(table.get("returns", dict, {})), files=_strings(table, "files"),
                       absent_files=_strings(table, "absent_files"), real=real,
                       after_restart=None if after is None else _expectation(table.table("after_restart"), workers, False))
