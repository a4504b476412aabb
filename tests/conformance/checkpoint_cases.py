"""Checkpoint conformance cases: ``tf.train.Checkpoint``, ``CheckpointManager`` and the checkpoint readers under
tf.distribute strategies, written once against ``api`` (adapters.py; ``api.train`` is ``tf.train`` or
``mirrorlab.train``).

Every case is ``fn(api, strategy, directory) -> {label: value}``: ``directory`` is the case's own empty directory
(shared by the workers of C, as a shared file system would be). Results are format-independent:

* ``files(directory)``: what is in the directory, relative to it, with a checkpoint's files reduced to their
  prefix (TF's ``<prefix>.index`` + ``<prefix>.data-00000-of-00001``, mirrorlab's ``<prefix>.npz`` +
  ``<prefix>.index.json`` are both ``<prefix>``); the ``checkpoint`` state file keeps its name;
* paths returned by TF/mirrorlab are made relative to ``directory`` (``rel``), and the directory in error
  messages reads ``<dir>`` (``scrub``);
* ``state(directory)``: the ``checkpoint`` state file's lines, timestamps replaced by ``<t>``;
* values, dtypes, shapes and errors as every conformance case (adapters.py).

Setups (golden files ``golden/checkpoints_<setup>.json``, see record_checkpoint_golden.py):

* ``A``: MirroredStrategy over 2 CPUs in one process; the cross-strategy cases (``xs_*``) also use the default
  strategy (no scope) and ``MirroredStrategy`` over 1 CPU in the same process;
* ``B``: MultiWorkerMirroredStrategy without a cluster (1 replica), the same cases as A;
* ``C``: MWMS on 2 workers x 1 CPU (TF: two processes; mirrorlab: ``SimCluster(workers=2)``). Every worker runs
  every case (saving is a collective) and its result is recorded separately. Each worker writes to its own
  directory (``own``: the chief ``directory``, worker i ``directory/workertemp_<i>``, as TF's ``write_dirpath``):
  TF's workers writing one prefix race (``MergeV2Checkpoints`` fails with NotFound, ray-project/ray#27938). A case
  that lists files first enters a collective (``barrier``), so both workers have finished writing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np

from .cases import Case, attempt, components, numpy_dtype, on_read, on_write, per_replica, rid, worker_index

__all__ = ["CHECKPOINT_CASES", "CHECKPOINT_SETUPS", "golden_name", "recorded_checkpoint_cases",
           "run_checkpoint_case", "scrub"]

CHECKPOINT_SETUPS = ("A", "B", "C")
LOCAL = ("A", "B")  # one process: where the cross-strategy cases also create other strategies

Result = dict[str, Any]
DirectoryCaseFn = Callable[[Any, Any, Path], Result]

CHECKPOINT_CASES: dict[str, Case] = {}
_DIRECTORY: ContextVar[Path] = ContextVar("checkpoint_case_directory")


def case(setups: tuple[str, ...] = CHECKPOINT_SETUPS, compare_messages: bool = True) -> Callable[[DirectoryCaseFn],
                                                                                   DirectoryCaseFn]:
    """Register the decorated ``fn(api, strategy, directory)`` as a case named after it (a ``cases.Case`` whose
    function gets the directory ``run_checkpoint_case`` chose)."""
    def register(fn: DirectoryCaseFn) -> DirectoryCaseFn:
        """Add ``fn`` to CHECKPOINT_CASES."""
        def in_directory(api: Any, strategy: Any) -> Result:
            """``fn`` in the directory of the running case."""
            return fn(api, strategy, _DIRECTORY.get())
        CHECKPOINT_CASES[fn.__name__] = Case(fn.__name__, in_directory, setups, compare_messages)
        return fn
    return register


def recorded_checkpoint_cases(setup: str) -> list[str]:
    """Names of the cases of ``setup``, in table order."""
    return [name for name, c in CHECKPOINT_CASES.items() if setup in c.setups]


def golden_name(setup: str) -> str:
    """The golden file stem of ``setup`` (``harness.load_golden``/``save_golden`` take it as the setup)."""
    return f"checkpoints_{setup}"


# -- normalizing ------------------------------------------------------------------------------------------

_CHECKPOINT_FILE = re.compile(r"^(.*?)(\.index|\.data-\d{5}-of-\d{5}|\.npz|\.index\.json)$")
_TIMESTAMP = re.compile(r"^((?:all_model_checkpoint_timestamps|last_preserved_timestamp): ).*$")


def files(directory: Path) -> list[str]:
    """Everything under ``directory`` (relative; folders end in ``/``), a checkpoint's files as its prefix."""
    found = set()
    for path in Path(directory).rglob("*"):
        name = path.relative_to(directory).as_posix()
        if path.is_dir():
            found.add(name + "/")
        elif not path.name.startswith("."):
            match = _CHECKPOINT_FILE.match(name)
            found.add(match.group(1) if match else name)
    return sorted(found)


def state(directory: Path) -> list[str] | None:
    """The lines of ``directory``'s ``checkpoint`` state file (timestamps as ``<t>``), None without one."""
    path = Path(directory) / "checkpoint"
    if not path.is_file():
        return None
    return [_TIMESTAMP.sub(r"\1<t>", line) for line in path.read_text().splitlines()]


def rel(path: Any, directory: Path) -> Any:
    """A returned path relative to ``directory`` (None and anything else unchanged)."""
    if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__"):
        text = path.decode() if isinstance(path, bytes) else str(path)
        return Path(text).relative_to(directory).as_posix() if Path(text).is_absolute() else text
    return path


_VARIABLE_REPR = re.compile(r"<(?:tf|mirrorlab)\.Variable '")
_CHECKPOINT_REPR = re.compile(r"<[\w.]+\.Checkpoint object at 0x[0-9a-f]+>")


def scrub(value: Any, directory: Path) -> Any:
    """``value`` (normalized JSON) with the case directory in strings spelled ``<dir>``, variable reprs in messages
    (``<tf.Variable 'v:0' ...>``, ``<mirrorlab.Variable 'v:0' ...>``) as ``<Variable 'v:0' ...>`` and checkpoint
    reprs (``<tensorflow...Checkpoint object at 0x...>``) as ``<Checkpoint object>``."""
    if isinstance(value, dict):
        return {key: scrub(v, directory) for key, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, directory) for v in value]
    if isinstance(value, str):
        value = _VARIABLE_REPR.sub("<Variable '", value.replace(str(directory), "<dir>"))
        return _CHECKPOINT_REPR.sub("<Checkpoint object>", value)
    return value


def own(directory: Path) -> Path:
    """Where this worker writes: ``directory`` on the chief (and without a cluster), ``directory/workertemp_<i>``
    on worker i > 0, as TF's ``write_dirpath`` (MWMS asks every worker to save to its own path)."""
    index = worker_index()
    return directory if index == 0 else directory / f"workertemp_{index}"


def barrier(api: Any, s: Any) -> None:
    """A collective every worker enters: after it, every worker has finished what it did before."""
    s.reduce(api.ReduceOp.SUM, per_replica(s, lambda i: api.constant(1.0)), axis=None)


def one_variable(api: Any, s: Any) -> Any:
    """A Checkpoint of one float32 variable ``v`` = 1.0, created in ``s``'s scope."""
    with s.scope():
        return api.train.Checkpoint(v=api.Variable(1.0))


def status_checks(status: Any) -> Result:
    """Which of a load status's assertions pass (``"ok"``) or raise (the error)."""
    def check(name: str) -> Any:
        """``"ok"`` if ``status.<name>()`` returns, else the error."""
        return attempt(lambda: (getattr(status, name)(), "ok")[1])
    return {name: check(name) for name in ("assert_consumed", "assert_existing_objects_matched",
                                           "assert_nontrivial_match")}


def no_strategy(api: Any) -> Any:
    """The default strategy (what ``get_strategy()`` returns outside every scope)."""
    return api.get_strategy()


def assign_per_replica(api: Any, s: Any, var: Any, fn: Callable[[int], float]) -> None:
    """In every replica, assign ``fn(global replica id)`` to ``var`` (its local component)."""
    def body() -> None:
        """Assign this replica's value."""
        var.assign(fn(rid(api)))
    s.run(body)


def keys(api: Any, prefix: Any) -> list:
    """``list_variables(prefix)`` as [name, shape] pairs."""
    return [[name, list(shape)] for name, shape in api.train.list_variables(str(prefix))]


# -- Checkpoint.save / write: paths, files, the state file, the save counter ---------------------------------


@case()
def save_paths_and_state_file(api: Any, s: Any, d: Path) -> Result:
    """save twice: the returned prefixes, files, state file, latest checkpoint, counter and keys."""
    ckpt = one_variable(api, s)
    first = ckpt.save(str(own(d) / "ckpt"))
    second = ckpt.save(str(own(d) / "ckpt"))
    barrier(api, s)
    return {"first": rel(first, d), "second": rel(second, d), "files": files(d), "state": state(own(d)),
            "latest": rel(api.train.latest_checkpoint(str(own(d))), d), "counter": ckpt.save_counter,
            "keys": keys(api, second)}


@case()
def save_into_missing_subdirectory(api: Any, s: Any, d: Path) -> Result:
    """save creates missing directories; the state file goes next to the checkpoint."""
    ckpt = one_variable(api, s)
    path = ckpt.save(str(own(d) / "sub" / "deeper" / "ckpt"))
    barrier(api, s)
    return {"path": rel(path, d), "files": files(d), "state": state(own(d) / "sub" / "deeper"),
            "latest_top": api.train.latest_checkpoint(str(own(d))),
            "latest": rel(api.train.latest_checkpoint(str(own(d) / "sub" / "deeper")), d)}


