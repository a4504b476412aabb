"""Writing one checkpoint's files: ``<prefix>.npz`` (the arrays; strings length-prefixed, see strings.py), then its
manifest ``<prefix>.index.json`` (see reader.py), each atomically, the manifest last: an interrupted save leaves no
readable checkpoint."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import numpy as np

from .._version import __version__
from ..distribute.variables import Variable
from ..runtime import current_environment
from ..tensor import dtype_name, is_string
from .files import atomic_write
from .reader import FORMAT, FORMAT_VERSION
from .state import checkpoint_files
from .strings import encode_strings

__all__ = ["write_checkpoint_files"]


def write_checkpoint_files(prefix: str, values: dict[str, np.ndarray], variables: dict[str, Variable],
                           graph: dict[str, dict[str, str]], step: int, strategy: Any) -> None:
    """Write ``values`` (by TF key, in saving order) as the checkpoint at ``prefix``; ``variables`` give each
    value's synchronization and aggregation, ``graph`` the object graph's edges (tracking.ObjectGraph.children),
    ``step`` the save count and ``strategy`` the cluster shape."""
    data_path, index_path = checkpoint_files(prefix)
    keys = {name: f"v{i}" for i, name in enumerate(values)}
    buffer = io.BytesIO()
    np.savez(buffer, **{keys[name]: encode_strings(value) if is_string(value.dtype) else value  # never pickled
                        for name, value in values.items()})
    raw = buffer.getvalue()
    atomic_write(data_path, raw)
    current_environment().io_point("checkpoint-commit")  # a crash here leaves data without a manifest
    ext = strategy.extended
    manifest = {
        "format": FORMAT, "version": FORMAT_VERSION, "mirrorlab_version": __version__,
        "step": step, "data_file": data_path.name, "sha256": hashlib.sha256(raw).hexdigest(),
        "cluster": {"workers": getattr(ext, "_num_workers", 1), "replicas_in_sync": strategy.num_replicas_in_sync},
        "variables": {name: {"key": keys[name], "dtype": dtype_name(values[name]), "shape": list(values[name].shape),
                             "synchronization": var.synchronization.name, "aggregation": var.aggregation.name}
                      for name, var in variables.items()},
        "graph": graph,
    }
    atomic_write(index_path, json.dumps(manifest, indent=1).encode())  # variables in saving order
