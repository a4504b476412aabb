"""Random checkpoint cases for fuzz_against_tf.py: variables (mirrored or ON_READ, each aggregation, several dtypes
and shapes) updated per replica and saved under one strategy, then restored (at once or deferred, with the same or
another kind of variable) under another; the result holds every variable's per-replica components and reads.
Specs are JSON (see fuzz_datasets.py). In setup C (``generate_cluster``: the 2-worker MWMS ``"C"`` saves or restores)
the workers share the case's directory: each saves to its own path (the chief the directory, worker i
``workertemp_<i>`` in it, as TF's write_dirpath), and every worker restores from the chief's."""

from __future__ import annotations

import random
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .cases import attempt, components
from .checkpoint_cases import barrier, own

__all__ = ["build", "clean", "generate", "generate_cluster", "shrink"]

Spec = dict[str, Any]
STRATEGIES = ("A", "B", "M1", "default")
CLUSTER_STRATEGIES = ("C", "C", "M1", "default")   # what a worker of setup C can host besides its MWMS
AGGREGATIONS = ("NONE", "SUM", "MEAN", "ONLY_FIRST_REPLICA")
DTYPES = ("float32", "float32", "float64", "int32", "int64")
UPDATES = (None, "assign", "assign_add", "cross_assign")
PREFIX = "fuzzckpt-"
TEMPORARY = re.compile(r"/\S*?" + PREFIX + r"[\w]+")


def _variable(rng: random.Random) -> dict[str, Any]:
    """A random variable: its synchronization, aggregation, dtype, shape and how it is updated before saving."""
    return {"sync": rng.choice(("on_write", "on_read")), "agg": rng.choice(AGGREGATIONS),
            "dtype": rng.choice(DTYPES), "shape": rng.choice(([], [], [2], [2, 3])), "update": rng.choice(UPDATES)}


def _restored(rng: random.Random, saved: dict[str, Any]) -> dict[str, Any]:
    """The variable restored into: mostly the saved kind, sometimes another sync/aggregation (or dtype/shape)."""
    target = {key: saved[key] for key in ("sync", "agg", "dtype", "shape")}
    if rng.random() < 0.4:
        target["sync"] = rng.choice(("on_write", "on_read"))
        target["agg"] = rng.choice(AGGREGATIONS)
    if rng.random() < 0.05:
        target["dtype"] = rng.choice(DTYPES)
    if rng.random() < 0.05:
        target["shape"] = rng.choice(([], [2], [3]))
    return target


def generate(rng: random.Random, strategies: tuple[str, ...] = STRATEGIES) -> Spec:
    """A random checkpoint case, saved and restored under two of ``strategies``."""
    saved = [_variable(rng) for _ in range(rng.randint(1, 3))]
    return {"area": "checkpoint", "save": rng.choice(strategies), "restore": rng.choice(strategies),
            "variables": saved, "targets": [_restored(rng, v) for v in saved],
            "mode": rng.choice(("restore", "restore", "read", "deferred", "manager"))}


def generate_cluster(rng: random.Random) -> Spec:
    """A random checkpoint case of setup C: the 2-worker MWMS saves, restores, or both."""
    spec = generate(rng, CLUSTER_STRATEGIES)
    if "C" not in (spec["save"], spec["restore"]):
        spec[rng.choice(("save", "restore"))] = "C"
    return spec


def shrink(spec: Spec) -> Iterator[Spec]:
    """Fewer variables, no update, plainer strategies and modes."""
    count = len(spec["variables"])
    for i in range(count if count > 1 else 0):
        yield {**spec, "variables": spec["variables"][:i] + spec["variables"][i + 1:],
               "targets": spec["targets"][:i] + spec["targets"][i + 1:]}
    for i, variable in enumerate(spec["variables"]):
        if variable["update"] is not None:
            variables = [dict(v) for v in spec["variables"]]
            variables[i]["update"] = None
            yield {**spec, "variables": variables}
    if spec["mode"] != "restore":
        yield {**spec, "mode": "restore"}


def clean(result: Any) -> Any:
    """A normalized result with the case's temporary directory spelled ``<dir>``."""
    if isinstance(result, dict):
        return {key: clean(v) for key, v in result.items()}
    if isinstance(result, list):
        return [clean(v) for v in result]
    return TEMPORARY.sub("<dir>", result) if isinstance(result, str) else result


def _strategy(api: Any, name: str, cluster: Any) -> Any:
    """The strategy of a spec's setup name (None: the default strategy, no scope; C: ``cluster``, the MWMS the
    worker runs the case in)."""
    return {"A": lambda: api.mirrored(2), "B": api.mwms, "M1": lambda: api.mirrored(1), "default": lambda: None,
            "C": lambda: cluster}[name]()


def _value(shape: list[int], dtype: str, scale: int, offset: int) -> np.ndarray:
    """``arange * scale + offset`` of ``shape``."""
    size = int(np.prod(shape)) if shape else 1
    return (np.arange(size).reshape(shape) * scale + offset).astype(dtype)


