"""Values a checkpoint read before their variables existed, and TF's restore-on-create that delivers them.

A read keeps what nothing matched in a ``PendingRestore`` (TF's restore coordinator): the values, the saved
object graph and the objects the read matched. The matched objects keep it alive (as TF's objects keep their
deferred restorations), so it outlives a temporary ``Checkpoint``: when one of them builds variables later it
calls ``restore_on_create(obj)``, which assigns the values now matched below it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from .. import errors
from ..distribute.kernel_dtypes import tf_dtype
from ..distribute.distributed_variables import DistributedVariable
from ..distribute.variables import Variable
from ..tensor import dtype_name
from .reader import checkpoint_key
from .tracking import escape_name, match_graph, trackable_children

__all__ = ["PendingRestore", "assign_restored", "check_dtype", "restore_on_create"]

def check_dtype(key: str, var: Variable, value: np.ndarray, save_path: str) -> None:
    """RestoreV2's InvalidArgumentError when the saved dtype is not the variable's."""
    if dtype_name(value) != dtype_name(var):
        raise errors.InvalidArgumentError(
            f"tensor_name = {key}; expected dtype {tf_dtype(var)} does not equal original dtype "
            f"{tf_dtype(value)} [Op:RestoreV2]\nFix: create the variable with dtype={dtype_name(value)!r}, as "
            f"it was saved (checkpoint {save_path}).")


def assign_restored(key: str, var: Variable, value: np.ndarray, save_path: str, deferred: bool = False) -> None:
    """Assign a saved value (ON_READ SUM split across replicas), with TF's errors for another shape: a plain
    variable's restore names the shapes and the variable, a distributed variable's is its assign error, and a
    distributed Keras weight restored after the read (attached or built later) gives Keras' assign error, as Keras 3
    restores its own variables then."""
    fix = (f"\nFix: build the model exactly as it was when {save_path} was saved ({key} has shape "
           f"{tuple(value.shape)} there).")
    if not isinstance(var, DistributedVariable) and tuple(var.shape) != tuple(value.shape):
        raise ValueError(f"Received incompatible tensor with shape {tuple(value.shape)} when attempting to restore "
                         f"variable with shape {tuple(var.shape)} and name {var.name}.{fix}")
    if deferred and getattr(var, "_keras_weight", False) and tuple(var.shape) != tuple(value.shape):
        shown = f"<Variable path={var.name.removesuffix(':0')}, shape={tuple(var.shape)}, dtype={dtype_name(var)}, " \
                f"value={var.numpy()}>"
        raise ValueError("The shape of the target variable and the shape of the target value in "
                         f"`variable.assign(value)` must match. variable.shape={tuple(var.shape)}, Received: "
                         f"value.shape={tuple(value.shape)}. Target variable: {shown}{fix}")
    try:
        var._restore_value(value)
    except ValueError as exc:
        raise ValueError(f"{exc}{fix}") from None


def _reference(obj: Any) -> Callable[[], Any]:
    """A weak reference to ``obj`` where it allows one (lists and dicts do not: those are held)."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


