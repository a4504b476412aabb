"""The few rules the core takes from the user-facing tensor library, so the core never imports it.

``mirrorlab.tf`` installs TensorFlow's rules at import (Python-value conversion, dtype names, name scopes, the
gradient tape's variable reads, tf.data pipelines); without it the core follows plain NumPy's, and distributes no
datasets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .tensor import as_tensor

__all__ = ["Frontend", "current_frontend", "install_frontend"]


class NoSuchError(Exception):
    """An exception type no pipeline raises (the default frontend's pipeline errors)."""


class Frontend:
    """NumPy's rules; ``mirrorlab.tf`` installs a subclass with TensorFlow's."""

    # -- values --------------------------------------------------------------------------------------
    def constant(self, value: Any, dtype: np.dtype | None) -> Any:
        """A Python value (number, list) as an array of ``dtype`` (inferred when None)."""
        return as_tensor(value) if dtype is None else np.asarray(value, dtype)

    def as_dtype(self, dtype: Any) -> np.dtype:
        """A dtype argument (a name, a type) as a NumPy dtype."""
        return np.dtype(dtype)

    def convert_to_tensor(self, value: Any, dtype: Any = None) -> Any:
        """Any array-like as one array (of ``dtype`` when given)."""
        return self.constant(value, None if dtype is None else self.as_dtype(dtype))

    def name_scope(self) -> str:
        """The prefix of new variables' names (``outer/inner/``)."""
        return ""

    # -- the gradient tape ---------------------------------------------------------------------------
    def watched(self, value: Any) -> Any:
        """What a recording tape reads for ``value`` (a tracked leaf of a watched variable), else ``value``."""
        return value

    def variable_leaf(self, variable: Any) -> Any:
        """A tracked read of ``variable`` when a recording tape watches it, else ``variable``."""
        return variable

    def gather(self, value: Any, indices: Any) -> Any:
        """Rows ``indices`` of ``value`` (``Variable.sparse_read``)."""
        return np.take(np.asarray(value), np.asarray(indices), axis=0)

    def gather_nd(self, value: Any, indices: Any) -> Any:
        """The slices of ``value`` at the index tuples in ``indices`` (``Variable.gather_nd``)."""
        index = np.asarray(indices)
        return np.asarray(value)[tuple(np.moveaxis(index, -1, 0))]

    # -- input pipelines (what the core needs to distribute a dataset) --------------------------------
    infinite_cardinality = -1
    unknown_spec_error: type[Exception] = NoSuchError
    declared_shape_error: type[Exception] = NoSuchError

    def is_dataset(self, value: Any) -> bool:
        """Whether ``value`` is an input pipeline this frontend can distribute."""
        return False

    def worker_pipeline(self, dataset: Any, num_workers: int, rank: int, replicas_per_worker: int) -> Any:
        """The stream worker ``rank`` reads: rebatched per replica and auto-sharded."""
        raise TypeError("no input pipeline library is loaded: `import mirrorlab.tf as tf` and distribute a "
                        "tf.data.Dataset")

    def spec(self, shape: tuple, dtype: Any) -> Any:
        """An element spec of ``shape`` and ``dtype``."""
        raise TypeError("no input pipeline library is loaded")

    def spec_of(self, value: Any) -> Any:
        """The element spec of an array."""
        raise TypeError("no input pipeline library is loaded")

    def is_spec(self, value: Any) -> bool:
        """Whether ``value`` is an element spec (with ``shape`` and ``dtype``)."""
        return False

    def optional(self, value: Any, spec: Any, present: bool) -> Any:
        """A value that may be absent (``get_next_as_optional``)."""
        raise TypeError("no input pipeline library is loaded")


_current = Frontend()


def current_frontend() -> Frontend:
    """The installed frontend (NumPy's rules until ``mirrorlab.tf`` is imported)."""
    return _current


def install_frontend(frontend: Frontend) -> None:
    """Make ``frontend``'s rules the core's (``mirrorlab.tf`` calls this once, at import)."""
    global _current
    _current = frontend
