"""The small API that the conformance cases are written against, for TensorFlow and for mirrorlab.

A case only touches ``api`` (and the strategy the runner hands it), so the very same case code runs on
TF 2.21 (recording the golden files, or live) and on mirrorlab. ``Api.normalize`` turns whatever a case
returns into plain JSON data, identically for both frameworks:

* arrays (tensors, NumPy arrays, variables via ``.numpy()``): ``{"dtype", "shape", "value"}`` with NumPy
  dtype names and NaN/inf spelled ``"nan"``/``"inf"``/``"-inf"``;
* distributed values: ``{"distributed": class name, "values": [...]}`` via ``experimental_local_results``;
* tuples, namedtuples and dicts are tagged (``{"tuple": [...]}``, ``{"namedtuple": ..}``, ``{"dict": {...}}``)
  so that a tuple never compares equal to a list; lists and Python scalars stay as they are;
* exceptions: ``{"error": class name, "message": first line of str(e)}``.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from .cases import Case

__all__ = ["Api", "MirrorlabApi", "TfApi", "as_numpy", "error_json"]

Result = dict[str, Any]


def error_json(error: BaseException) -> dict[str, str]:
    """An exception as its class name and the first line of its message."""
    text = str(error)
    return {"error": type(error).__name__, "message": text.splitlines()[0] if text else ""}


def _float_json(value: float) -> float | str:
    """A float, with NaN and the infinities as strings (JSON has no spelling for them)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _list_json(value: Any) -> Any:
    """``ndarray.tolist()`` output with its floats made JSON-safe."""
    if isinstance(value, list):
        return [_list_json(v) for v in value]
    if isinstance(value, bytes):  # a string tensor's items
        return value.decode("utf-8", "backslashreplace")
    return _float_json(value) if isinstance(value, float) else value


def as_numpy(value: Any) -> np.ndarray:
    """A tensor's, variable's or array's value as a NumPy array; a scalar string as TF's ``.numpy()`` hands it out
    (``bytes``, so an ``S`` array), whether it comes from TF or as mirrorlab's 0-d object array."""
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    if array.ndim == 0 and array.dtype == object and isinstance(array.item(), bytes):
        return np.asarray(array.item())
    return array


def _array_json(array: Any) -> dict[str, Any]:
    """An array as dtype name, shape and nested-list value."""
    array = as_numpy(array)
    return {"dtype": array.dtype.name, "shape": list(array.shape), "value": _list_json(array.tolist())}


