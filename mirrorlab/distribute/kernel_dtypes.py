"""TF's kernels' dtype lists and their errors, checked by the strategy before any collective: which dtypes TF's
collective reduce, AddN (a single worker's ``strategy.reduce``), broadcast and gather take, and its kernel-level
dtype names (``float``, ``double``, ``half``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import errors
from ..collective.communicator import FIX_DESYNC
from ..collective.group import local_mismatch
from ..tensor import dtype_name, shape_of

__all__ = ["tf_dtype", "check_reducible", "check_addn_inputs", "check_broadcastable", "check_gatherable"]

COLLECTIVE_DTYPES = ("float16", "float32", "float64", "int32", "int64")
ADDN_DTYPES = COLLECTIVE_DTYPES + ("uint8", "int16", "int8", "complex64", "uint16", "complex128", "uint32", "uint64")
_TF_NAMES = {"float16": "half", "float32": "float", "float64": "double"}
# The allowed-type lists exactly as TF's kernels print them (they include types mirrorlab lacks).
_TF_ALLOWED = {
    "CollectiveReduceV2": "bfloat16, float, half, double, int32, int64",
    "AddN": "float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, "
            "quint16, uint16, complex128, half, uint32, uint64, variant",
    "CollectiveBcastSendV2": "bool, float, half, double, int32, int64",
}
BROADCAST_DTYPES = ("bool", "float16", "float32", "float64", "int32", "int64")


def tf_dtype(a: Any) -> str:
    """TF's kernel-level dtype name (``float`` for float32, ``double``, ``half``)."""
    name = dtype_name(a)
    return _TF_NAMES.get(name, name)


def check_reducible(leaves: Sequence[Sequence[Any]], addn: bool) -> None:
    """Reject dtypes TF's reduction kernels reject (bool, strings...), before any communication."""
    allowed = ADDN_DTYPES if addn else COLLECTIVE_DTYPES
    for leaf in leaves:
        if dtype_name(leaf[0]) not in allowed:
            raise _attr_not_allowed(leaf[0], "AddN" if addn else "CollectiveReduceV2",
                                    "cast the value to one of those dtypes before reducing (e.g. bool -> int32).")


def check_broadcastable(value: Any, what: str) -> None:
    """TF's error for dtypes its cross-worker broadcast rejects (int8, uint8, complex...), before any work."""
    if dtype_name(value) not in BROADCAST_DTYPES:
        raise _attr_not_allowed(value, "CollectiveBcastSendV2",
                                f"{what} is broadcast from the chief to every worker, which TF does only for those "
                                "dtypes: create it as int32, int64 or a float.")


def _attr_not_allowed(value: Any, kernel: str, fix: str) -> errors.InvalidArgumentError:
    """TF's error for a dtype ``kernel`` does not take, with its allowed-type list and ``fix``."""
    return errors.InvalidArgumentError(
        f"Value for attr 'T' of {tf_dtype(value)} is not in the list of allowed values: {_TF_ALLOWED[kernel]}\n\t; "
        f"NodeDef: {{{{node {kernel}}}}}\nFix: {fix}")


GATHER_DTYPES = ("float32", "float16", "float64", "int32", "int64")


def check_gatherable(leaves: Sequence[Sequence[Any]]) -> None:
    """TF's TypeError for dtypes its gathers across replicas reject (bool, strings...), before any work."""
    for leaf in leaves:
        if dtype_name(leaf[0]) not in GATHER_DTYPES:
            raise TypeError(f"Value passed to parameter 'input' has DataType {dtype_name(leaf[0])} not in list of "
                            f"allowed values: {', '.join(GATHER_DTYPES)}\nFix: cast the value to one of those "
                            "dtypes before gathering (e.g. bool -> int32).")




def check_addn_inputs(leaves: Sequence[Sequence[Any]]) -> None:
    """TF's errors when a single worker's cross-replica reduce (one local AddN) gets replicas whose values differ
    in dtype or shape; such a mismatch poisons no collective group."""
    for leaf in leaves:
        mismatch = local_mismatch(leaf)
        if mismatch is None:
            continue
        what, first, other, k = mismatch
        if what == "shape":
            raise errors.InvalidArgumentError(
                "Inputs to operation AddN of type AddN must have the same size and shape.  Input 0: "
                f"{_dims(first)} != input {k}: {_dims(other)}\n{FIX_DESYNC}")
        raise errors.InvalidArgumentError(
            f"cannot compute AddN as input #{k}(zero-based) was expected to be a {tf_dtype(first)} tensor "
            f"but is a {tf_dtype(other)} tensor\n{FIX_DESYNC}")


def _dims(a: Any) -> str:
    return "[" + ",".join(str(d) for d in shape_of(a)) + "]"