@case()
def write_has_no_counter_and_no_state_file(api: Any, s: Any, d: Path) -> Result:
    """write saves exactly the prefix: no save counter, no state file."""
    with s.scope():
        ckpt = api.train.Checkpoint(v=api.Variable([1.0, 2.0]))
    path = ckpt.write(str(own(d) / "w"))
    barrier(api, s)
    return {"path": rel(path, d), "files": files(d), "keys": keys(api, path),
            "latest": api.train.latest_checkpoint(str(own(d))), "value": api.train.load_variable(
                path, "v/.ATTRIBUTES/VARIABLE_VALUE")}


@case()
def write_then_save_numbering(api: Any, s: Any, d: Path) -> Result:
    """write does not count; save numbers from the counter; a later write saves the counter."""
    ckpt = one_variable(api, s)
    ckpt.write(str(own(d) / "w"))
    saved = ckpt.save(str(own(d) / "s"))
    written = ckpt.write(str(own(d) / "w2"))
    saved2 = ckpt.save(str(own(d) / "s"))
    barrier(api, s)
    return {"saved": rel(saved, d), "written": rel(written, d), "saved2": rel(saved2, d),
            "counter": ckpt.save_counter, "written_keys": keys(api, written), "files": files(d), "state": state(own(d))}


@case()
def save_counter_is_int64_and_restored(api: Any, s: Any, d: Path) -> Result:
    """the save counter: int64, created on access, saved, restored, numbering continues."""
    with s.scope():
        v = api.Variable(1.0)
    ckpt = api.train.Checkpoint(v=v)
    fresh_counter = ckpt.save_counter
    paths = [ckpt.save(str(own(d) / "ckpt")) for _ in range(3)]
    other = api.train.Checkpoint(v=v)
    other.restore(paths[1])
    return {"fresh": fresh_counter, "after": ckpt.save_counter, "restored": other.save_counter,
            "saved": api.train.load_variable(paths[2], "save_counter/.ATTRIBUTES/VARIABLE_VALUE"),
            "next": rel(other.save(str(own(d) / "ckpt")), d)}


@case()
def each_worker_saves_to_a_path_of_its_own(api: Any, s: Any, d: Path) -> Result:
    """every worker saves, writes and manages under its own directory (written as given)."""
    total = on_read(api, s, "SUM")
    assign_per_replica(api, s, total, lambda r: 1.0 + r)
    ckpt = api.train.Checkpoint(total=total)
    mine = d / f"worker{worker_index()}"
    saved = ckpt.save(str(mine / "ckpt"))
    written = ckpt.write(str(mine / "w"))
    manager = api.train.CheckpointManager(ckpt, str(mine / "managed"), max_to_keep=1)
    managed = [manager.save(), manager.save()]
    barrier(api, s)
    return {"saved": rel(saved, d), "written": rel(written, d), "managed": [rel(p, d) for p in managed],
            "files": files(d), "state": state(mine), "latest": rel(api.train.latest_checkpoint(str(mine)), d),
            "value": api.train.load_variable(saved, "total/.ATTRIBUTES/VARIABLE_VALUE")}


@case()
def save_with_pathlike_prefix(api: Any, s: Any, d: Path) -> Result:
    """save and write take os.PathLike prefixes and return str."""
    ckpt = one_variable(api, s)
    saved = ckpt.save(own(d) / "p")
    written = ckpt.write(own(d) / "q")
    barrier(api, s)
    return {"saved_type": type(saved).__name__, "written_type": type(written).__name__,
            "saved": rel(saved, d), "written": rel(written, d), "files": files(d)}


# -- restore / read: values, status objects, deferred restore --------------------------------------------------


@case()
def round_trip_values_and_dtypes(api: Any, s: Any, d: Path) -> Result:
    """values of six dtypes survive save/restore; keys and load_variable agree."""
    values = {"f32": ([1.5, -2.0], "float32"), "f64": (3.25, "float64"), "i32": ([[1, 2], [3, 4]], "int32"),
              "i64": (7, "int64"), "f16": ([0.5], "float16"), "b": ([True, False], "bool")}
    with s.scope():
        saved = {k: api.Variable(api.constant(v, t)) for k, (v, t) in values.items()}
        target = {k: api.Variable(api.constant(np.zeros_like(np.asarray(v)), t)) for k, (v, t) in values.items()}
    path = api.train.Checkpoint(**saved).save(str(own(d) / "ckpt"))
    status = api.train.Checkpoint(**target).restore(path)
    return {"restored": {k: v for k, v in target.items()}, "checks": status_checks(status),
            "keys": keys(api, path),
            "loaded": {k: api.train.load_variable(path, f"{k}/.ATTRIBUTES/VARIABLE_VALUE") for k in values}}


@case()
def read_versus_restore_status(api: Any, s: Any, d: Path) -> Result:
    """read and restore of saved and written checkpoints: values, status type and checks."""
    with s.scope():
        v = api.Variable(5.0)
    saved = api.train.Checkpoint(v=v).save(str(own(d) / "ckpt"))
    written = api.train.Checkpoint(v=v).write(str(own(d) / "w"))
    results = {}
    for label, path in (("saved", saved), ("written", written)):
        for method in ("read", "restore"):
            with s.scope():
                target = api.Variable(0.0)
            status = getattr(api.train.Checkpoint(v=target), method)(path)
            results[f"{label}_{method}"] = {"value": target, "checks": status_checks(status),
                                            "status": type(status).__name__}
    return results


@case(compare_messages=False)
def status_with_missing_and_extra(api: Any, s: Any, d: Path) -> Result:
    """status checks with extra, fewer and unrelated variables (messages hold reprs)."""
    with s.scope():
        a, b = api.Variable(1.0), api.Variable(2.0)
    path = api.train.Checkpoint(a=a, b=b).save(str(own(d) / "ckpt"))
    with s.scope():
        a2, c2 = api.Variable(0.0), api.Variable(0.0)
    extra = api.train.Checkpoint(a=a2, c=c2).restore(path)
    with s.scope():
        only = api.Variable(0.0)
    fewer = api.train.Checkpoint(a=only).restore(path)
    with s.scope():
        none = api.Variable(0.0)
    unrelated = api.train.Checkpoint(z=none).read(path)
    return {"extra": status_checks(extra), "extra_values": [a2, c2], "fewer": status_checks(fewer),
            "fewer_value": only, "unrelated": status_checks(unrelated),
            "expect_partial": type(fewer.expect_partial()).__name__ == type(fewer).__name__}


@case()
def status_messages_without_reprs(api: Any, s: Any, d: Path) -> Result:
    """assert_consumed's message when a saved value is left over."""
    with s.scope():
        a, b = api.Variable(1.0), api.Variable(2.0)
    path = api.train.Checkpoint(a=a, b=b).save(str(own(d) / "ckpt"))
    with s.scope():
        a2 = api.Variable(0.0)
    fewer = api.train.Checkpoint(a=a2).restore(path)
    return {"consumed": attempt(fewer.assert_consumed), "a": a2}


@case()
def restore_none(api: Any, s: Any, d: Path) -> Result:
    """restore(None): the initialization-only status fails every check; nothing changes."""
    with s.scope():
        v = api.Variable(3.0)
    ckpt = api.train.Checkpoint(v=v)
    status = ckpt.restore(None)
    return {"checks": status_checks(status), "value": v, "counter": ckpt.save_counter,
            "status": type(status).__name__,
            "partial": attempt(lambda: (status.expect_partial(), "ok")[1])}


@case()
def restore_none_creates_the_counter(api: Any, s: Any, d: Path) -> Result:
    """restore(None), as after latest_checkpoint of an empty directory, still creates the save counter, so a
    later write saves it and a fresh checkpoint's assert_consumed finds it unresolved; read(None) creates none."""
    out: Result = {}
    for how in ("restore", "read"):
        with s.scope():
            ckpt = api.train.Checkpoint(v=api.Variable(3.0))
        getattr(ckpt, how)(api.train.latest_checkpoint(str(own(d) / "empty")))
        path = ckpt.write(str(own(d) / how))
        with s.scope():
            fresh = api.train.Checkpoint(v=api.Variable(0.0))
        out[how] = {"keys": keys(api, path), "fresh": status_checks(fresh.read(path)), "v": fresh.v}
    return out


@case()
def deferred_restore_of_late_attributes(api: Any, s: Any, d: Path) -> Result:
    """values read before their variables exist restore when they are attached."""
    with s.scope():
        saved = api.train.Checkpoint(v=api.Variable([1.0, 2.0]), w=api.Variable(3, dtype="int64"),
                                     model=api.train.Checkpoint(k=api.Variable(4.0)))
    path = saved.save(str(own(d) / "ckpt"))
    late = api.train.Checkpoint()
    status = late.restore(path)
    before = status_checks(status)
    with s.scope():
        late.v = api.Variable([0.0, 0.0])
        late.model = api.train.Checkpoint(k=api.Variable(0.0))
    middle = status_checks(status)
    with s.scope():
        late.w = api.Variable(0, dtype="int64")
    return {"before": before, "middle": middle, "after": status_checks(status), "v": late.v, "w": late.w,
            "k": late.model.k, "counter": late.save_counter}


@case()
def status_follows_later_attributes(api: Any, s: Any, d: Path) -> Result:
    """status checks see variables attached after the restore (TF's statuses are live)."""
    with s.scope():
        saved = api.train.Checkpoint(v=api.Variable(1.0), w=api.Variable(2.0))
    path = saved.save(str(own(d) / "ckpt"))
    with s.scope():
        late = api.train.Checkpoint(v=api.Variable(0.0))
    status = late.restore(path)
    reports = {"start": status_checks(status)}
    with s.scope():
        late.extra = api.Variable(5.0)
    reports["unrelated_attached"] = status_checks(status)
    with s.scope():
        late.w = api.Variable(0.0)
    reports["all_attached"] = status_checks(status)
    return {"reports": reports, "w": late.w, "extra": late.extra}