class Api:
    """What the cases use; subclasses bind it to one framework."""

    framework: str
    ReduceOp: Any
    Variable: Any
    VariableAggregation: Any
    VariableSynchronization: Any
    CommunicationOptions: Any
    CommunicationImplementation: Any
    get_replica_context: Any
    get_strategy: Any
    has_strategy: Any
    in_cross_replica_context: Any
    MultiWorkerMirroredStrategy: Any
    IndexedSlices: Any
    MirroredStrategy: Any
    distribute: Any

    def constant(self, value: Any, dtype: str | None = None) -> Any:
        """A tensor of ``value`` (Python floats default to float32 and ints to int32, as in TF)."""
        raise NotImplementedError

    def mirrored(self, replicas: int) -> Any:
        """A MirroredStrategy over ``replicas`` CPU devices of this process."""
        raise NotImplementedError

    def mwms(self) -> Any:
        """A MultiWorkerMirroredStrategy configured from this worker's TF_CONFIG (local without one)."""
        raise NotImplementedError

    def is_distributed_values(self, value: Any) -> bool:
        """True for PerReplica/Mirrored values (distributed variables excluded)."""
        raise NotImplementedError

    # The dataset conformance cases (dataset_cases.py) also use ``api.data`` (``tf.data`` / ``ml.data``).
    data: Any
    # The checkpoint conformance cases (checkpoint_cases.py) use ``api.train`` (``tf.train`` / ``ml.train``).
    train: Any
    # ``nn.compute_average_loss`` (``tf.nn`` / ``ml.nn``).
    nn: Any

    def cast(self, value: Any, dtype: str) -> Any:
        """``value`` converted to the NumPy-named ``dtype`` (``tf.cast`` on TF)."""
        raise NotImplementedError

    def parse_int64(self, line: Any) -> Any:
        """A text line (scalar byte string) parsed as an int64 scalar (``tf.strings.to_number`` on TF)."""
        raise NotImplementedError

    def strategy_for(self, setup: str) -> Any:
        """The strategy a setup runs its cases on: A = MirroredStrategy over 2 CPUs, else MWMS."""
        return self.mirrored(2) if setup == "A" else self.mwms()

    def run_case(self, case: Case, strategy: Any) -> Result:
        """Run ``case`` on this worker and normalize every labelled result (a raising case gives ``"case"``)."""
        try:
            result = case.fn(self, strategy)
        except Exception as error:
            return {"case": error_json(error)}
        return {label: self.normalize(value, strategy) for label, value in result.items()}

    def run_setup(self, case: Case, setup: str) -> list[Result]:
        """The results of ``case`` on every worker of ``setup``; here the single worker of A or B."""
        if setup not in ("A", "B"):
            raise ValueError(f"{self.framework} runs setup {setup} in several processes, not in run_setup")
        return [self.run_case(case, self.strategy_for(setup))]

    def normalize(self, value: Any, strategy: Any) -> Any:
        """``value`` as plain JSON data (see the module docstring)."""
        if isinstance(value, BaseException):
            return error_json(value)
        if self.is_distributed_values(value):
            return {"distributed": type(value).__name__,
                    "values": [self.normalize(v, strategy) for v in strategy.experimental_local_results(value)]}
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return _float_json(value)
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            return {"namedtuple": type(value).__name__,
                    "fields": {f: self.normalize(getattr(value, f), strategy) for f in value._fields}}
        if isinstance(value, tuple):
            return {"tuple": [self.normalize(v, strategy) for v in value]}
        if isinstance(value, list):
            return [self.normalize(v, strategy) for v in value]
        if isinstance(value, dict):
            return {"dict": {str(k): self.normalize(v, strategy) for k, v in value.items()}}
        if isinstance(value, (np.ndarray, np.generic)):
            return _array_json(np.asarray(value))
        if callable(getattr(value, "numpy", None)):  # tensors and variables (a read may raise)
            try:
                return _array_json(np.asarray(value.numpy()))
            except Exception as error:
                return error_json(error)
        raise TypeError(f"cannot normalize a {type(value).__module__}.{type(value).__name__}")


class MirrorlabApi(Api):
    """The API on mirrorlab: strategies are created afresh for every case."""

    framework = "mirrorlab"

    def __init__(self) -> None:
        """Bind mirrorlab's names."""
        import mirrorlab.tf as ml
        from mirrorlab.tensor import as_tensor

        self._ml = ml
        self._as_tensor = as_tensor
        self.ReduceOp = ml.ReduceOp
        self.Variable = ml.Variable
        self.VariableAggregation = ml.VariableAggregation
        self.VariableSynchronization = ml.VariableSynchronization
        self.CommunicationOptions = ml.CommunicationOptions
        self.CommunicationImplementation = ml.CommunicationImplementation
        self.get_replica_context = ml.get_replica_context
        self.get_strategy = ml.get_strategy
        self.has_strategy = ml.has_strategy
        self.in_cross_replica_context = ml.in_cross_replica_context
        self.MultiWorkerMirroredStrategy = ml.MultiWorkerMirroredStrategy
        self.IndexedSlices = ml.IndexedSlices
        self.MirroredStrategy = ml.MirroredStrategy
        self.data = ml.data
        self.distribute = ml.distribute
        self.InputOptions = ml.distribute.InputOptions
        self.InputReplicationMode = ml.distribute.InputReplicationMode
        self.train = ml.train
        self.nn = ml.nn

    def constant(self, value: Any, dtype: str | None = None) -> Any:
        """A NumPy array with TF's dtype inference for Python values."""
        return self._as_tensor(value) if dtype is None else np.asarray(value, dtype=dtype)

    def mirrored(self, replicas: int) -> Any:
        """``ml.MirroredStrategy`` over ``/cpu:0`` .. ``/cpu:{replicas-1}``."""
        return self._ml.MirroredStrategy([f"/cpu:{k}" for k in range(replicas)])

    def mwms(self) -> Any:
        """``ml.MultiWorkerMirroredStrategy()``: joins the simulated cluster inside a SimCluster."""
        return self.MultiWorkerMirroredStrategy()

    def is_distributed_values(self, value: Any) -> bool:
        """``ml.DistributedValues`` that are not variables."""
        return isinstance(value, self._ml.DistributedValues) and not isinstance(value, self._ml.Variable)

    def cast(self, value: Any, dtype: str) -> Any:
        """``np.asarray(value).astype(dtype)``."""
        return np.asarray(value).astype(dtype)

    def parse_int64(self, line: Any) -> Any:
        """``line.astype(np.int64)`` (NumPy parses byte strings of digits)."""
        return np.asarray(line).astype(np.int64)

    def run_setup(self, case: Case, setup: str) -> list[Result]:
        """A and B in this process; C and Cchief on a simulated 2-worker cluster (with a chief for Cchief)."""
        if setup in ("A", "B"):
            return super().run_setup(case, setup)
        from mirrorlab.sim import SimCluster

        cluster = SimCluster(workers=2, chief=setup == "Cchief", check_mirrors=False)  # TF: copies may differ
        return cluster.run(lambda: self.run_case(case, self.strategy_for(setup))).values()