def _create(api: Any, s: Any, variable: dict[str, Any], initial: np.ndarray) -> Any:
    """A variable of ``variable``'s kind in ``s``'s scope (outside any scope for the default strategy)."""
    sync = api.VariableSynchronization.ON_READ if variable["sync"] == "on_read" else api.VariableSynchronization.AUTO
    make = lambda: api.Variable(initial, synchronization=sync,  # noqa: E731
                                aggregation=getattr(api.VariableAggregation, variable["agg"]))
    if s is None:
        return make()
    with s.scope():
        return make()


def _update(api: Any, s: Any, var: Any, variable: dict[str, Any]) -> Any:
    """Change ``var`` before saving as the spec says; the error if the update is refused."""
    how, shape, dtype = variable["update"], variable["shape"], variable["dtype"]
    if how is None:
        return None
    if how == "cross_assign" or s is None:
        return attempt(lambda: (var.assign(api.constant(_value(shape, dtype, 3, 5))), None)[1])

    def body() -> None:
        replica = int(api.get_replica_context().replica_id_in_sync_group)
        value = api.constant(_value(shape, dtype, replica + 1, 10 * (replica + 1)))
        getattr(var, how)(value)
    return attempt(lambda: s.run(body))


def _reads(api: Any, s: Any, var: Any) -> dict[str, Any]:
    """The per-replica components of ``var``, its cross-replica read, and what each replica reads."""
    result = {"components": attempt(lambda: components(s or api.get_strategy(), var)),
              "read": attempt(lambda: var.read_value())}
    if s is not None:
        result["replica_reads"] = attempt(lambda: list(s.experimental_local_results(s.run(var.read_value))))
    return result


def _save(api: Any, spec: Spec, directory: Path, cluster: Any) -> tuple[Any, dict[str, Any]]:
    """Create, update and save the spec's variables into ``directory``; the path (or error) and what was seen
    before saving."""
    s = _strategy(api, spec["save"], cluster)
    saved = {}
    before = {}
    for k, variable in enumerate(spec["variables"]):
        saved[f"v{k}"] = _create(api, s, variable, _value(variable["shape"], variable["dtype"], 1, 1))
        before[f"v{k}"] = {"update": _update(api, s, saved[f"v{k}"], variable), **_reads(api, s, saved[f"v{k}"])}
    checkpoint = api.train.Checkpoint(**saved)
    if spec["mode"] == "manager":
        return attempt(lambda: api.train.CheckpointManager(checkpoint, str(directory), max_to_keep=1).save()), before
    return attempt(lambda: checkpoint.save(str(directory / "ckpt"))), before


def _restore(api: Any, spec: Spec, path: str, directory: Path, cluster: Any) -> dict[str, Any]:
    """Restore ``path`` (a manager: the latest in ``directory``) into fresh variables of the spec's targets; their
    reads and the status checks."""
    s = _strategy(api, spec["restore"], cluster)
    targets = spec["targets"]
    result: dict[str, Any] = {}
    variables = {f"v{k}": _create(api, s, t, _value(t["shape"], t["dtype"], 0, 0)) for k, t in enumerate(targets)}
    if spec["mode"] == "deferred":
        checkpoint = api.train.Checkpoint()
        status = attempt(lambda: checkpoint.restore(path))
        for name, var in variables.items():
            result[f"attach_{name}"] = attempt(lambda name=name, var=var: (setattr(checkpoint, name, var), None)[1])
    else:
        checkpoint = api.train.Checkpoint(**variables)
        if spec["mode"] == "manager":
            manager = api.train.CheckpointManager(checkpoint, str(directory), max_to_keep=1)
            status = attempt(lambda: Path(str(manager.restore_or_initialize())).name)
        else:
            status = attempt(lambda: getattr(checkpoint, spec["mode"])(path))
    result["status"] = status if isinstance(status, (BaseException, str)) else {
        check: attempt(lambda check=check: (getattr(status, check)(), "ok")[1])
        for check in ("assert_consumed", "assert_existing_objects_matched")}
    result.update({name: _reads(api, s, var) for name, var in variables.items()})
    return result


def build(spec: Spec, shared: Path | None = None) -> Callable[[Any, Any], dict[str, Any]]:
    """The case function of ``spec``. The spec names its strategies; the one the runner passes is its ``"C"`` (the
    cluster's MWMS). Without ``shared`` the case uses a temporary directory of its own; with it (setup C, a
    directory named ``fuzzckpt-*`` that every worker gets) each worker saves to its own path there and restores,
    after a barrier, from the chief's."""
    def fn(api: Any, cluster: Any) -> dict[str, Any]:
        directory = Path(tempfile.mkdtemp(prefix=PREFIX)) if shared is None else shared
        mine = directory if shared is None else own(directory)
        try:
            path, before = _save(api, spec, mine, cluster)
            if cluster is not None:
                barrier(api, cluster)  # the chief's files are complete
            if isinstance(path, BaseException):
                return {"before": before, "save": path}
            chiefs = directory / Path(str(path)).relative_to(mine)
            return {"before": before, "path": Path(str(path)).name,
                    "restored": _restore(api, spec, str(chiefs), directory, cluster)}
        finally:
            if shared is None:
                shutil.rmtree(directory, ignore_errors=True)
    return fn