@case()
def deferred_restore_into_nested_checkpoints(api: Any, s: Any, d: Path) -> Result:
    """restore-on-create through nested Checkpoints attached before the restore."""
    with s.scope():
        saved = api.train.Checkpoint(inner=api.train.Checkpoint(w=api.Variable(7.0), deeper=api.train.Checkpoint(
            u=api.Variable([1.0, 2.0]))))
    path = saved.save(str(own(d) / "ckpt"))
    late = api.train.Checkpoint()
    late.inner = api.train.Checkpoint()
    status = late.restore(path)
    before = status_checks(status)
    with s.scope():
        late.inner.w = api.Variable(0.0)
        late.inner.deeper = api.train.Checkpoint()
        late.inner.deeper.u = api.Variable([0.0, 0.0])
    return {"before": before, "after": status_checks(status), "w": components(s, late.inner.w),
            "u": components(s, late.inner.deeper.u)}


@case()
def deferred_restore_with_wrong_shape(api: Any, s: Any, d: Path) -> Result:
    """attaching a variable of another shape to a pending value raises TF's error."""
    with s.scope():
        saved = api.train.Checkpoint(v=api.Variable([1.0, 2.0]))
    path = saved.save(str(own(d) / "ckpt"))
    late = api.train.Checkpoint()
    late.restore(path)

    def attach() -> Any:
        """Attach a variable of another shape."""
        with s.scope():
            late.v = api.Variable([0.0, 0.0, 0.0])
        return late.v
    return {"attach": attempt(attach)}


@case()
def restore_overwrites_later_changes(api: Any, s: Any, d: Path) -> Result:
    """restoring an older checkpoint, then a newer one, sets every component."""
    with s.scope():
        v = api.Variable([1.0, 2.0])
    ckpt = api.train.Checkpoint(v=v)
    first = ckpt.save(str(own(d) / "ckpt"))
    v.assign([5.0, 6.0])
    second = ckpt.save(str(own(d) / "ckpt"))
    v.assign([9.0, 9.0])
    ckpt.restore(first)
    after_first = components(s, v)
    ckpt.restore(second)
    return {"after_first": after_first, "after_second": components(s, v), "counter": ckpt.save_counter}


@case()
def checkpoint_attributes_and_nesting(api: Any, s: Any, d: Path) -> Result:
    """kwargs are attributes; a nested Checkpoint saves under its name and alone."""
    with s.scope():
        v, w = api.Variable(1.0), api.Variable(2.0)
    inner = api.train.Checkpoint(w=w)
    ckpt = api.train.Checkpoint(v=v, inner=inner)
    path = ckpt.save(str(own(d) / "ckpt"))
    inner_path = inner.save(str(own(d) / "inner"))
    return {"same_v": ckpt.v is v, "same_inner": ckpt.inner is inner, "keys": keys(api, path),
            "inner_keys": keys(api, inner_path), "missing": attempt(lambda: ckpt.nothing)}


@case()
def root_object_children_come_first(api: Any, s: Any, d: Path) -> Result:
    """Checkpoint(root=...) saves root's children at the top, in insertion order."""
    with s.scope():
        holder = api.train.Checkpoint()
        holder.zz, holder.aa = api.Variable(1.0), api.Variable(2.0)
        holder.table = {"b": api.Variable(3.0), "a": api.Variable(4.0)}
        extra = api.Variable(5.0)
    ckpt = api.train.Checkpoint(root=holder, extra=extra)
    path = ckpt.save(str(own(d) / "ckpt"))
    late = api.train.Checkpoint()
    status = late.restore(path)
    return {"keys": keys(api, path), "root_is_holder": ckpt.root is holder, "extra": ckpt.extra,
            "first_unresolved": attempt(status.assert_consumed)}


@case()
def unresolved_objects_in_saving_order(api: Any, s: Any, d: Path) -> Result:
    """assert_consumed names the first unresolved value in TF's breadth-first order."""
    with s.scope():
        ckpt = api.train.Checkpoint(m=api.Variable(1.0))
    ckpt.save(str(own(d) / "ckpt"))
    with s.scope():
        ckpt.b = api.Variable(2.0)
        ckpt.a = api.train.Checkpoint(z=api.Variable(3.0), y=api.Variable(4.0))
    path = ckpt.save(str(own(d) / "ckpt"))
    late = api.train.Checkpoint()
    status = late.restore(path)
    reports = [attempt(status.assert_consumed)]
    with s.scope():
        late.m = api.Variable(0.0)
        reports.append(attempt(status.assert_consumed))
        late.b = api.Variable(0.0)
        reports.append(attempt(status.assert_consumed))
    return {"reports": reports, "keys": keys(api, path)}


@case()
def shared_variable_takes_its_first_path(api: Any, s: Any, d: Path) -> Result:
    """a variable reachable under several names is saved under its first path."""
    with s.scope():
        v = api.Variable(3.0)
    ckpt = api.train.Checkpoint(b=api.train.Checkpoint(z=v), a=api.train.Checkpoint(y=v))
    ckpt.c = v
    return {"keys": keys(api, ckpt.save(str(own(d) / "ckpt")))}


@case()
def plain_attributes_are_kept_but_not_saved(api: Any, s: Any, d: Path) -> Result:
    """numbers and strings assigned to a Checkpoint are attributes, not saved."""
    ckpt = one_variable(api, s)
    ckpt.x = 3
    ckpt.name = "run"
    with s.scope():
        ckpt.w = api.Variable(2.0)
    ckpt.w = 7
    path = ckpt.save(str(own(d) / "ckpt"))
    return {"x": ckpt.x, "name": ckpt.name, "w": ckpt.w, "keys": keys(api, path)}


@case()
def root_and_lists_and_dicts(api: Any, s: Any, d: Path) -> Result:
    """keys of lists and dicts inside a root object."""
    with s.scope():
        a, b, c = api.Variable(1.0), api.Variable(2.0), api.Variable(3.0)
    holder = api.train.Checkpoint(items=[a, b], table={"x": c})
    path = api.train.Checkpoint(root=holder).save(str(own(d) / "ckpt"))
    return {"keys": keys(api, path)}


# -- distributed variables ----------------------------------------------------------------------------------


@case()
def on_read_saves_aggregate_and_restore_splits(api: Any, s: Any, d: Path) -> Result:
    """ON_READ SUM/MEAN/ONLY_FIRST_REPLICA: saved aggregated, SUM restored over N."""
    total, mean = on_read(api, s, "SUM"), on_read(api, s, "MEAN")
    first = on_read(api, s, "ONLY_FIRST_REPLICA")
    assign_per_replica(api, s, total, lambda r: 4.0 + r)
    assign_per_replica(api, s, mean, lambda r: 1.0 + r)
    assign_per_replica(api, s, first, lambda r: 10.0 * (r + 1))
    path = api.train.Checkpoint(total=total, mean=mean, first=first).save(str(own(d) / "ckpt"))
    saved = {k: api.train.load_variable(path, f"{k}/.ATTRIBUTES/VARIABLE_VALUE") for k in ("total", "mean", "first")}
    aggregations = {"total": "SUM", "mean": "MEAN", "first": "ONLY_FIRST_REPLICA"}
    fresh = {k: on_read(api, s, agg) for k, agg in aggregations.items()}
    status = api.train.Checkpoint(**fresh).restore(path)
    return {"saved": saved, "components": {k: components(s, v) for k, v in fresh.items()},
            "reads": {k: v.read_value() for k, v in fresh.items() if k != "first"}, "checks": status_checks(status)}


@case()
def on_read_none_aggregation_save(api: Any, s: Any, d: Path) -> Result:
    """saving an ON_READ variable with aggregation NONE raises TF's ValueError."""
    var = on_read(api, s, "NONE")
    assign_per_replica(api, s, var, lambda r: 1.0 + r)
    return {"save": attempt(lambda: rel(api.train.Checkpoint(v=var).save(str(own(d) / "ckpt")), d))}


@case()
def mirrored_variable_save_restore(api: Any, s: Any, d: Path) -> Result:
    """MirroredVariables save the primary value and restore it to every component."""
    v = on_write(api, s, "NONE", [1.0, 2.0])
    m = on_write(api, s, "MEAN", 0.0)
    s.run(lambda: m.assign_add(api.constant(1.0) + api.cast(rid(api), "float32")))
    path = api.train.Checkpoint(v=v, m=m).save(str(own(d) / "ckpt"))
    v2, m2 = on_write(api, s, "NONE", [0.0, 0.0]), on_write(api, s, "MEAN", 0.0)
    status = api.train.Checkpoint(v=v2, m=m2).restore(path)
    return {"saved_v": api.train.load_variable(path, "v/.ATTRIBUTES/VARIABLE_VALUE"),
            "saved_m": api.train.load_variable(path, "m/.ATTRIBUTES/VARIABLE_VALUE"),
            "v": components(s, v2), "m": components(s, m2), "checks": status_checks(status),
            "kind": type(v2).__name__}


@case()
def diverged_mirrored_variable_saves_the_first_copy(api: Any, s: Any, d: Path) -> Result:
    """a diverged NONE MirroredVariable saves the first local copy."""
    v = on_write(api, s, "NONE", 0.0)
    assign_per_replica(api, s, v, lambda r: 1.0 + r)
    before = components(s, v)
    path = api.train.Checkpoint(v=v).save(str(own(d) / "ckpt"))
    return {"before": before, "saved": api.train.load_variable(path, "v/.ATTRIBUTES/VARIABLE_VALUE")}


