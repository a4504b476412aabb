"""Differences between mirrorlab and TF 2.21 that the conformance cases found and mirrorlab has not fixed yet,
and the pytest parameters (setup, case) that mark them ``xfail(strict=True)``.

Each entry names the case, the setups where it differs, and the exact difference (mirrorlab vs TF). Once
mirrorlab is fixed the strict xfail fails as XPASS: delete the entry then. TF bugs that mirrorlab does not
copy on purpose are not listed here: they are the ``tf_only_quirk`` cases in ``cases.py`` (skipped).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from mirrorlab.runtime.local import count_gpus

from .cases import CASES

__all__ = ["KNOWN_DIFFERENCES", "case_params"]

ALL = ("A", "B", "C")
INT32_SUM = ("int32 SUM along an axis: mirrorlab returns int64 (np.sum promotes int32), e.g. reduce(SUM, "
             "[[1, 2], [3, 4]] per replica, axis=0) -> int64 [9, 14] in mirrorlab vs int32 [9, 14] in TF")

KNOWN_DIFFERENCES: dict[str, tuple[tuple[str, ...], str]] = {
    "reduce_dtypes[int32]": (ALL, INT32_SUM),
    "reduce_uneven_batches[int32]": (ALL, INT32_SUM),
    "reduce_plain_int_tensor": (ALL, INT32_SUM),
    "reduce_plain_tensor_zeros": (
        ("A",), "all-zero tensor, reduce(SUM, axis=None) over 2 replicas: mirrorlab returns [0., 0.] (its tensors "
                "are NumPy arrays, which get TF's all-zero-ndarray special case); TF raises ValueError 'A "
                "non-DistributedValues value tf.Tensor([0. 0.], ...) cannot be reduced with the given reduce op "
                "ReduceOp.SUM.'"),
    "reduce_assertion_errors": (
        ALL, "AssertionError message: mirrorlab explains ('reduce(SUM) of a Mirrored value (or MirroredVariable) "
             "would add up identical copies; ...', 'reduce_op must be a tf.distribute.ReduceOp or its name, got "
             "None'); TF's AssertionError has an empty message ''"),
    "reduce_nests_axis0": (
        ALL, "reduce of a nest with an axis: mirrorlab reduces leaf by leaf ((p1, p1) SUM axis 0 -> tuple (3.0, "
             "3.0) in A); TF packs the nest into one tensor first (SUM -> one tensor [2., 4.]; MEAN -> "
             "AttributeError; members of different shapes -> ValueError; dict -> TypeError)"),
    "variable_synchronization": (
        ALL, "synchronization of a variable created with the default AUTO: mirrorlab reports AUTO, TF ON_WRITE"),
    "on_read_none_assign_without_read": (
        ALL, "ON_READ NONE variable, cross-replica assign(7.0, read_value=False): mirrorlab raises ValueError "
             "'Could not convert from `tf.VariableAggregation` VariableAggregationV2.NONE to`tf.distribute."
             "ReduceOp` type' (it reads the result anyway; the assignment itself happens); TF returns None"),
    "on_read_sum_assign_python_list": (
        ALL, "ON_READ SUM variable of shape (2,), cross-replica assign([1., 2., 3.]): mirrorlab raises ValueError "
             "'Cannot assign value to variable ...: Shape mismatch...'; TF raises TypeError \"unsupported operand "
             "type(s) for /: 'list' and 'int'\" (it divides the Python list by the replica count first)"),
    "replica_context_devices": (
        ("A", "B"), "ReplicaContext.devices: mirrorlab returns a tuple of one device string "
                    "('/job:localhost/replica:0/task:0/device:CPU:0',); TF returns a list holding a list, "
                    "[['/job:localhost/replica:0/task:0/device:CPU:0']]"),
    "all_reduce_invalid_options": (
        ("B",), "all_reduce(..., options='x') with one replica: mirrorlab returns the value without looking at "
                "options; TF raises AttributeError \"'str' object has no attribute 'bytes_per_pack'\""),
    "gather_python_list": (
        ("B", "C"), "strategy.gather([1.0, 2.0], axis=0) in MWMS: TF converts the list to one float32 tensor "
                    "(B: [1., 2.]; C: gathered to [1., 2., 1., 2.]); mirrorlab treats it as a nest of scalars "
                    "(B: returns the list [1.0, 2.0]; C: ValueError 'axis 0 is out of range for a value of rank "
                    "0 in gather/all_gather...')"),
    "gather_nests_mwms": (
        ("B", "C"), "strategy.gather of a tuple/dict of PerReplica in MWMS: mirrorlab gathers leaf by leaf (e.g. C: "
                    "a tuple of two [3, 2] tensors); TF raises ValueError 'Attempt to convert a value "
                    "(PerReplica:{...}) with an unsupported type (...) to a Tensor.'"),
}


def case_params(setups: Iterable[str]) -> list:
    """``pytest.param(setup, case_name)`` for every case of ``setups``: TF-only quirks are skipped and the
    known differences are ``xfail(strict=True)`` with the difference as the reason. B is skipped where
    mirrorlab sees GPUs: its local MWMS would then use them, while the golden B ran on one CPU."""
    gpus = count_gpus()
    params = []
    for setup in setups:
        for name, case in CASES.items():
            if setup not in case.setups:
                continue
            marks = []
            if setup == "B" and gpus:
                marks.append(pytest.mark.skip(reason=f"MWMS would run on the {gpus} visible GPUs; B is CPU-only"))
            elif case.quirk_in(setup):
                marks.append(pytest.mark.skip(reason="TF-only quirk that mirrorlab deliberately does not copy "
                                                     "(see the comment on the case in cases.py)"))
            elif name in KNOWN_DIFFERENCES and setup in KNOWN_DIFFERENCES[name][0]:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[name][1]))
            params.append(pytest.param(setup, name, id=f"{setup}-{name}", marks=marks))
    return params