class PendingRestore:
    """One read's values that no variable took yet (by TF key, in saving order), where they came from, the
    variables it restored (by ``id``) and the objects it matched (by ``id``: a reference and the saved path)."""

    def __init__(self, pending: dict[str, np.ndarray], graph: Mapping[str, Mapping[str, str]],
                 save_path: str) -> None:
        self.pending = pending
        self.graph = graph
        self.save_path = save_path
        self.restored: set[int] = set()
        self.matched: dict[int, tuple[Callable[[], Any], str]] = {}
        self.matched_objects: set[int] = set()  # every other object that matched a saved one (lists, dicts, ...)
        self.unused_attributes: dict[str, Any] = {}  # saved values whose node another kind of object took, by key

    def give(self, children: Mapping[str, Any], at: str = "", reading: bool = False,
             first: Collection[str] = ()) -> None:
        """Assign the pending values that ``children`` (below the saved node ``at``) now match, every dtype
        checked before anything is assigned, and remember the other objects matched, whose variables may come
        later. Matched objects count for ``assert_nontrivial_match`` when the read itself (``reading``) matched
        them, or later when values wait below them, as in TF. Values go in key order, those below the
        children named in ``first`` (a checkpoint's ``root``'s) first, then each other child's, as TF's restore does."""
        try:
            if self.pending or reading:
                self._match(children, at, reading, {escape_name(name) for name in first})
        finally:  # after a failed restore too: the values nothing took still wait for their objects, as in TF
            self._register()

    def _match(self, children: Mapping[str, Any], at: str, reading: bool, first: set[str]) -> None:
        """``give``'s matching and assigning."""
        match = match_graph(children, self.graph, at)
        self.matched_objects.update(key for key, (_, path) in match.objects.items()
                                    if reading or any(k.startswith(f"{path}/") for k in self.pending))
        # a variable where an object without a value was saved is bound to it all the same, as in TF
        self.restored.update(id(var) for path, var in match.variables.items() if path in self.graph)
        for path in match.rebound:  # bound to an object restored at another node: its values are used up
            self.pending.pop(checkpoint_key(path), None)
        if not self.pending:
            return
        for key, (obj, path) in match.objects.items():
            self.matched[key] = (_reference(obj), path)
            _keep_alive(obj, self)
            if path not in self.graph and checkpoint_key(path) in self.pending:  # an object where a value was saved
                self.unused_attributes[checkpoint_key(path)] = obj
                del self.pending[checkpoint_key(path)]
        # TF restores a root's values in one RestoreV2 (dtypes checked, then assigned), then each keyword argument
        # in its own; without a root, everything at once
        groups: dict[str, dict[str, Variable]] = {"": {}}
        for path, var in sorted(match.variables.items(), key=lambda item: checkpoint_key(item[0])):
            if checkpoint_key(path) in self.pending:
                top = path.split("/")[0]
                groups.setdefault(top if first and top not in first else "", {})[checkpoint_key(path)] = var
        for found in groups.values():
            self._assign(found, deferred=not reading)

    def _assign(self, found: dict[str, Variable], deferred: bool) -> None:
        """Restore ``found`` (variables by key, in key order): every dtype checked before anything is assigned
        (``deferred``: after the read, see ``assign_restored``)."""
        try:
            for key, var in found.items():
                check_dtype(key, var, self.pending[key], self.save_path)
            for key, var in found.items():
                assign_restored(key, var, self.pending[key], self.save_path, deferred)
                del self.pending[key]
                self.restored.add(id(var))
        except (ValueError, errors.InvalidArgumentError):
            for key, var in found.items():  # as TF, a variable whose restore failed still used its value up
                self.pending.pop(key, None)
                self.restored.add(id(var))
            raise

    def _register(self) -> None:
        """List this restore among those restore-on-create asks while it holds values; forget it when empty."""
        with _LOCK:
            if self.pending:
                _RESTORING.add(self)
            else:
                _RESTORING.discard(self)
                self.matched.clear()

    def matched_path(self, obj: Any) -> str | None:
        """The saved path ``obj`` was matched to, if this read matched it."""
        entry = self.matched.get(id(obj))
        return entry[1] if entry is not None and entry[0]() is obj else None


_LOCK = threading.Lock()
_RESTORING: weakref.WeakSet[PendingRestore] = weakref.WeakSet()  # the ones still holding values
_KEPT_BY: weakref.WeakKeyDictionary[Any, list[PendingRestore]] = weakref.WeakKeyDictionary()


def _keep_alive(obj: Any, restore: PendingRestore) -> None:
    """Let ``obj`` keep ``restore`` alive (objects that take no weak reference are held by it instead)."""
    with _LOCK:
        try:
            kept = _KEPT_BY.setdefault(obj, [])
        except TypeError:
            return
        if restore not in kept:
            kept.append(restore)


def restore_on_create(obj: Any) -> None:
    """Restore the variables ``obj`` holds now from every read that matched ``obj`` and still holds values for
    them (TF's restore-on-create): call it when an object builds its variables after being restored, e.g. a
    layer at the end of ``build``. Checkpoints call it when an attribute is attached."""
    with _LOCK:
        restoring = list(_RESTORING)
    for restore in restoring:
        path = restore.matched_path(obj)
        if path is not None:
            restore.give(dict(trackable_children(obj)), path)