@case()
def manager_with_distributed_variables(api: Any, s: Any, d: Path) -> Result:
    """a manager saving distributed variables; a new manager restores the newest."""
    total = on_read(api, s, "SUM")
    w = on_write(api, s, "NONE", [0.0, 0.0])
    ckpt = api.train.Checkpoint(total=total, w=w)
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=2)
    returned = []
    for step in range(3):
        assign_per_replica(api, s, total, lambda r, step=step: float(step + r))
        w.assign([float(step), float(step + 1)])
        returned.append(rel(manager.save(), d))
    barrier(api, s)
    fresh = api.train.Checkpoint(total=on_read(api, s, "SUM"), w=on_write(api, s, "NONE", [0.0, 0.0]))
    again = api.train.CheckpointManager(fresh, str(own(d)), max_to_keep=2)
    restored = rel(again.restore_or_initialize(), d)
    return {"returned": returned, "files": files(d), "state": state(own(d)), "restored": restored,
            "total": components(s, fresh.total), "w": components(s, fresh.w), "counter": fresh.save_counter,
            "checkpoints": [rel(p, d) for p in again.checkpoints]}


# -- saving under one strategy, restoring under another ---------------------------------------------------


def _xs_save(api: Any, strategy: Any, d: Path, name: str) -> str:
    """Save an ON_READ SUM (10 in total), an ON_READ MEAN (1.5) and a mirrored [1, 2] under ``strategy`` (own dir)."""
    total, mean = on_read(api, strategy, "SUM"), on_read(api, strategy, "MEAN")
    w = on_write(api, strategy, "NONE", [1.0, 2.0])
    total.assign(10.0)
    mean.assign(1.5)
    return api.train.Checkpoint(total=total, mean=mean, w=w).save(str(own(d) / name))


def _xs_restore(api: Any, strategy: Any, path: str) -> Result:
    """Restore ``_xs_save``'s checkpoint under ``strategy``: the components and reads of each variable."""
    total, mean = on_read(api, strategy, "SUM"), on_read(api, strategy, "MEAN")
    w = on_write(api, strategy, "NONE", [0.0, 0.0])
    status = api.train.Checkpoint(total=total, mean=mean, w=w).restore(path)
    return {"total": components(strategy, total), "total_read": total.read_value(),
            "mean": components(strategy, mean), "w": components(strategy, w), "checks": status_checks(status)}


@case(setups=LOCAL)
def xs_default_to_mirrored2(api: Any, s: Any, d: Path) -> Result:
    """saved without a strategy, restored over 2 replicas (SUM split in halves)."""
    path = _xs_save(api, no_strategy(api), d, "ckpt")
    return {"keys": keys(api, path), "restored": _xs_restore(api, s, path)}


@case(setups=LOCAL)
def xs_mirrored2_to_default(api: Any, s: Any, d: Path) -> Result:
    """saved over 2 replicas, restored without a strategy."""
    path = _xs_save(api, s, d, "ckpt")
    return {"keys": keys(api, path), "restored": _xs_restore(api, no_strategy(api), path)}


@case(setups=LOCAL)
def xs_mirrored2_to_mirrored1(api: Any, s: Any, d: Path) -> Result:
    """saved over 2 replicas, restored over 1."""
    path = _xs_save(api, s, d, "ckpt")
    return {"restored": _xs_restore(api, api.mirrored(1), path)}


@case(setups=LOCAL)
def xs_mirrored1_to_mirrored2(api: Any, s: Any, d: Path) -> Result:
    """saved over 1 replica, restored over 2."""
    path = _xs_save(api, api.mirrored(1), d, "ckpt")
    return {"restored": _xs_restore(api, s, path)}


@case(setups=("C",))
def xs_mwms_to_default(api: Any, s: Any, d: Path) -> Result:
    """saved under a 2-worker MWMS, restored without a strategy on each worker."""
    path = _xs_save(api, s, d, "ckpt")
    barrier(api, s)
    return {"path": rel(path, d), "restored": _xs_restore(api, no_strategy(api), path)}


@case(setups=("C",))
def xs_default_to_mwms(api: Any, s: Any, d: Path) -> Result:
    """saved without a strategy, restored under a 2-worker MWMS."""
    path = _xs_save(api, no_strategy(api), d, "ckpt")
    return {"path": rel(path, d), "restored": _xs_restore(api, s, path)}


@case()
def xs_deferred_on_read_restores_split(api: Any, s: Any, d: Path) -> Result:
    """ON_READ variables attached after the restore get SUM split over N."""
    path = _xs_save(api, no_strategy(api), d, "ckpt")
    late = api.train.Checkpoint()
    status = late.restore(path)
    late.total = on_read(api, s, "SUM")
    late.mean = on_read(api, s, "MEAN")
    return {"total": components(s, late.total), "mean": components(s, late.mean), "checks": status_checks(status)}


@case()
def xs_int_on_read_sum_restores_divided(api: Any, s: Any, d: Path) -> Result:
    """integer ON_READ SUM values restored over N replicas."""
    results = {}
    for saved in (10, 5, -3):
        path = api.train.Checkpoint(n=api.Variable(saved, dtype="int32")).write(str(own(d) / f"n{saved}"))
        target = on_read(api, s, "SUM", api.constant(0, "int32"))
        results[str(saved)] = {"restore": attempt(lambda: (api.train.Checkpoint(n=target).read(path), "ok")[1]),
                               "components": components(s, target)}
    return results


@case()
def deferred_restore_with_wrong_dtype(api: Any, s: Any, d: Path) -> Result:
    """attaching a variable of another dtype to a pending value raises TF's error."""
    path = one_variable(api, s).save(str(own(d) / "ckpt"))
    late = api.train.Checkpoint()
    late.restore(path)

    def attach() -> Any:
        """Attach an int64 variable where a float32 was saved."""
        with s.scope():
            late.v = api.Variable(0, dtype="int64")
        return late.v
    return {"attach": attempt(attach)}


@case()
def restore_with_wrong_shape(api: Any, s: Any, d: Path) -> Result:
    """restoring into a variable of another shape: a plain variable raises TF's restore error naming both shapes, a
    distributed one its assign error; the variables saved before it are restored, those after it are not."""
    path = api.train.Checkpoint(a=api.Variable(1.0), b=api.Variable([1.0, 2.0]), c=api.Variable(3.0)).save(
        str(own(d) / "ckpt"))

    def restore(variables: dict[str, Any]) -> Result:
        """Restore ``path`` into ``variables``: the error, then every variable's components."""
        error = attempt(lambda: api.train.Checkpoint(**variables).restore(path))
        return {"error": error, "values": {k: components(s, v) for k, v in variables.items()}}

    with s.scope():
        distributed = {"a": api.Variable(0.0), "b": api.Variable([0.0, 0.0, 0.0]), "c": api.Variable(0.0)}
    return {"plain": restore({"a": api.Variable(0.0), "b": api.Variable([0.0, 0.0, 0.0], name="w"),
                              "c": api.Variable(0.0)}),
            "read_plain": attempt(lambda: api.train.Checkpoint(b=api.Variable([0.0])).read(path)),
            "distributed": restore(distributed)}


@case()
def status_after_failed_deferred_restores(api: Any, s: Any, d: Path) -> Result:
    """a variable attached after a restore whose value has another shape or dtype raises, but counts as matched
    (its saved value is used up) in the status checks, as TF's."""
    path = api.train.Checkpoint(v=api.Variable([1.0, 2.0]), n=api.Variable(1)).save(str(own(d) / "ckpt"))
    late = api.train.Checkpoint()
    status = late.restore(path)

    def attach(name: str, make: Callable[[], Any], scoped: bool) -> Any:
        """Attach ``make()`` as ``late.<name>`` (created in the strategy's scope if ``scoped``)."""
        if scoped:
            with s.scope():
                setattr(late, name, make())
        else:
            setattr(late, name, make())
        return "ok"
    return {"v_plain": attempt(lambda: attach("v", lambda: api.Variable([0.0, 0.0, 0.0]), False)),
            "n_distributed": attempt(lambda: attach("n", lambda: api.Variable(0, dtype="int64"), True)),
            "checks": status_checks(status)}


@case()
def collections_as_checkpoint_arguments(api: Any, s: Any, d: Path) -> Result:
    """lists, dicts and tuples as arguments; shared variables; non-string keys."""
    with s.scope():
        a, b, c, e = api.Variable(1.0), api.Variable(2.0), api.Variable(3.0), api.Variable(4.0)
    ckpt = api.train.Checkpoint(items=[a, b], table={"z": c, "y": e}, pair=(a, c))
    path = ckpt.save(str(own(d) / "ckpt"))
    with s.scope():
        a2, b2, c2, e2 = api.Variable(0.0), api.Variable(0.0), api.Variable(0.0), api.Variable(0.0)
    status = api.train.Checkpoint(items=[a2, b2], table={"z": c2, "y": e2}).restore(path)
    return {"keys": keys(api, path), "values": [a2, b2, c2, e2], "checks": status_checks(status),
            "int_keys": attempt(lambda: keys(api, api.train.Checkpoint(t={1: a}).save(str(own(d) / "int"))))}


@case()
def checkpoint_save_after_a_manager(api: Any, s: Any, d: Path) -> Result:
    """Checkpoint.save rewrites a manager's state file; the next manager adopts nothing."""
    ckpt = one_variable(api, s)
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=3)
    manager.save()
    manager.save()
    path = ckpt.save(str(own(d) / "ckpt"))
    barrier(api, s)
    after = state(own(d))
    again = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=1)
    taken = [rel(p, d) for p in again.checkpoints]
    saved = rel(again.save(), d)
    barrier(api, s)
    return {"path": rel(path, d), "after": after, "taken": taken, "saved": saved, "files": files(d),
            "state": state(own(d))}


