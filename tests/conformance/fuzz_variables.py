"""Random distributed-variable cases for fuzz_against_tf.py: a variable created in ``strategy.scope()`` with a random
dtype, shape, synchronization, aggregation and trainable flag, then a short random sequence of steps: updates
(assign/assign_add/assign_sub, with read_value or not) in cross-replica context and in ``strategy.run`` with
captured, fresh, per-replica or Python values, ``scatter_*`` with IndexedSlices, reads (numpy, read_value, value,
NumPy conversion, indexing, local results, ``strategy.reduce``, operators, reads in replicas),
``extended.update``/``value_container``, ``merge_call`` updates and ``all_reduce`` of the variable in replicas.
Each step records its result (or error) and the variable's local copies after it; the sequence goes on after an
error, as a TF program catching it would. Specs are JSON (see fuzz_datasets.py)."""

from __future__ import annotations

import operator
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .cases import components, per_replica

__all__ = ["build", "generate", "outcome", "shrink"]

Spec = dict[str, Any]
DTYPES = ("float32", "float32", "float64", "int32", "int64", "bool")
SHAPES = ([], [], [2], [3], [2, 2], [3, 2])
SYNCS = ("AUTO", "AUTO", "ON_WRITE", "ON_READ", "ON_READ", "NONE")
AGGREGATIONS = ("NONE", "SUM", "MEAN", "ONLY_FIRST_REPLICA")
UPDATES = ("assign", "assign_add", "assign_sub")
SCATTERS = ("scatter_update", "scatter_add", "scatter_sub", "scatter_mul", "scatter_div", "scatter_max",
            "scatter_min")
CROSS_VALUES = ("const", "const", "python", "wrong_shape", "other_dtype", "per_replica", "same_per_replica",
                "scalar")
REPLICA_VALUES = ("captured", "fresh", "per_replica", "per_replica", "same_per_replica", "python", "wrong_shape",
                  "other_dtype")
READS = ("numpy", "read_value", "value", "asarray", "cast", "index", "local_results", "container",
         "replica_read", "replica_value", "replica_container")
OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "pow", "neg", "abs", "eq", "lt", "radd", "rsub")
OPERANDS = ("int", "float", "tensor", "numpy", "variable")
MAX_STEPS = 6
# TF's tensors in error texts, as str() and repr() write them (a matrix starting on a new line), and the line breaks
# between NumPy's rows of a matrix.
TENSOR_STR = re.compile(r"tf\.Tensor\(\n?(.*?), shape=\([\d, ]*\), dtype=\w+\)", re.DOTALL)
TENSOR_REPR = re.compile(r"<tf\.Tensor: shape=\([\d, ]*\), dtype=\w+, numpy=\n?(.*?)>", re.DOTALL)
NUMPY_ROWS = re.compile(r"\n\s*(?=\[)")


# -- generating -------------------------------------------------------------------------------------------


def _step(rng: random.Random, spec: Spec) -> list[Any]:
    """One random step for the spec's variable, leaving out TF's accidents (the comments say which)."""
    kind = rng.choice(("update", "update", "update", "replica_update", "replica_update", "scatter", "read", "read",
                       "reduce", "operator", "extended_update", "merge_update", "all_reduce"))
    if kind == "update":
        return ["update", rng.choice(UPDATES), rng.choice(CROSS_VALUES), rng.random() < 0.7]
    if kind == "replica_update":
        # Python lists only where they convert to the variable's dtype: TF's one-replica SUM and MWMS's broadcast
        # make float32/int32 tensors of them, which a float64/int64 variable refuses (see _other_dtype).
        values = [v for v in REPLICA_VALUES if not (v == "python" and spec["dtype"] in ("float64", "int64"))]
        return ["replica_update", rng.choice(UPDATES), rng.choice(values), rng.random() < 0.7]
    if kind == "scatter":
        indices = rng.choice(([0], [1], [0, 1], [1, 0], [0, 0], [2], [-1]))
        return ["scatter", rng.choice(SCATTERS), rng.choice(("cross", "replica")),
                rng.choice(("fresh", "per_replica")), indices]
    if kind == "read":
        # np.asarray of a scalar ON_READ variable fails in TF on several replicas ('object __array__ method not
        # producing an array': its aggregated read is a NumPy scalar), an accident mirrorlab does not copy.
        reads = [r for r in READS if not (r == "asarray" and not spec["shape"] and spec["sync"] == "ON_READ")]
        return ["read", rng.choice(reads)]
    if kind == "reduce":
        # No axis: TF caches reduce's function per op and axis with the first variable it saw captured, and answers
        # later variables with that one's values.
        return ["reduce", rng.choice(("SUM", "MEAN"))]
    if kind == "operator":
        # bool / NumPy array: TF's __truediv__ refuses bool and NumPy divides instead; mirrorlab's tensors are NumPy
        # arrays and it follows TF's tensor rule.
        operator = rng.choice(OPERATORS)
        operands = [o for o in OPERANDS if not (o == "numpy" and operator == "truediv" and spec["dtype"] == "bool")]
        return ["operator", operator, rng.choice(operands), rng.choice(("cross", "replica"))]
    if kind == "extended_update":
        return ["extended_update", rng.choice(UPDATES), rng.choice(("const", "per_replica")), rng.random() < 0.7]
    if kind == "merge_update":
        return ["merge_update", rng.choice(UPDATES), rng.choice(("fresh", "per_replica")),
                rng.choice((None, "SUM", "MEAN"))]
    return ["all_reduce", rng.choice(("SUM", "MEAN")), rng.choice(("variable", "read_value"))]


