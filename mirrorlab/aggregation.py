"""How values combine across replicas: ``ReduceOp`` and the variable synchronization/aggregation enums."""

from __future__ import annotations

import enum

__all__ = ["ReduceOp", "VariableSynchronization", "VariableAggregation", "VariableAggregationV2"]


class VariableSynchronization(enum.Enum):
    """When a distributed variable's copies are brought in sync (TF's ``tf.VariableSynchronization``)."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregationV2(enum.Enum):
    """How replica updates (ON_WRITE) or reads (ON_READ) are combined (TF's ``tf.VariableAggregation``)."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3


VariableAggregation = VariableAggregationV2


class ReduceOp(enum.Enum):
    """Reduction across replicas; only SUM and MEAN exist, as in TF."""

    SUM = "SUM"
    MEAN = "MEAN"

    @staticmethod
    def from_variable_aggregation(aggregation: VariableAggregationV2) -> "ReduceOp":
        """The ReduceOp for a SUM or MEAN aggregation; anything else raises TF's ValueError."""
        mapping = {VariableAggregationV2.SUM: ReduceOp.SUM, VariableAggregationV2.MEAN: ReduceOp.MEAN}
        if aggregation not in mapping:
            raise ValueError(
                f"Could not convert from `tf.VariableAggregation` {aggregation} to"
                "`tf.distribute.ReduceOp` type"
            )
        return mapping[aggregation]

    @classmethod
    def coerce(cls, value: "ReduceOp | str") -> "ReduceOp":
        """Accept a ReduceOp or its name in any case (``"sum"``), as TF does."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            op = _REDUCE_OPS.get(value)  # (an Enum lookup by value costs a microsecond; ops are named every step)
            return cls(value.upper()) if op is None else op
        return cls(value)


_REDUCE_OPS = {spelling: op for op in ReduceOp for spelling in (op.value, op.value.lower())}
"""The common spellings of each ReduceOp's name (any other case goes through the Enum)."""