@case()
def xs_between_on_read_and_on_write(api: Any, s: Any, d: Path) -> Result:
    """values move between ON_READ and ON_WRITE variables."""
    total = on_read(api, s, "SUM")
    assign_per_replica(api, s, total, lambda r: 3.0 + r)
    mirrored = on_write(api, s, "MEAN", 6.0)
    path = api.train.Checkpoint(a=total, b=mirrored).save(str(own(d) / "ckpt"))
    into_write, into_read = on_write(api, s, "SUM", 0.0), on_read(api, s, "SUM")
    only_first = on_read(api, s, "ONLY_FIRST_REPLICA")
    api.train.Checkpoint(a=into_write, b=into_read).restore(path)
    api.train.Checkpoint(b=only_first).restore(path)
    return {"into_write": components(s, into_write), "into_read": components(s, into_read),
            "only_first": components(s, only_first)}


@case()
def more_dtypes_round_trip(api: Any, s: Any, d: Path) -> Result:
    """int8 ... uint64 and complex variables round trip."""
    names = ("int8", "uint8", "int16", "uint16", "uint32", "uint64", "complex64", "complex128")
    with s.scope():
        ckpt = api.train.Checkpoint(**{n: api.Variable(api.constant([1, 2], n)) for n in names})
    path = ckpt.write(str(own(d) / "w"))
    loaded = {n: api.train.load_variable(path, f"{n}/.ATTRIBUTES/VARIABLE_VALUE") for n in names}
    return {n: [v.dtype.name, v.real] if n.startswith("complex") else v for n, v in loaded.items()}  # JSON: no complex


@case()
def empty_checkpoint(api: Any, s: Any, d: Path) -> Result:
    """a Checkpoint with nothing to save: keys and status checks."""
    ckpt = api.train.Checkpoint()
    saved = ckpt.save(str(own(d) / "ckpt"))
    written = api.train.Checkpoint().write(str(own(d) / "w"))
    status = api.train.Checkpoint().restore(saved)
    return {"saved": keys(api, saved), "written": keys(api, written), "checks": status_checks(status),
            "read_written": status_checks(api.train.Checkpoint().read(written))}


@case(setups=LOCAL)
def xs_plain_variable_into_on_read_of_other_dtype(api: Any, s: Any, d: Path) -> Result:
    """restoring an int32 value into a float32 ON_READ variable fails first."""
    path = api.train.Checkpoint(total=api.Variable(4, dtype="int32")).save(str(own(d) / "ckpt"))
    target = on_read(api, s, "SUM")
    return {"restore": attempt(lambda: api.train.Checkpoint(total=target).restore(path)),
            "components": components(s, target)}


# -- CheckpointManager --------------------------------------------------------------------------------------


@case()
def manager_keeps_the_newest(api: Any, s: Any, d: Path) -> Result:
    """max_to_keep=2 over 4 saves: paths, files, state file, latest."""
    with s.scope():
        v = api.Variable(0.0)
    manager = api.train.CheckpointManager(api.train.Checkpoint(v=v), str(own(d)), max_to_keep=2)
    before = {"latest": manager.latest_checkpoint, "checkpoints": manager.checkpoints}
    returned = []
    for step in range(4):
        v.assign(float(step))
        returned.append(rel(manager.save(), d))
    barrier(api, s)
    return {"before": before, "returned": returned, "checkpoints": [rel(p, d) for p in manager.checkpoints],
            "latest": rel(manager.latest_checkpoint, d), "files": files(d), "state": state(own(d)),
            "tf_latest": rel(api.train.latest_checkpoint(str(own(d))), d), "directory": rel(manager.directory, d)}


@case()
def manager_name_number_and_unlimited(api: Any, s: Any, d: Path) -> Result:
    """checkpoint_name, checkpoint_number (int or variable) and max_to_keep=None."""
    with s.scope():
        v = api.Variable(0.0)
    ckpt = api.train.Checkpoint(v=v)
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=None, checkpoint_name="model")
    returned = [rel(manager.save(), d), rel(manager.save(checkpoint_number=10), d),
                rel(manager.save(checkpoint_number=api.Variable(20, dtype="int64")), d), rel(manager.save(), d)]
    barrier(api, s)
    return {"returned": returned, "checkpoints": [rel(p, d) for p in manager.checkpoints], "files": files(d),
            "state": state(own(d)), "counter": ckpt.save_counter}


@case()
def manager_takes_over_an_existing_directory(api: Any, s: Any, d: Path) -> Result:
    """a new manager adopts and rotates an earlier manager's checkpoints."""
    with s.scope():
        v = api.Variable(0.0)
    ckpt = api.train.Checkpoint(v=v)
    first = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=3)
    for _ in range(3):
        first.save()
    barrier(api, s)
    second = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=1)
    taken = {"checkpoints": [rel(p, d) for p in second.checkpoints], "latest": rel(second.latest_checkpoint, d)}
    saved = rel(second.save(), d)
    barrier(api, s)
    return {"taken": taken, "saved": saved, "files": files(d), "state": state(own(d)),
            "after": [rel(p, d) for p in second.checkpoints]}


@case()
def manager_does_not_adopt_checkpoint_save(api: Any, s: Any, d: Path) -> Result:
    """a manager never adopts (or deletes) what Checkpoint.save wrote."""
    with s.scope():
        v = api.Variable(0.0)
    ckpt = api.train.Checkpoint(v=v)
    for _ in range(2):
        ckpt.save(str(own(d) / "ckpt"))
    barrier(api, s)
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=1)
    taken = {"checkpoints": [rel(p, d) for p in manager.checkpoints], "latest": rel(manager.latest_checkpoint, d)}
    saved = [rel(manager.save(), d), rel(manager.save(), d)]
    barrier(api, s)
    return {"taken": taken, "saved": saved, "files": files(d), "state": state(own(d))}


@case()
def manager_step_counter_and_interval(api: Any, s: Any, d: Path) -> Result:
    """checkpoint_interval with a step counter; check_interval=False."""
    with s.scope():
        v = api.Variable(0.0)
    step = api.Variable(0, dtype="int64")
    manager = api.train.CheckpointManager(api.train.Checkpoint(v=v), str(own(d)), max_to_keep=None,
                                          step_counter=step, checkpoint_interval=3)
    returned = []
    for n in range(8):
        step.assign(n)
        returned.append(rel(manager.save(), d))
    step.assign(8)
    forced = rel(manager.save(check_interval=False), d)
    again = rel(manager.save(check_interval=False), d)
    barrier(api, s)
    return {"returned": returned, "forced": forced, "again": again, "files": files(d),
            "interval": manager.checkpoint_interval}


@case()
def manager_step_counter_names_checkpoints(api: Any, s: Any, d: Path) -> Result:
    """a step counter alone does not number checkpoints."""
    with s.scope():
        v = api.Variable(0.0)
    step = api.Variable(0, dtype="int64")
    manager = api.train.CheckpointManager(api.train.Checkpoint(v=v), str(own(d)), max_to_keep=5, step_counter=step)
    returned = []
    for n in (5, 7, 7):
        step.assign(n)
        returned.append(rel(manager.save(), d))
    barrier(api, s)
    return {"returned": returned, "files": files(d)}


@case()
def manager_restore_or_initialize(api: Any, s: Any, d: Path) -> Result:
    """restore_or_initialize: init_fn without a checkpoint, restore with one."""
    calls = []
    with s.scope():
        v = api.Variable(1.0)
    manager = api.train.CheckpointManager(api.train.Checkpoint(v=v), str(own(d)), max_to_keep=1,
                                          init_fn=lambda: calls.append("init"))
    empty = manager.restore_or_initialize()
    v.assign(2.0)
    manager.save()
    barrier(api, s)
    with s.scope():
        w = api.Variable(0.0)
    other = api.train.CheckpointManager(api.train.Checkpoint(v=w), str(own(d)), max_to_keep=1,
                                        init_fn=lambda: calls.append("other init"))
    restored = rel(other.restore_or_initialize(), d)
    plain = api.train.CheckpointManager(api.train.Checkpoint(v=api.Variable(0.0)), str(own(d) / "none"), max_to_keep=1)
    return {"empty": empty, "restored": restored, "value": w, "calls": list(calls),
            "plain": plain.restore_or_initialize()}


@case()
def manager_keep_every_n_hours_keeps_recent(api: Any, s: Any, d: Path) -> Result:
    """keep_checkpoint_every_n_hours longer than the run keeps nothing extra."""
    with s.scope():
        v = api.Variable(0.0)
    manager = api.train.CheckpointManager(api.train.Checkpoint(v=v), str(own(d)), max_to_keep=1,
                                          keep_checkpoint_every_n_hours=1000.0)
    returned = [rel(manager.save(), d) for _ in range(3)]
    barrier(api, s)
    return {"returned": returned, "files": files(d), "state": state(own(d)),
            "checkpoints": [rel(p, d) for p in manager.checkpoints]}


@case()
def manager_argument_errors(api: Any, s: Any, d: Path) -> Result:
    """TF's ValueErrors for max_to_keep and checkpoint_interval without step_counter."""
    ckpt = api.train.Checkpoint(v=api.Variable(0.0))
    return {
        "zero": attempt(lambda: api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=0)),
        "negative": attempt(lambda: api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=-1)),
        "interval_without_step": attempt(lambda: api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=1,
                                                                             checkpoint_interval=2)),
        "files": files(d),
    }


# -- latest_checkpoint, list_variables, load_variable ----------------------------------------------------


@case()
def readers_by_directory_and_prefix(api: Any, s: Any, d: Path) -> Result:
    """list_variables and load_variable by directory or prefix, :0 suffix, bad keys."""
    with s.scope():
        ckpt = api.train.Checkpoint(v=api.Variable([[1.0, 2.0, 3.0]]), n=api.Variable(4, dtype="int64"))
    path = ckpt.save(str(own(d) / "ckpt"))
    barrier(api, s)
    load = api.train.load_variable
    return {"keys_dir": keys(api, d), "keys_prefix": keys(api, path),
            "by_dir": load(str(own(d)), "v/.ATTRIBUTES/VARIABLE_VALUE"),
            "with_colon": attempt(lambda: load(path, "v/.ATTRIBUTES/VARIABLE_VALUE:0")),
            "n": load(path, "n/.ATTRIBUTES/VARIABLE_VALUE"),
            "bare": attempt(lambda: load(path, "v")), "missing": attempt(lambda: load(path, "nope")),
            "graph_type": type(load(path, "_CHECKPOINTABLE_OBJECT_GRAPH")).__name__}