def generate(rng: random.Random) -> Spec:
    """A random variable case."""
    spec: Spec = {"area": "variable", "dtype": rng.choice(DTYPES), "shape": rng.choice(SHAPES),
                  "sync": rng.choice(SYNCS), "agg": rng.choice(AGGREGATIONS),
                  "trainable": rng.choice((None, None, True, False)),
                  "init": rng.choice(("tensor", "tensor", "python", "callable"))}
    spec["steps"] = [_step(rng, spec) for _ in range(rng.randint(1, MAX_STEPS))]
    return spec


def shrink(spec: Spec) -> Iterator[Spec]:
    """Fewer steps, a plainer creation."""
    for i in range(len(spec["steps"])):
        if len(spec["steps"]) > 1:
            yield {**spec, "steps": spec["steps"][:i] + spec["steps"][i + 1:]}
    if spec["trainable"] is not None:
        yield {**spec, "trainable": None}
    if spec["init"] != "tensor":
        yield {**spec, "init": "tensor"}
    if len(spec["shape"]) > 1:
        yield {**spec, "shape": spec["shape"][:1]}


# -- values -----------------------------------------------------------------------------------------------


def array(shape: list[int], dtype: str, scale: int, offset: int) -> np.ndarray:
    """``arange * scale + offset`` of ``shape`` in ``dtype``, never 0 for positive ``scale``/``offset`` (a scatter_div
    by 0 would crash TF's integer kernel); bool: the odd elements and the first one, so never all False (an all-zero
    tensor is the deliberate difference reduce_plain_tensor_zeros, see known_differences.py)."""
    size = int(np.prod(shape)) if shape else 1
    values = np.arange(size) * scale + offset
    if dtype == "bool":
        return ((values % 2 == 1) | (np.arange(size) == 0)).reshape(shape)
    return values.reshape(shape).astype(dtype)


def _other_dtype(dtype: str) -> str | None:
    """A dtype whose tensors neither framework converts to ``dtype`` (floats to integers, numbers to bool); None for
    floating variables: mirrorlab's tensors are NumPy arrays, which it casts within a kind as TF casts NumPy values,
    while TF refuses any other tensor dtype (see known_differences.py, variable_assign_other_dtype)."""
    return {"int32": "float32", "int64": "float64", "bool": "int32"}.get(dtype)


def _cross_value(api: Any, s: Any, spec: Spec, how: str, step: int) -> Any:
    """A cross-replica update's value of kind ``how`` for step ``step``."""
    shape, dtype = spec["shape"], spec["dtype"]
    if how in ("per_replica", "same_per_replica"):
        return per_replica(s, lambda i: api.constant(array(shape, dtype, 1, step + 1 + (i if how == "per_replica"
                                                                                          else 0))))
    return _plain_value(api, spec, how, step + 1)


