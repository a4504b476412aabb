"""What ``Checkpoint.read``/``restore`` return: TF's load statuses and their assertions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..distribute.variables import Variable
from .reader import VALUE_SUFFIX
from .tracking import unescape_path

if TYPE_CHECKING:
    from .checkpoint import Checkpoint

__all__ = ["CheckpointLoadStatus", "InitializationOnlyStatus"]

SHOWN = 10  # TF lists at most this many unmatched objects


class CheckpointLoadStatus:
    """What a restore matched, with TF's checks. Saved values nothing matched yet stay pending on the
    checkpoint and are restored when a matching variable is attached later (``ckpt.w = Variable(...)``); like
    TF's, the checks look at the checkpoint as it is when they run (later attributes included)."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self._checkpoint = checkpoint

    def _split(self) -> tuple[list[Variable], list[Variable]]:
        """The variables tracked now that got a saved value and those that got none, in TF's saving order (one
        walk of the object graph)."""
        done = self._checkpoint._restore.restored
        restored: list[Variable] = []
        missing: list[Variable] = []
        for var in self._checkpoint._variables().values():
            (restored if id(var) in done else missing).append(var)
        return restored, missing

    @property
    def restored(self) -> list[Variable]:
        """The variables that got a saved value (so far), in TF's saving order."""
        return self._split()[0]

    @property
    def missing(self) -> list[Variable]:
        """The variables tracked now that got no saved value, in TF's saving order."""
        return self._split()[1]

    @property
    def unused(self) -> list[str]:
        """Saved keys no variable has taken (yet), in the order they were saved (TF reports the first)."""
        return list(self._checkpoint._restore.pending)

    def _unmatched_objects(self) -> None:
        """Raise TF's AssertionError when variables got no saved value."""
        missing = self.missing
        if missing:
            shown = ", ".join(repr(v) for v in missing[:SHOWN])
            raise AssertionError(
                f"Found {len(missing)} Python objects that were not bound to checkpointed values, likely due to "
                f"changes in the Python program. Showing {min(len(missing), SHOWN)} of {len(missing)} "
                f"unmatched objects: [{shown}]")

    def assert_consumed(self) -> CheckpointLoadStatus:
        """Every variable got a saved value and every saved value found its variable."""
        self._unmatched_objects()
        for key in self.unused:
            path = key[:-len(VALUE_SUFFIX)] if key.endswith(VALUE_SUFFIX) else key
            raise AssertionError(f"Unresolved object in checkpoint (root).{unescape_path(path)}: attributes {{\n"
                                 f'  name: "VARIABLE_VALUE"\n  full_name: "{path}"\n  checkpoint_key: "{key}"\n}}\n'
                                 "has_checkpoint_values {\n  value: true\n}\n")
        unused = self._checkpoint._restore.unused_attributes
        if unused:
            raise AssertionError("Unused attributes in these objects (the attributes exist in the checkpoint but were "
                                 "not restored):\n" + "\n".join(
                                     f"(root).{unescape_path(key[:-len(VALUE_SUFFIX)])} ({obj!r}): ['VARIABLE_VALUE']"
                                     for key, obj in unused.items()))
        return self

    def assert_existing_objects_matched(self) -> CheckpointLoadStatus:
        """Every variable that exists now got a saved value."""
        self._unmatched_objects()
        return self

    def assert_nontrivial_match(self) -> CheckpointLoadStatus:
        """Some object besides the root matched a saved one (a variable that got its value, or a list, dict or
        other object holding them, as TF counts matched objects)."""
        restored, missing = self._split()
        if restored or self._checkpoint._restore.matched_objects:
            return self
        if not missing:
            raise AssertionError(f"Nothing to load. No dependencies have been added to {self._checkpoint!r} yet.")
        raise AssertionError(
            "Nothing except the root object matched a checkpointed value. Typically this means that the checkpoint "
            "does not match the Python program. The following objects have no matching checkpointed value: "
            f"[{', '.join(repr(v) for v in missing)}]")

    def expect_partial(self) -> CheckpointLoadStatus:
        """Silence the warnings about unmatched values (mirrorlab gives none): returns the status."""
        return self

    def run_restore_ops(self, session: Any = None) -> None:
        """Nothing to run: restores happen eagerly."""


class InitializationOnlyStatus(CheckpointLoadStatus):
    """The status of ``restore(None)``: every check fails, as TF's initialization-only status does."""

    def _fail(self) -> CheckpointLoadStatus:
        """TF's AssertionError for a status that restored nothing."""
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")

    assert_consumed = assert_existing_objects_matched = assert_nontrivial_match = _fail