@case()
def readers_errors(api: Any, s: Any, d: Path) -> Result:
    """latest_checkpoint, list_variables and load_variable where nothing was saved."""
    (own(d) / "empty").mkdir(parents=True, exist_ok=True)
    return {"latest_missing_dir": api.train.latest_checkpoint(str(own(d) / "nothing")),
            "latest_empty": api.train.latest_checkpoint(str(own(d) / "empty")),
            "list_empty": attempt(lambda: api.train.list_variables(str(own(d) / "empty"))),
            "list_missing": attempt(lambda: api.train.list_variables(str(own(d) / "nothing" / "ckpt-1"))),
            "load_missing": attempt(lambda: api.train.load_variable(str(own(d) / "nothing" / "ckpt-1"), "v"))}


@case()
def latest_checkpoint_after_deleting_files(api: Any, s: Any, d: Path) -> Result:
    """latest_checkpoint is None once its files are gone."""
    ckpt = one_variable(api, s)
    ckpt.save(str(own(d) / "ckpt"))
    path = ckpt.save(str(own(d) / "ckpt"))
    barrier(api, s)
    before = rel(api.train.latest_checkpoint(str(own(d))), d)
    barrier(api, s)
    for file in own(d).iterdir():
        if file.name.startswith("ckpt-2."):
            file.unlink()
    barrier(api, s)
    return {"before": before, "after": rel(api.train.latest_checkpoint(str(own(d))), d), "path": rel(path, d)}


@case()
def latest_checkpoint_with_custom_state_file(api: Any, s: Any, d: Path) -> Result:
    """a hand-written state file, and latest_filename."""
    ckpt = one_variable(api, s)
    path = ckpt.write(str(own(d) / "custom"))
    barrier(api, s)
    (own(d) / "checkpoint").write_text('model_checkpoint_path: "custom"\n')
    barrier(api, s)
    return {"latest": rel(api.train.latest_checkpoint(str(own(d))), d), "path": rel(path, d),
            "custom_name": api.train.latest_checkpoint(str(own(d)), "other_state")}


@case()
def checkpoint_reader(api: Any, s: Any, d: Path) -> Result:
    """load_checkpoint's CheckpointReader: shape/dtype maps, has_tensor, get_tensor."""
    with s.scope():
        ckpt = api.train.Checkpoint(v=api.Variable([[1.0, 2.0]]), n=api.Variable(3, dtype="int64"))
    path = ckpt.save(str(own(d) / "ckpt"))
    reader = api.train.load_checkpoint(str(own(d)))
    graph = "_CHECKPOINTABLE_OBJECT_GRAPH"
    v_key, n_key = "v/.ATTRIBUTES/VARIABLE_VALUE", "n/.ATTRIBUTES/VARIABLE_VALUE"
    return {"type": type(reader).__name__,
            "shapes": {k: list(v) for k, v in reader.get_variable_to_shape_map().items()},
            "dtypes": {k: v.name for k, v in reader.get_variable_to_dtype_map().items() if k != graph},
            "has": [reader.has_tensor(v_key), reader.has_tensor("v"), reader.has_tensor(graph)],
            "n": reader.get_tensor(n_key), "v": reader.get_tensor(v_key),
            "missing": attempt(lambda: reader.get_tensor("nope")),
            "colon": attempt(lambda: reader.get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE:0")),
            "by_prefix": type(api.train.load_checkpoint(path)).__name__,
            "empty_dir": attempt(lambda: api.train.load_checkpoint(str(own(d) / "nothing")))}


@case()
def checkpoint_state_records(api: Any, s: Any, d: Path) -> Result:
    """get_checkpoint_state after saves and a manager; invalid and unparsable state files."""
    ckpt = one_variable(api, s)
    ckpt.save(str(own(d) / "saves" / "ckpt"))
    ckpt.save(str(own(d) / "saves" / "ckpt"))
    manager = api.train.CheckpointManager(ckpt, str(own(d) / "managed"), max_to_keep=2)
    for _ in range(3):
        manager.save()
    barrier(api, s)

    def fields(directory: Path) -> Any:
        """The state's fields, paths relative to the case directory and timestamps counted."""
        found = api.train.get_checkpoint_state(str(directory))
        return None if found is None else {
            "type": type(found).__name__, "latest": rel(found.model_checkpoint_path, d),
            "all": [rel(p, d) for p in found.all_model_checkpoint_paths],
            "timestamps": len(found.all_model_checkpoint_timestamps),
            "preserved_set": float(found.last_preserved_timestamp) > 0}
    (own(d) / "empty_state").mkdir(parents=True, exist_ok=True)
    (own(d) / "empty_state" / "checkpoint").write_text('all_model_checkpoint_paths: "x"\n')
    (own(d) / "garbage").mkdir(parents=True, exist_ok=True)
    (own(d) / "garbage" / "checkpoint").write_text("this is { not a proto\n")
    return {"saves": fields(own(d) / "saves"), "managed": fields(own(d) / "managed"),
            "missing": fields(own(d) / "nothing"), "empty": attempt(lambda: fields(own(d) / "empty_state")),
            "garbage": attempt(lambda: fields(own(d) / "garbage")),
            "latest_garbage": attempt(lambda: api.train.latest_checkpoint(str(own(d) / "garbage")))}


@case()
def checkpoints_iterator_yields_the_latest(api: Any, s: Any, d: Path) -> Result:
    """checkpoints_iterator yields the latest checkpoint, then times out."""
    ckpt = one_variable(api, s)
    ckpt.save(str(own(d) / "ckpt"))
    ckpt.save(str(own(d) / "ckpt"))
    barrier(api, s)
    calls = []

    def stop() -> bool:
        """Record the call and stop iterating."""
        calls.append("timeout")
        return True
    return {"plain": [rel(p, d) for p in api.train.checkpoints_iterator(str(own(d)), timeout=0)],
            "with_fn": [rel(p, d) for p in api.train.checkpoints_iterator(str(own(d)), timeout=0, timeout_fn=stop)],
            "calls": calls}


@case()
def write_callbacks_and_sync(api: Any, s: Any, d: Path) -> Result:
    """CheckpointOptions' write callbacks (with and without the path); sync."""
    ckpt = one_variable(api, s)
    calls = []
    options = api.train.CheckpointOptions(experimental_write_callbacks=[lambda path: calls.append(rel(path, d)),
                                                                         lambda: calls.append("no argument")])
    ckpt.write(str(own(d) / "w"), options=options)
    ckpt.save(str(own(d) / "s"), options=options)
    ckpt.save(str(own(d) / "s"), options=options)
    manager = api.train.CheckpointManager(ckpt, str(own(d) / "m"), max_to_keep=1)
    manager.save(options=api.train.CheckpointOptions(experimental_write_callbacks=[lambda: calls.append("m")]))
    barrier(api, s)
    return {"calls": calls, "callbacks": len(options.experimental_write_callbacks), "sync": ckpt.sync(),
            "manager_sync": manager.sync(), "manager_checkpoint": manager.checkpoint is ckpt,
            "state": state(own(d)), "files": files(d)}


@case()
def manager_overwrites_a_number_and_rotates(api: Any, s: Any, d: Path) -> Result:
    """saving an existing checkpoint number again moves it to the newest."""
    ckpt = one_variable(api, s)
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=2)
    returned = [rel(manager.save(checkpoint_number=1), d), rel(manager.save(checkpoint_number=2), d),
                rel(manager.save(checkpoint_number=1), d), rel(manager.save(checkpoint_number=3), d)]
    barrier(api, s)
    return {"returned": returned, "checkpoints": [rel(p, d) for p in manager.checkpoints], "files": files(d),
            "state": state(own(d)), "counter": ckpt.save_counter}


@case()
def manager_keep_every_tiny_interval_keeps_all(api: Any, s: Any, d: Path) -> Result:
    """a tiny keep_checkpoint_every_n_hours keeps every file."""
    ckpt = one_variable(api, s)
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=1, keep_checkpoint_every_n_hours=1e-12)
    returned = [rel(manager.save(), d) for _ in range(3)]
    barrier(api, s)
    return {"returned": returned, "checkpoints": [rel(p, d) for p in manager.checkpoints], "files": files(d),
            "state": state(own(d))}


@case()
def manager_latest_after_files_deleted(api: Any, s: Any, d: Path) -> Result:
    """a manager's latest_checkpoint comes from the state file even without files."""
    ckpt = one_variable(api, s)
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=3)
    saved = [manager.save() for _ in range(2)]
    barrier(api, s)
    for file in own(d).iterdir():
        if file.name.startswith("ckpt-2."):
            file.unlink()
    again = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=3)
    return {"saved": [rel(p, d) for p in saved], "latest": rel(again.latest_checkpoint, d),
            "checkpoints": [rel(p, d) for p in again.checkpoints],
            "tf_latest": rel(api.train.latest_checkpoint(str(own(d))), d),
            "restore": attempt(lambda: rel(again.restore_or_initialize(), d))}


