"""TensorFlow's rules for the core (``mirrorlab.frontend``): TF's conversions and dtype names, name scopes, the
gradient tape's variable reads and tf.data pipelines. Installed once, when ``mirrorlab.tf`` is imported."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..distribute.variables import _new_tensor
from ..frontend import Frontend, install_frontend
from .array_ops import gather
from .autodiff import Tracked, watched, watching
from .constant import constant
from .data.dataset import INFINITE_CARDINALITY, Dataset, TensorSpec, UnknownSpecError
from .data.optional import Optional
from .data.sharding import DeclaredShapeError, worker_pipeline
from .dtypes import as_dtype
from .manip_ops import gather_nd
from .name_scope import current_scope
from .tensor_conversion import convert_to_tensor

__all__ = ["TensorFlowFrontend"]


class TensorFlowFrontend(Frontend):
    """The rules of TF 2.21's eager runtime and tf.data, as the rest of ``mirrorlab.tf`` implements them."""

    def constant(self, value: Any, dtype: np.dtype | None) -> Any:
        return constant(value, dtype)

    def as_dtype(self, dtype: Any) -> np.dtype:
        return as_dtype(dtype)

    def convert_to_tensor(self, value: Any, dtype: Any = None) -> Any:
        return convert_to_tensor(value) if dtype is None else convert_to_tensor(value, dtype)

    def name_scope(self) -> str:
        return current_scope()

    def watched(self, value: Any) -> Any:
        return watched(value)

    def variable_leaf(self, variable: Any) -> Any:
        if watching(variable):
            return Tracked(_new_tensor(variable._read()), lambda g: [(variable, g)])
        return variable

    def gather(self, value: Any, indices: Any) -> Any:
        return gather(value, indices)

    def gather_nd(self, value: Any, indices: Any) -> Any:
        return gather_nd(value, indices)

    infinite_cardinality = INFINITE_CARDINALITY
    unknown_spec_error = UnknownSpecError
    declared_shape_error = DeclaredShapeError

    def is_dataset(self, value: Any) -> bool:
        return isinstance(value, Dataset)

    def worker_pipeline(self, dataset: Any, num_workers: int, rank: int, replicas_per_worker: int) -> Any:
        return worker_pipeline(dataset, num_workers, rank, replicas_per_worker)

    def spec(self, shape: tuple, dtype: Any) -> Any:
        return TensorSpec(shape, dtype)

    def spec_of(self, value: Any) -> Any:
        return TensorSpec.of(value)

    def is_spec(self, value: Any) -> bool:
        return isinstance(value, TensorSpec)

    def optional(self, value: Any, spec: Any, present: bool) -> Any:
        return Optional(value, spec, present)


install_frontend(TensorFlowFrontend())
