"""The public op namespaces hand out ``Tensor`` values (NumPy arrays with TF's ``numpy()``).

The op functions stay plain NumPy inside mirrorlab; only the names users reach (``ml.reduce_sum``, ``ml.math.*``,
``ml.nn.*``, ``ml.linalg.*``, ``ml.random.*``) are wrapped, once, when ``mirrorlab.tf`` is imported.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..tensor import returns_tensors

__all__ = ["hand_out_tensors"]

_OP_MODULES = {f"mirrorlab.tf.{name}" for name in ("array_ops", "clip_ops", "constant", "manip_ops", "math_ops", "nn",
                                                 "nn_ops", "random", "tensor_conversion")}


def hand_out_tensors(namespace: dict[str, Any]) -> None:
    """Replace each op function in ``namespace`` (a module's or package's globals) by one returning Tensors."""
    for name, value in list(namespace.items()):
        if inspect.isfunction(value) and value.__module__ in _OP_MODULES and not name.startswith("_"):
            namespace[name] = returns_tensors(value)