@case()
def manager_interval_after_restore_and_last_step(api: Any, s: Any, d: Path) -> Result:
    """restore_or_initialize and last_checkpoint_step set the interval's start."""
    ckpt = one_variable(api, s)
    step = api.Variable(0, dtype="int64")
    manager = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=None, step_counter=step, checkpoint_interval=5)
    step.assign(10)
    first = rel(manager.save(), d)
    barrier(api, s)
    step.assign(12)
    resumed = api.train.CheckpointManager(ckpt, str(own(d)), max_to_keep=None, step_counter=step,
                                          checkpoint_interval=5)
    restored = rel(resumed.restore_or_initialize(), d)
    step.assign(14)
    early = resumed.save()
    step.assign(17)
    late = rel(resumed.save(), d)
    given = api.train.CheckpointManager(ckpt, str(own(d) / "given"), max_to_keep=None, step_counter=step,
                                        checkpoint_interval=5, last_checkpoint_step=15)
    step.assign(19)
    skipped = given.save()
    step.assign(20)
    saved = rel(given.save(), d)
    barrier(api, s)
    return {"first": first, "restored": restored, "early": early, "late": late, "skipped": skipped, "saved": saved}


@case(setups=LOCAL)
def relative_prefixes_stay_relative(api: Any, s: Any, d: Path) -> Result:
    """relative prefixes and directories give relative paths everywhere."""
    previous = os.getcwd()
    os.chdir(d)
    try:
        ckpt = one_variable(api, s)
        saved = ckpt.save("rel/ckpt")
        written = ckpt.write("rel/w")
        manager = api.train.CheckpointManager(ckpt, "managed", max_to_keep=1)
        managed = manager.save()
        return {"saved": saved, "written": written, "managed": managed, "latest": api.train.latest_checkpoint("rel"),
                "manager_latest": manager.latest_checkpoint, "checkpoints": manager.checkpoints,
                "state": state(d / "rel"), "managed_state": state(d / "managed"), "files": files(d),
                "keys": keys(api, "rel")}
    finally:
        os.chdir(previous)


@case()
def status_methods_return_the_status(api: Any, s: Any, d: Path) -> Result:
    """status assertions return the status; restore takes a Path."""
    ckpt = one_variable(api, s)
    path = ckpt.save(own(d) / "ckpt")
    status = one_variable(api, s).restore(Path(path))
    return {"consumed": status.assert_consumed() is status,
            "existing": status.assert_existing_objects_matched() is status,
            "nontrivial": status.assert_nontrivial_match() is status, "partial": status.expect_partial() is status,
            "run": attempt(lambda: status.run_restore_ops())}


# -- errors -----------------------------------------------------------------------------------------------


@case()
def restore_dtype_mismatch(api: Any, s: Any, d: Path) -> Result:
    """restoring into a variable of another dtype raises TF's InvalidArgumentError first."""
    with s.scope():
        a, b = api.Variable(api.constant(1.0, "float64")), api.Variable(2.0)
    path = api.train.Checkpoint(a=a, b=b).save(str(own(d) / "ckpt"))
    with s.scope():
        a2, b2 = api.Variable(api.constant(0.0, "float64")), api.Variable(api.constant(0.0, "float64"))
    return {"restore": attempt(lambda: api.train.Checkpoint(a=a2, b=b2).restore(path)), "a": a2, "b": b2}


@case()
def restore_int_into_float(api: Any, s: Any, d: Path) -> Result:
    """read of an int64 value into a float32 variable."""
    with s.scope():
        n = api.Variable(3, dtype="int64")
    path = api.train.Checkpoint(n=n).save(str(own(d) / "ckpt"))
    with s.scope():
        f = api.Variable(0.0)
    return {"restore": attempt(lambda: api.train.Checkpoint(n=f).read(path)), "f": f}


@case()
def restore_shape_mismatch(api: Any, s: Any, d: Path) -> Result:
    """restoring into a variable of another shape raises TF's ValueError."""
    with s.scope():
        v = api.Variable([1.0, 2.0, 3.0])
    path = api.train.Checkpoint(v=v).save(str(own(d) / "ckpt"))
    with s.scope():
        w = api.Variable([0.0, 0.0])
        scalar = api.Variable(0.0)
    return {"vector": attempt(lambda: api.train.Checkpoint(v=w).restore(path)), "w": w,
            "scalar": attempt(lambda: api.train.Checkpoint(v=scalar).restore(path))}


@case()
def restore_missing_paths(api: Any, s: Any, d: Path) -> Result:
    """restore/read of missing prefixes, a prefix without its number, a directory."""
    with s.scope():
        v = api.Variable(1.0)
    ckpt = api.train.Checkpoint(v=v)
    ckpt.save(str(own(d) / "ckpt"))
    barrier(api, s)
    return {"nope": attempt(lambda: ckpt.restore(str(own(d) / "nope"))),
            "no_suffix": attempt(lambda: ckpt.restore(str(own(d) / "ckpt"))),
            "directory": attempt(lambda: ckpt.restore(str(own(d)))),
            "read_nope": attempt(lambda: ckpt.read(str(own(d) / "nope")))}


@case()
def untrackable_attributes(api: Any, s: Any, d: Path) -> Result:
    """numbers, strings and None are refused as Checkpoint arguments, not as attributes."""
    def make(**kwargs: Any) -> Any:
        """A Checkpoint of ``kwargs`` (returns "ok" when accepted)."""
        api.train.Checkpoint(**kwargs)
        return "ok"

    def attach(value: Any) -> Any:
        """Attach ``value`` as an attribute of a Checkpoint (returns "ok" when accepted)."""
        ckpt = api.train.Checkpoint()
        ckpt.x = value
        return "ok"
    return {"int": attempt(lambda: make(x=3)), "str": attempt(lambda: make(x="a")),
            "none": attempt(lambda: make(x=None)), "float": attempt(lambda: make(x=1.5)),
            "attach_int": attempt(lambda: attach(3)), "attach_list": attempt(lambda: attach([1, 2]))}


@case()
def string_variables_round_trip(api: Any, s: Any, d: Path) -> Result:
    """tf.string variables save and restore: load_variable gives bytes for a scalar and an object array of bytes
    otherwise (NUL and non-UTF-8 bytes kept), the dtype map says string, values come back on restore, and a string
    restores only into a string variable. In a scope (MirroredVariable, ON_READ ONLY_FIRST_REPLICA) on one worker;
    several workers cannot create them (TF's broadcast of the chief's value takes no strings)."""
    variables = {"a": api.Variable("hello"), "b": api.Variable(np.array([[b"a", b"bc"], [b"", b"\xff\x00"]], dtype=object))}

    def scoped() -> dict[str, Any]:
        """String variables created in the strategy's scope."""
        with s.scope():
            return {"w": api.Variable(["p", "q"]),
                    "r": api.Variable(["x", "y"], synchronization=api.VariableSynchronization.ON_READ,
                                      aggregation=api.VariableAggregation.ONLY_FIRST_REPLICA)}

    made = attempt(scoped)
    out: Result = {"scoped": made if isinstance(made, Exception) else sorted(made)}
    variables.update({} if isinstance(made, Exception) else made)
    ckpt = api.train.Checkpoint(**variables)
    path = ckpt.save(str(own(d) / "ckpt"))
    keys = {name: f"{name}/.ATTRIBUTES/VARIABLE_VALUE" for name in variables}
    loaded = {name: api.train.load_variable(path, key) for name, key in keys.items()}
    reader = api.train.load_checkpoint(path)
    out.update({"saved": rel(path, d), "scalar_type": type(loaded["a"]).__name__,
                "loaded": {name: np.asarray(value) for name, value in loaded.items()},
                "dtypes": {k: numpy_dtype(v) for k, v in reader.get_variable_to_dtype_map().items()
                           if k in keys.values()},
                "shapes": {k: list(v) for k, v in reader.get_variable_to_shape_map().items() if k in keys.values()}})
    variables["a"].assign("changed")
    variables["b"].assign([["1", "2"], ["3", "4"]])
    out["restore"] = attempt(lambda: ckpt.restore(path).assert_consumed() and "consumed")
    out["restored"] = {name: np.asarray(v.numpy()) for name, v in variables.items()}
    out["into_float"] = attempt(lambda: api.train.Checkpoint(a=api.Variable(1.0)).read(path))
    with s.scope():
        number = api.train.Checkpoint(n=api.Variable(2.0))
    floats = number.save(str(own(d) / "floats"))
    out["float_into_string"] = attempt(lambda: api.train.Checkpoint(n=api.Variable("x")).read(floats))
    return out


# -- found by the checkpoint-API fuzz (fuzz_checkpoint_api.py) ----------------------------------------------


@case()
def names_are_escaped_in_keys(api: Any, s: Any, d: Path) -> Result:
    """a name holding ``/`` or ``.`` is escaped in its key (``.S``, ``..``); messages show the name itself."""
    with s.scope():
        ckpt = api.train.Checkpoint(t={"x/y": api.Variable(1.0), "x.y": api.Variable(2.0), "": api.Variable(3.0)})
        setattr(ckpt, "a.b/c", api.Variable(4.0))
    path = ckpt.write(str(own(d) / "w"))
    with s.scope():
        fewer = api.train.Checkpoint(t={"x.y": api.Variable(0.0)})
    status = fewer.read(path)
    return {"keys": keys(api, path), "loaded": api.train.load_variable(path, "t/x.Sy/.ATTRIBUTES/VARIABLE_VALUE"),
            "value": fewer.t["x.y"], "consumed": attempt(status.assert_consumed)}


@case()
def read_none_and_readers_given_none(api: Any, s: Any, d: Path) -> Result:
    """read(None) gives the initialization-only status, as restore(None); the readers refuse None with TF's
    TypeError (latest_checkpoint returns None for a directory without checkpoints)."""
    ckpt = one_variable(api, s)
    status = ckpt.read(None)
    return {"status": type(status).__name__, "checks": status_checks(status), "value": ckpt.v,
            "list": attempt(lambda: api.train.list_variables(None)),
            "load": attempt(lambda: api.train.load_variable(None, "v")),
            "reader": attempt(lambda: api.train.load_checkpoint(None))}