class TfApi(Api):
    """The API on TensorFlow 2.21. One process can host only one strategy of each kind (MWMS joins its
    cluster once), so strategies are created on first use and shared by every case."""

    framework = "tensorflow"

    def __init__(self, logical_cpus: int = 1) -> None:
        """Import TF (with ``logical_cpus`` logical CPU devices) and bind its names."""
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        if logical_cpus > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus)
        self.tf = tf
        self._strategies: dict[str, Any] = {}
        self.version = tf.__version__
        self.ReduceOp = tf.distribute.ReduceOp
        self.Variable = tf.Variable
        self.VariableAggregation = tf.VariableAggregation
        self.VariableSynchronization = tf.VariableSynchronization
        self.CommunicationOptions = tf.distribute.experimental.CommunicationOptions
        self.CommunicationImplementation = tf.distribute.experimental.CommunicationImplementation
        self.get_replica_context = tf.distribute.get_replica_context
        self.get_strategy = tf.distribute.get_strategy
        self.has_strategy = tf.distribute.has_strategy
        self.in_cross_replica_context = tf.distribute.in_cross_replica_context
        self.MultiWorkerMirroredStrategy = tf.distribute.MultiWorkerMirroredStrategy
        self.IndexedSlices = tf.IndexedSlices
        self.MirroredStrategy = tf.distribute.MirroredStrategy
        self.data = tf.data
        self.distribute = tf.distribute
        self.InputOptions = tf.distribute.InputOptions
        self.InputReplicationMode = tf.distribute.InputReplicationMode
        self.train = tf.train
        self.nn = tf.nn

    def constant(self, value: Any, dtype: str | None = None) -> Any:
        """``tf.constant``."""
        return self.tf.constant(value, dtype=dtype)

    def mirrored(self, replicas: int) -> Any:
        """``tf.distribute.MirroredStrategy`` over the first ``replicas`` logical CPUs (created once)."""
        key = f"mirrored:{replicas}"
        if key not in self._strategies:
            self._strategies[key] = self.tf.distribute.MirroredStrategy([f"/cpu:{k}" for k in range(replicas)])
        return self._strategies[key]

    def mwms(self) -> Any:
        """``tf.distribute.MultiWorkerMirroredStrategy()`` (created once per process)."""
        if "mwms" not in self._strategies:
            self._strategies["mwms"] = self.MultiWorkerMirroredStrategy()
        return self._strategies["mwms"]

    def is_distributed_values(self, value: Any) -> bool:
        """``tf.distribute.DistributedValues`` that are not variables."""
        return isinstance(value, self.tf.distribute.DistributedValues) and not isinstance(value, self.tf.Variable)

    def cast(self, value: Any, dtype: str) -> Any:
        """``tf.cast``."""
        return self.tf.cast(value, dtype)

    def parse_int64(self, line: Any) -> Any:
        """``tf.strings.to_number(line, tf.int64)``."""
        return self.tf.strings.to_number(line, self.tf.int64)