def _plain_value(api: Any, spec: Spec, how: str, offset: int) -> Any:
    """A value made in one place: a tensor of the variable's kind, a Python list or scalar, or a tensor of another
    shape or dtype."""
    shape, dtype = spec["shape"], spec["dtype"]
    if how == "python":
        return array(shape, dtype, 1, offset).tolist()
    if how == "scalar":
        return array([], dtype, 1, offset).tolist()
    if how == "wrong_shape":
        return api.constant(array([*shape, 2] if len(shape) < 2 else shape[:1], dtype, 1, offset))
    other = _other_dtype(dtype)
    if how == "other_dtype" and other is not None:
        return api.constant(array(shape, other, 1, offset))
    return api.constant(array(shape, dtype, 1, offset))


def _replica_value(api: Any, spec: Spec, how: str, step: int, captured: dict[str, Any],
                   arguments: dict[str, Any]) -> Any:
    """A replica update's value: the captured tensor or Python list (the same objects in every replica, as a
    literal in the replica function would be), a per-replica argument (equal or not), or a tensor made in the
    replica."""
    if how in ("captured", "python"):
        return captured[how]
    if how in ("per_replica", "same_per_replica"):
        return arguments[how]
    return _plain_value(api, spec, "const" if how == "fresh" else how, step + 1)


def _slices(api: Any, spec: Spec, indices: list[int], offset: int) -> Any:
    """IndexedSlices of rows ``indices`` with values ``arange + offset`` of the variable's row shape."""
    rows = array([len(indices), *spec["shape"][1:]], spec["dtype"], 1, offset)
    return api.IndexedSlices(api.constant(rows), api.constant(np.asarray(indices, np.int64)))


def _operand(api: Any, var: Any, spec: Spec, how: str) -> Any:
    """The second operand of an operator."""
    if how == "int":
        return 2
    if how == "float":
        return 1.5
    if how == "variable":
        return var
    values = array(spec["shape"], spec["dtype"], 1, 1)
    return values if how == "numpy" else api.constant(values)


def outcome(fn: Callable[[], Any]) -> Any:
    """``fn()``, or its exception as one comparable in both frameworks: TF's tensors in the text written as NumPy
    writes their values (mirrorlab's tensors are NumPy arrays), NumPy's rows of a matrix on one line (so the
    first line holds the whole value), and no AssertionError text (TF's are empty, mirrorlab's explain: a
    deliberate difference, see known_differences.py)."""
    try:
        return fn()
    except Exception as error:
        text = "" if isinstance(error, AssertionError) else str(error)
        text = TENSOR_REPR.sub(r"\1", TENSOR_STR.sub(r"\1", text))
        return type(type(error).__name__, (Exception,), {})(NUMPY_ROWS.sub(" ", text))


# -- building ---------------------------------------------------------------------------------------------


def _create(api: Any, s: Any, spec: Spec) -> Any:
    """The spec's variable, in ``s``'s scope."""
    initial = array(spec["shape"], spec["dtype"], 1, 1)
    kwargs: dict[str, Any] = {"synchronization": getattr(api.VariableSynchronization, spec["sync"]),
                              "aggregation": getattr(api.VariableAggregation, spec["agg"])}
    if spec["trainable"] is not None:
        kwargs["trainable"] = spec["trainable"]
    with s.scope():
        if spec["init"] == "python":
            return api.Variable(initial.tolist(), dtype=spec["dtype"], **kwargs)
        if spec["init"] == "callable":
            return api.Variable(lambda: api.constant(initial), **kwargs)
        return api.Variable(api.constant(initial), **kwargs)


def _properties(var: Any) -> dict[str, Any]:
    """What the variable says about itself."""
    return {"class": type(var).__name__, "dtype": var.dtype.name, "shape": [int(d) for d in var.shape],
            "trainable": var.trainable, "synchronization": var.synchronization.name,
            "aggregation": var.aggregation.name}


def _read(api: Any, s: Any, var: Any, how: str) -> Any:
    """One way of reading the variable."""
    context = s.extended
    reads: dict[str, Callable[[], Any]] = {
        "numpy": var.numpy, "read_value": var.read_value, "value": var.value, "asarray": lambda: np.asarray(var),
        "cast": lambda: api.cast(var, "float64"), "index": lambda: var[0],
        "local_results": lambda: components(s, var),
        "container": lambda: [context.value_container(var) is var,
                              context.value_container(s.experimental_local_results(var)[0]) is var],
        "replica_read": lambda: s.run(var.read_value), "replica_value": lambda: s.run(var.value),
        "replica_container": lambda: s.run(lambda: context.value_container(var) is var)}
    return reads[how]()