@case()
def failed_restore_leaves_values_for_later_objects(api: Any, s: Any, d: Path) -> Result:
    """a restore that fails on a dtype restores nothing now, but the save counter made after it and variables
    attached later still take their saved values, as in TF (restore and read)."""
    with s.scope():
        path = api.train.Checkpoint(a=api.Variable([1, 2], dtype="int64"), b=api.Variable(5.0),
                                    c=api.Variable(6.0)).save(str(own(d) / "ckpt"))
    out: Result = {}
    for method in ("restore", "read"):
        with s.scope():
            ckpt = api.train.Checkpoint(a=api.Variable([0.0, 0.0], dtype="float64"), b=api.Variable(0.0))
        error = attempt(lambda ckpt=ckpt, method=method: getattr(ckpt, method)(path))
        with s.scope():
            ckpt.c = api.Variable(0.0)
        out[method] = {"error": error, "b": ckpt.b, "c": ckpt.c, "counter": ckpt.save_counter}
    return out


@case()
def failed_save_leaves_its_directory(api: Any, s: Any, d: Path) -> Result:
    """a save that fails on a value (ON_READ NONE) has already made the prefix's directory, as TF's."""
    var = on_read(api, s, "NONE")
    ckpt = api.train.Checkpoint(v=var)
    saved = attempt(lambda: ckpt.save(str(own(d) / "sub" / "ckpt")))
    manager = api.train.CheckpointManager(ckpt, str(own(d) / "m"), max_to_keep=1, checkpoint_name="deeper/model")
    managed = attempt(manager.save)
    barrier(api, s)
    return {"saved": saved, "managed": managed, "files": files(d), "latest": manager.latest_checkpoint}


@case()
def nontrivial_match_counts_matched_objects(api: Any, s: Any, d: Path) -> Result:
    """assert_nontrivial_match passes when objects without variables matched at the read (lists, Checkpoints), not
    when they are attached later with nothing pending below them; an object attached later above pending values
    counts."""
    with s.scope():
        empty = api.train.Checkpoint(items=[api.train.Checkpoint(), []], u=api.train.Checkpoint())
        holding = api.train.Checkpoint(v=api.train.Checkpoint(w=api.Variable(1.0)), u=api.train.Checkpoint())
    bare = empty.write(str(own(d) / "bare"))
    held = holding.write(str(own(d) / "held"))
    now = api.train.Checkpoint(items=[api.train.Checkpoint(), []]).read(bare)
    later = api.train.Checkpoint()
    late_status = later.read(bare)
    later.items = [api.train.Checkpoint(), []]
    above = api.train.Checkpoint()
    above_status = above.read(held)
    above.u = api.train.Checkpoint()
    unrelated = status_checks(above_status)
    above.v = api.train.Checkpoint()
    return {"now": status_checks(now), "late": status_checks(late_status), "unrelated": unrelated,
            "above_pending": status_checks(above_status)}


@case()
def partial_restore_follows_key_order(api: Any, s: Any, d: Path) -> Result:
    """a value of another shape stops a restore: the values whose keys sort before it are restored, the others not
    (TF restores in key order, not in the order objects were added), plain and distributed."""
    def tree(bad: list[float], value: float, scoped: bool) -> Any:
        """A Checkpoint whose dict and late attributes put the odd-shaped value first in saving order."""
        def make() -> Any:
            ckpt = api.train.Checkpoint(a={"z": api.Variable(value), "b": api.Variable(bad)}, c=api.Variable(value))
            ckpt.zz = api.train.Checkpoint(q=api.Variable(value))
            ckpt.m = api.Variable(value)
            return ckpt
        if not scoped:
            return make()
        with s.scope():
            return make()
    out: Result = {}
    for scoped in (False, True):
        path = tree([1.0, 2.0], 3.0, scoped).write(str(own(d) / f"w{scoped}"))
        target = tree([0.0, 0.0, 0.0], 0.0, scoped)
        out[f"scoped_{scoped}"] = {"error": type(attempt(lambda target=target, path=path: target.read(path))).__name__,
                                   "values": [target.a["z"], target.c, target.zz.q, target.m]}
    return out


@case()
def partial_restore_takes_root_before_arguments(api: Any, s: Any, d: Path) -> Result:
    """with ``root``, a restore stopped by a value of another shape has restored root's values first (in key
    order), then the keyword arguments' (in key order): keys sorting before root's are not restored first. Each
    group checks its dtypes before assigning any: another dtype among the arguments leaves root's restored."""
    def tree(net: Any, y: Any, c: Any, a: Any) -> Any:
        with s.scope():
            inner = api.train.Checkpoint(y=api.Variable(y), net=api.train.Checkpoint(k=api.Variable(net)))
            return api.train.Checkpoint(c=api.Variable(c), root=inner, a=api.Variable(a))
    path = tree(1.0, 2.0, 3.0, 4.0).write(str(own(d) / "rooted"))
    out: Result = {}
    for bad in ("c", "y", "net", "c_dtype", "y_dtype"):
        wrong = np.float64(0.0) if bad.endswith("_dtype") else [0.0, 0.0]
        target = tree(**{name: wrong if bad.split("_")[0] == name else 0.0 for name in ("net", "y", "c", "a")})
        error = attempt(lambda target=target: target.read(path))
        out[bad] = {"error": type(error).__name__, "values": [target.root.net.k, target.root.y, target.c, target.a]}
    return out


@case()
def root_checkpoint_saves_its_arguments_only(api: Any, s: Any, d: Path) -> Result:
    """with ``root``, the checkpoint saves root and its keyword arguments; attributes set later stay plain ones
    (neither saved nor restored), while root's own new attributes are saved."""
    with s.scope():
        inner = api.train.Checkpoint(k=api.Variable(3.0))
        ckpt = api.train.Checkpoint(root=inner, z=api.Variable(7.0))
        ckpt.w = api.Variable(2.0)
        inner.n = api.Variable(4.0)
    path = ckpt.save(str(own(d) / "ckpt"))
    with s.scope():
        again = api.train.Checkpoint(root=api.train.Checkpoint(), z=api.Variable(0.0))
        again.k = api.Variable(0.0)
    status = again.restore(path)
    return {"keys": keys(api, path), "w": ckpt.w, "z": again.z, "k": again.k, "checks": status_checks(status)}


@case()
def objects_of_another_kind_where_values_were_saved(api: Any, s: Any, d: Path) -> Result:
    """an object (Checkpoint, list) where a variable was saved takes nothing: assert_consumed names the unused
    value; a variable where an object was saved is bound to it and keeps its value; an unmatched matrix variable's
    repr starts its value on a new line, as TF's."""
    with s.scope():
        values = api.train.Checkpoint(v=api.Variable(1.0), w=api.Variable(2.0)).write(str(own(d) / "values"))
        nested = api.train.Checkpoint(o=api.train.Checkpoint(q=api.Variable(3.0))).write(str(own(d) / "nested"))
    out: Result = {}
    for name, make in (("checkpoint", api.train.Checkpoint), ("list", list)):
        with s.scope():
            ckpt = api.train.Checkpoint(v=make(), w=api.Variable(0.0))
        out[name] = {"checks": status_checks(ckpt.read(values)), "w": ckpt.w}
    with s.scope():
        bound = api.train.Checkpoint(o=api.Variable(0.0))
    out["variable"] = {"checks": status_checks(bound.read(nested)), "o": bound.o}
    extra = api.train.Checkpoint(v=api.Variable(0.0), w=api.Variable(0.0), m=api.Variable([[1.0, 2.0], [3.0, 4.0]]))
    out["matrix"] = status_checks(extra.read(values))
    return out


@case()
def shared_value_goes_to_the_first_object(api: Any, s: Any, d: Path) -> Result:
    """a variable saved under two names restores into the object found first in saving order only (the other
    keeps its value and is unmatched), as TF's; with the names added the other way round, the other one."""
    out: Result = {}
    for order in (("a", "z"), ("z", "a")):
        with s.scope():
            saved = api.train.Checkpoint()
            v = api.Variable([1.0, 2.0])
            for name in order:
                setattr(saved, name, v)
            path = saved.write(str(own(d) / "".join(order)))
            target = api.train.Checkpoint(a=api.Variable([0.0, 0.0]), z=api.Variable([5.0, 5.0]))
        status = target.read(path)
        out["".join(order)] = {"keys": keys(api, path), "a": target.a, "z": target.z,
                               "existing": attempt(lambda status=status: (status.assert_existing_objects_matched(),
                                                                          "ok")[1])}
    return out


# -- running ----------------------------------------------------------------------------------------------


def run_checkpoint_case(api: Any, case: Case, strategy: Any, base: Path) -> Result:
    """``case`` on this worker in the directory ``base/<case name>`` (created; the workers of C share it),
    normalized (``Api.run_case``) and with that directory spelled ``<dir>``."""
    directory = Path(base) / case.name
    directory.mkdir(parents=True, exist_ok=True)
    token = _DIRECTORY.set(directory)
    try:
        return scrub(api.run_case(case, strategy), directory)
    finally:
        _DIRECTORY.reset(token)


@case(setups=LOCAL)
def an_object_at_two_saved_nodes_restores_once(api: Any, s: Any, d: Path) -> Result:
    """A variable attached under a second name after saving binds both saved nodes: the first node's value restores
    it and the other node's value is used up unrestored (TF restores an object once per restore), so
    assert_consumed passes though that value's dtype and shape do not fit."""
    with s.scope():
        ckpt = api.train.Checkpoint(c=api.Variable(10, dtype="int32"), v=api.Variable([1.0, 2.0, 3.0], dtype="float16"))
    path = ckpt.save(str(own(d) / "ckpt"))
    ckpt.c.assign(5)
    ckpt.v = ckpt.c
    status = ckpt.restore(path)
    return {"checks": status_checks(status), "c": ckpt.c, "v": ckpt.v}