def _operator(var: Any, name: str, operand: Any) -> Any:
    """``var <name> operand`` (``r*``: the operand first)."""
    if name in ("neg", "abs"):
        return getattr(operator, name)(var)
    if name in ("radd", "rsub"):
        return getattr(operator, name[1:])(operand, var)
    return getattr(operator, name)(var, operand)


def _merge_update(api: Any, s: Any, var: Any, spec: Spec, step: list[Any], k: int) -> Any:
    """The optimizer pattern: each replica's value handed to ``merge_call``, which (optionally) reduces it to the
    variable and updates every copy with ``extended.update``."""
    _, kind, how, op = step

    def merge_fn(strategy: Any, value: Any) -> Any:
        if op is not None:
            value = strategy.extended.reduce_to(getattr(api.ReduceOp, op), value, var)
        return strategy.extended.update(var, lambda copy, x: getattr(copy, kind)(x), args=(value,))

    def replica_fn(argument: Any) -> Any:
        value = argument if how == "per_replica" else api.constant(array(spec["shape"], spec["dtype"], 1, k + 1))
        return api.get_replica_context().merge_call(merge_fn, args=(value,))
    return s.run(replica_fn, args=(_cross_value(api, s, spec, "per_replica", k),))


def _replica_update(api: Any, s: Any, var: Any, spec: Spec, step: list[Any], k: int) -> Any:
    """An update inside ``strategy.run`` with the step's kind of value (see _replica_value)."""
    _, kind, how, read = step
    captured = {"captured": api.constant(array(spec["shape"], spec["dtype"], 1, k + 1)),
                "python": array(spec["shape"], spec["dtype"], 1, k + 1).tolist()}
    arguments = {"per_replica": _cross_value(api, s, spec, "per_replica", k),
                 "same_per_replica": _cross_value(api, s, spec, "same_per_replica", k)}
    return s.run(lambda x: getattr(var, kind)(_replica_value(api, spec, how, k, captured, x), read_value=read),
                 args=(arguments,))


def _run_step(api: Any, s: Any, var: Any, spec: Spec, step: list[Any], k: int) -> Any:
    """One step's result (the update's return value, the read, the reduction...)."""
    name = step[0]
    if name == "update":
        _, kind, how, read = step
        return getattr(var, kind)(_cross_value(api, s, spec, how, k), read_value=read)
    if name == "replica_update":
        return _replica_update(api, s, var, spec, step, k)
    if name == "scatter":
        _, kind, where, how, indices = step
        if where == "cross":
            return getattr(var, kind)(_slices(api, spec, indices, k + 1))
        slices = per_replica(s, lambda i: _slices(api, spec, indices, k + 1 + (i if how == "per_replica" else 0)))
        return s.run(lambda x: getattr(var, kind)(x), args=(slices,))
    if name == "read":
        return _read(api, s, var, step[1])
    if name == "reduce":
        return s.reduce(getattr(api.ReduceOp, step[1]), var, axis=None)
    if name == "operator":
        _, op, how, where = step
        if where == "cross":
            return _operator(var, op, _operand(api, var, spec, how))
        return s.run(lambda: _operator(var, op, _operand(api, var, spec, how)))
    if name == "extended_update":
        _, kind, how, group = step
        return s.extended.update(var, lambda copy, x: getattr(copy, kind)(x),
                                 args=(_cross_value(api, s, spec, how, k),), group=group)
    if name == "merge_update":
        return _merge_update(api, s, var, spec, step, k)
    _, op, what = step
    context = api.get_replica_context
    return s.run(lambda: context().all_reduce(getattr(api.ReduceOp, op), var if what == "variable"
                                               else var.read_value()))


def build(spec: Spec) -> Callable[[Any, Any], dict[str, Any]]:
    """The case function of ``spec``: create the variable, then each step's result and the copies after it."""
    def fn(api: Any, s: Any) -> dict[str, Any]:
        var = outcome(lambda: _create(api, s, spec))
        if isinstance(var, Exception):
            return {"create": var}
        result: dict[str, Any] = {"properties": outcome(lambda: _properties(var))}
        for k, step in enumerate(spec["steps"]):
            result[f"step{k}"] = {"result": outcome(lambda step=step, k=k: _run_step(api, s, var, spec, step, k)),
                                  "copies": outcome(lambda: components(s, var))}
        return result
    return fn
